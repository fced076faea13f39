// runtime/learning_rate.h: which training steps get their learning rate from a LearningRate node,
// the graph that results, and the CPU kernel against kernels/numerics/lr_schedule.h's formula (the
// same function the host used before; lr_schedule_test checks it against hand-computed rates).
#include "runtime/learning_rate.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/numerics/lr_schedule.h"
#include "runtime/conv_fusion.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/core/graph_executor.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

// `name` with each "__" as "." (the text format's names have no dots).
std::string Dotted(std::string name) {
  for (size_t at; (at = name.find("__")) != std::string::npos;) name.replace(at, 2, ".");
  return name;
}

// A step reading the rate as `lr_type ampc.lr` and the counter ampc.step.
onnx::GraphProto Step(const std::string& lr_type) {
  onnx::GraphProto graph = testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g ()" + lr_type + R"( ampc__lr, float[3] w, int64 ampc__step) => (float[3] w2) {
  d = Mul(w, ampc__lr)
  w2 = Sub(w, d)
}
)")
                               .graph();
  for (auto& input : *graph.mutable_input()) input.set_name(Dotted(input.name()));
  for (auto& node : *graph.mutable_node()) {
    for (std::string& name : *node.mutable_input()) name = Dotted(name);
  }
  return graph;
}

TEST(LearningRateTest, AScalarRateInputBecomesTheScheduleAndAFirstNode) {
  onnx::GraphProto graph = Step("float");
  ASSERT_TRUE(InsertLearningRateNode(graph));
  ASSERT_EQ(graph.input_size(), 3);
  EXPECT_EQ(graph.input(0).name(), kScheduleInput);  // in the rate's place
  EXPECT_EQ(graph.input(0).type().tensor_type().elem_type(), onnx::TensorProto::DOUBLE);
  EXPECT_EQ(graph.input(0).type().tensor_type().shape().dim(0).dim_value(), kRateWords);
  ASSERT_EQ(graph.node_size(), 3);
  const onnx::NodeProto& node = graph.node(0);
  EXPECT_EQ(node.op_type(), "LearningRate");
  EXPECT_EQ(node.domain(), kRuntimeDomain);
  EXPECT_EQ(std::vector<std::string>(node.input().begin(), node.input().end()),
            (std::vector<std::string>{kScheduleInput, "ampc.step"}));
  EXPECT_EQ(node.output(0), "ampc.lr");
  EXPECT_EQ(graph.node(1).op_type(), "Mul");
  ASSERT_EQ(graph.output_size(), 2);
  EXPECT_EQ(graph.output(1).name(), "ampc.lr");
  EXPECT_EQ(graph.output(1).type().tensor_type().elem_type(), onnx::TensorProto::FLOAT);
}

TEST(LearningRateTest, OtherRateInputsStayAsTheyAre) {
  for (const std::string type : {"float[2]", "double"}) {
    onnx::GraphProto graph = Step(type);
    const std::string before = graph.SerializeAsString();
    EXPECT_FALSE(InsertLearningRateNode(graph)) << type;
    EXPECT_EQ(graph.SerializeAsString(), before) << type;
  }
}

constexpr char kNode[] = R"(
<ir_version: 8, opset_import: ["" : 17, "ai.ampc.runtime" : 1]>
g (double[N] words, int64 step) => (float rate) {
  rate = ai.ampc.runtime.LearningRate (words, step)
}
)";

// The node's rate for `words` at `step`.
absl::StatusOr<float> RateAt(CpuBackend& cpu, const Tensor& words, int64_t step) {
  ExecutorEnv env{DefaultRegistry(), cpu, {{"", 17}, {kRuntimeDomain, 1}}};
  const onnx::ModelProto model = testing::ParseModelText(kNode);  // the kernel reads its node
  auto executor = GraphExecutor::Create(model.graph(), env, TypeMap());
  if (!executor.ok()) return executor.status();
  const std::vector<Tensor> inputs = {words, testing::Int64s({}, {step})};
  auto outputs = (*executor)->Run(inputs, {});
  if (!outputs.ok()) return outputs.status();
  return (*outputs)[0].data<float>()[0];
}

// Every schedule at steps around the warm-up's end and past the cosine's: the float of the
// host's double formula, bit for bit.
TEST(LearningRateTest, TheCpuKernelIsTheScheduleAtTheStep) {
  CpuBackend cpu(1);
  LrSchedule warmup, cosine;
  warmup.type = LrSchedule::Type::kLinearWarmup;
  warmup.warmup_steps = 10;
  cosine.type = LrSchedule::Type::kCosine;
  cosine.warmup_steps = 5;
  cosine.total_steps = 105;
  cosine.min_lr = 1e-5;
  for (const LrSchedule& schedule : {LrSchedule{}, warmup, cosine}) {
    Tensor words = Tensor::Host(DType::kDouble, {kRateWords});
    EncodeLearningRate(schedule, 0.03, words.data<double>());
    for (int64_t step : {0, 1, 4, 5, 9, 10, 11, 60, 104, 105, 1000}) {
      auto rate = RateAt(cpu, words, step);
      ASSERT_TRUE(rate.ok()) << rate.status();
      EXPECT_EQ(*rate, static_cast<float>(ScheduledLearningRate(schedule, 0.03, step)))
          << "type " << static_cast<int>(schedule.type) << ", step " << step;
    }
  }
  Tensor words = Tensor::Host(DType::kDouble, {kRateWords});
  EncodeLearningRate(cosine, 0.03, words.data<double>());
  EXPECT_EQ(*RateAt(cpu, words, 5), 0.03f);    // the cosine's start
  EXPECT_EQ(*RateAt(cpu, words, 500), 1e-5f);  // its floor
  EXPECT_EQ(*RateAt(cpu, words, 0), 0.006f);   // the warm-up's first step: 0.03 / 5
}

TEST(LearningRateTest, AScheduleOfTheWrongSizeIsRefusedNamingTheNode) {
  CpuBackend cpu(1);
  auto rate = RateAt(cpu, Tensor::Host(DType::kDouble, {3}), 0);
  ASSERT_FALSE(rate.ok());
  EXPECT_NE(rate.status().message().find("LearningRate"), std::string::npos) << rate.status();
  EXPECT_NE(rate.status().message().find("must hold 5 doubles"), std::string::npos)
      << rate.status();
}

}  // namespace
}  // namespace ampc
