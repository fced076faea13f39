// runtime/optimizer_fusion.h: which ai.ampc Adam and SGD nodes become one MultiAdam or MultiSGD,
// when CheckFinite and UnscaleClip become one CheckUnscaleClip, and that the fused graph computes
// the same bits as the unfused one on the CPU (the CUDA kernels are the multi-tensor launchers
// cuda_scaler_test checks with 65 tensors; cuda_scaler_parity_test has CheckUnscaleClip).
#include "runtime/optimizer_fusion.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/cpu_kernels.h"
#include "passes/opset/training_ops.h"
#include "runtime/conv_fusion.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/core/graph_executor.h"
#include "tests/support/model_text.h"
#include "tests/support/scaler_inputs.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

// Three parameters' Adam nodes; `between` goes after the first, `lr3` is the third's lr input.
std::string Model(const std::string& between = "", const std::string& lr3 = "lr",
                  const std::string& attributes3 = "weight_decay = 0.01, decoupled = 1") {
  return absl::StrCat(R"(
<ir_version: 8, opset_import: ["" : 17, "ai.ampc" : 1]>
g (bool skip, float lr, float lr2, int64 step, float[3] p1, float[3] g1, float[3] m1, float[3] v1,
   float[2, 2] p2, float[2, 2] g2, float[2, 2] m2, float[2, 2] v2,
   float[5] p3, float[5] g3, float[5] m3, float[5] v3)
  => (float[3] q1, float[3] n1, float[3] w1, float[2, 2] q2, float[2, 2] n2, float[2, 2] w2,
      float[5] q3, float[5] n3, float[5] w3) {
  q1, n1, w1 = ai.ampc.Adam <weight_decay = 0.01, decoupled = 1> (skip, lr, step, p1, g1, m1, v1)
  )",
                      between, R"(
  q2, n2, w2 = ai.ampc.Adam <decoupled = 1, weight_decay = 0.01> (skip, lr, step, p2, g2, m2, v2)
  q3, n3, w3 = ai.ampc.Adam <)",
                      attributes3, "> (skip, ", lr3, ", step, p3, g3, m3, v3)\n}\n");
}

TEST(OptimizerFusionTest, AdamsSharingScalarsAndAttributesBecomeOneMultiAdam) {
  onnx::ModelProto model = testing::ParseModelText(Model());
  EXPECT_EQ(FuseOptimizers(*model.mutable_graph()), 2);
  ASSERT_EQ(model.graph().node_size(), 1);
  const onnx::NodeProto& fused = model.graph().node(0);
  EXPECT_EQ(fused.domain(), kRuntimeDomain);
  EXPECT_EQ(fused.op_type(), "MultiAdam");
  ASSERT_EQ(fused.input_size(), 3 + 3 * 4);
  EXPECT_EQ(fused.input(3), "p1");
  EXPECT_EQ(fused.input(7), "p2");
  EXPECT_EQ(fused.input(14), "v3");
  ASSERT_EQ(fused.output_size(), 9);
  EXPECT_EQ(fused.output(3), "q2");
  EXPECT_EQ(fused.attribute_size(), 2);
}

TEST(OptimizerFusionTest, OtherScalarsOrAttributesMakeAnotherGroup) {
  onnx::ModelProto other_lr = testing::ParseModelText(Model("", "lr2"));
  EXPECT_EQ(FuseOptimizers(*other_lr.mutable_graph()), 1);
  ASSERT_EQ(other_lr.graph().node_size(), 2);
  EXPECT_EQ(other_lr.graph().node(0).op_type(), "MultiAdam");
  EXPECT_EQ(other_lr.graph().node(1).op_type(), "Adam");
  onnx::ModelProto other_decay =
      testing::ParseModelText(Model("", "lr", "weight_decay = 0.02, decoupled = 1"));
  EXPECT_EQ(FuseOptimizers(*other_decay.mutable_graph()), 1);
}

TEST(OptimizerFusionTest, NoFusionWhereANodeBetweenReadsAnUpdate) {
  onnx::ModelProto model = testing::ParseModelText(Model("r = Neg(q1)"));
  const std::string before = model.SerializeAsString();
  EXPECT_EQ(FuseOptimizers(*model.mutable_graph()), 0);
  EXPECT_EQ(model.SerializeAsString(), before);
}

// The outputs of `graph` on `cpu` for `inputs` (in the graph's input order).
std::vector<Tensor> RunOnCpu(CpuBackend& cpu, const onnx::GraphProto& graph,
                             const std::vector<Tensor>& inputs) {
  ExecutorEnv env{DefaultRegistry(), cpu, {{"", 17}, {"ai.ampc", 1}, {kRuntimeDomain, 1}}};
  auto executor = GraphExecutor::Create(graph, env, TypeMap());
  EXPECT_TRUE(executor.ok()) << executor.status();
  if (!executor.ok()) return {};
  auto outputs = (*executor)->Run(inputs, {});
  EXPECT_TRUE(outputs.ok()) << outputs.status();
  return outputs.ok() ? *std::move(outputs) : std::vector<Tensor>{};
}

// Runs `text` as it is and fused (`removed` nodes fewer) on the same inputs: skip, lr, lr2, the
// third scalar (`third`), then `per_param` tensors for each of three parameters (values in
// (-1, 1), the last of each in [0, 1), as Adam's v must be). Outputs must be the same bits.
void ExpectFusedGivesTheSameBits(const std::string& text, int removed, const Tensor& third,
                                 int per_param) {
  RegisterAmpcSchemas();
  const onnx::ModelProto plain = testing::ParseModelText(text);
  onnx::ModelProto fused = plain;
  ASSERT_EQ(FuseOptimizers(*fused.mutable_graph()), removed);
  CpuBackend cpu(1);
  for (const bool skip : {false, true}) {
    Tensor flag = Tensor::Host(DType::kBool, {});
    flag.data<bool>()[0] = skip;
    std::vector<Tensor> inputs = {flag, testing::Floats({}, {0.01f}), testing::Floats({}, {0.02f}),
                                  third};
    float x = 0.37f;
    for (const Shape& shape : {Shape{3}, Shape{2, 2}, Shape{5}}) {
      for (int k = 0; k < per_param; ++k) {
        std::vector<float> values;
        for (int64_t i = 0; i < (shape.size() == 1 ? shape[0] : 4); ++i) {
          x = x * 1.7f - static_cast<float>(static_cast<int>(x * 1.7f));  // in [0, 1)
          values.push_back(k == per_param - 1 ? x : 2 * x - 1);
        }
        inputs.push_back(testing::Floats(shape, values));
      }
    }
    const std::vector<Tensor> want = RunOnCpu(cpu, plain.graph(), inputs);
    const std::vector<Tensor> got = RunOnCpu(cpu, fused.graph(), inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got[i].bytes(), want[i].bytes());
      EXPECT_EQ(std::memcmp(got[i].raw(), want[i].raw(), want[i].bytes()), 0)
          << "output " << i << " skip " << skip;
    }
  }
}

TEST(OptimizerFusionTest, FusedAdamGivesTheSameBits) {
  ExpectFusedGivesTheSameBits(Model(), 2, testing::Int64s({}, {3}), 4);
}

// Three SGD nodes, with momentum (param, grad, buf each) or without (param, grad).
std::string SgdModel(bool momentum) {
  std::string inputs, outputs, nodes;
  const char* shapes[] = {"[3]", "[2, 2]", "[5]"};
  for (int i = 1; i <= 3; ++i) {
    const std::string t = absl::StrCat("float", shapes[i - 1]), n = std::to_string(i);
    absl::StrAppend(&inputs, ", ", t, " p", n, ", ", t, " g", n,
                    momentum ? absl::StrCat(", ", t, " b", n) : "");
    absl::StrAppend(&outputs, i == 1 ? "" : ", ", t, " q", n,
                    momentum ? absl::StrCat(", ", t, " c", n) : "");
    absl::StrAppend(
        &nodes, "  q", n, momentum ? ", c" + n : "", " = ai.ampc.SGD <",
        momentum ? "momentum = 0.9, dampening = 0.1, nesterov = 1, " : "momentum = 0.0, ",
        "weight_decay = 0.001> (skip, lr, first, p", n, ", g", n, momentum ? ", b" + n : "", ")\n");
  }
  return absl::StrCat("<ir_version: 8, opset_import: [\"\" : 17, \"ai.ampc\" : 1]>\n",
                      "g (bool skip, float lr, float lr2, bool first", inputs, ") => (", outputs,
                      ") {\n", nodes, "}\n");
}

TEST(OptimizerFusionTest, FusedSgdGivesTheSameBitsWithAndWithoutMomentum) {
  for (const bool momentum : {true, false}) {
    for (const bool first : {true, false}) {
      SCOPED_TRACE(absl::StrCat("momentum ", momentum, " first ", first));
      Tensor flag = Tensor::Host(DType::kBool, {});
      flag.data<bool>()[0] = first;
      ExpectFusedGivesTheSameBits(SgdModel(momentum), 2, flag, momentum ? 3 : 2);
    }
  }
}

// The loss-scaling stage as the training step has it: the check, the scale update between, then
// the unscale. `unscale_inputs` are UnscaleClip's gradients; `scale` its scale.
std::string ScalerModel(const std::string& max_norm, const std::string& unscale_inputs = "h, f",
                        const std::string& scale = "s") {
  return absl::StrCat(R"(
<ir_version: 8, opset_import: ["" : 17, "ai.ampc" : 1]>
g (float s, int64 t, int64 y, bool bad, float16[7] h, float[2, 3] f)
  => (bool found, float s2, int64 t2, int64 y2, float[7] uh, float[2, 3] uf, float n) {
  found = ai.ampc.CheckFinite (h, f)
  s2, t2, y2 = ai.ampc.UpdateScale <growth_interval = 2> (s, t, y, found, bad)
  uh, uf, n = ai.ampc.UnscaleClip <max_norm = )",
                      max_norm, "> (", scale, ", ", unscale_inputs, ")\n}\n");
}

TEST(OptimizerFusionTest, CheckFiniteAndUnscaleClipBecomeOnePass) {
  onnx::ModelProto model = testing::ParseModelText(ScalerModel("0.5"));
  ASSERT_EQ(FuseCheckUnscaleClip(*model.mutable_graph()), 1);
  ASSERT_EQ(model.graph().node_size(), 2);
  const onnx::NodeProto& fused = model.graph().node(0);  // in CheckFinite's place
  EXPECT_EQ(fused.op_type(), "CheckUnscaleClip");
  EXPECT_EQ(fused.domain(), kRuntimeDomain);
  EXPECT_EQ(absl::StrJoin(fused.input(), ","), "s,h,f");
  EXPECT_EQ(absl::StrJoin(fused.output(), ","), "found,uh,uf,n");
  ASSERT_EQ(fused.attribute_size(), 1);
  EXPECT_EQ(fused.attribute(0).name(), "max_norm");
  EXPECT_EQ(model.graph().node(1).op_type(), "UpdateScale");
}

TEST(OptimizerFusionTest, NoOnePassForOtherGradientsOrALaterScale) {
  onnx::ModelProto other = testing::ParseModelText(ScalerModel("0.0", "f, h"));
  EXPECT_EQ(FuseCheckUnscaleClip(*other.mutable_graph()), 0);
  onnx::ModelProto later = testing::ParseModelText(ScalerModel("0.0", "h, f", "s2"));
  EXPECT_EQ(FuseCheckUnscaleClip(*later.mutable_graph()), 0);
}

// A malformed CheckUnscaleClip (an output short) is refused when the kernel is chosen, naming
// the node and the form it takes.
TEST(OptimizerFusionTest, OnePassNodeOfTheWrongArityIsRefused) {
  RegisterAmpcSchemas();
  const onnx::ModelProto model = testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17, "ai.ampc" : 1, "ai.ampc.runtime" : 1]>
g (float s, float[3] a) => (bool found, float[3] ua) {
  found, ua = ai.ampc.runtime.CheckUnscaleClip (s, a)
}
)");
  CpuBackend cpu(1);
  ExecutorEnv env{DefaultRegistry(), cpu, {{"", 17}, {"ai.ampc", 1}, {kRuntimeDomain, 1}}};
  auto executor = GraphExecutor::Create(model.graph(), env, TypeMap());
  ASSERT_FALSE(executor.ok());
  EXPECT_NE(executor.status().message().find("CheckUnscaleClip"), std::string::npos)
      << executor.status();
  EXPECT_NE(executor.status().message().find("(found, u_1..u_n, norm)"), std::string::npos)
      << executor.status();
}

// Finite and overflowing gradients, with and without clipping: the same bits either way.
TEST(OptimizerFusionTest, OnePassGivesTheSameBits) {
  RegisterAmpcSchemas();
  CpuBackend cpu(1);
  for (const std::string max_norm : {"0.0", "0.5"}) {
    for (const bool overflow : {false, true}) {
      SCOPED_TRACE(max_norm + (overflow ? " with inf" : ""));
      const onnx::ModelProto plain = testing::ParseModelText(ScalerModel(max_norm));
      onnx::ModelProto fused = plain;
      ASSERT_EQ(FuseCheckUnscaleClip(*fused.mutable_graph()), 1);
      Tensor bad = Tensor::Host(DType::kBool, {});
      bad.data<bool>()[0] = false;
      Tensor h = testing::Halves({7}, {1, -2, 0.5f, 3e4f, -1e-3f, 7, overflow ? 7e4f : 6e4f});
      const std::vector<Tensor> inputs = {testing::Floats({}, {1024}),
                                          testing::Int64s({}, {1}),
                                          testing::Int64s({}, {1}),
                                          bad,
                                          h,
                                          testing::Floats({2, 3}, {0.1f, -3, 2e3f, 5, -7, 1e-5f})};
      const std::vector<Tensor> want = RunOnCpu(cpu, plain.graph(), inputs);
      const std::vector<Tensor> got = RunOnCpu(cpu, fused.graph(), inputs);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(want[0].data<bool>()[0], overflow);
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(got[i].bytes(), want[i].bytes());
        EXPECT_EQ(std::memcmp(got[i].raw(), want[i].raw(), want[i].bytes()), 0) << "output " << i;
      }
    }
  }
}

// The one pass finds an inf or NaN wherever it lies (in the vector loops or their tails) in
// FP32, FP16 and BF16 gradients, as CheckFinite does; finite gradients are not flagged.
TEST(OptimizerFusionTest, OnePassFindsNonFiniteValuesAnywhere) {
  RegisterAmpcSchemas();
  CpuBackend cpu(1);
  for (const char* type : {"float", "float16", "bfloat16"}) {
    const onnx::ModelProto model = testing::ParseModelText(absl::StrCat(
        R"(<ir_version: 8, opset_import: ["" : 17, "ai.ampc" : 1, "ai.ampc.runtime" : 1]>
g (float s, )",
        type, R"([19] a) => (bool found, float[19] ua, float n) {
  found, ua, n = ai.ampc.runtime.CheckUnscaleClip (s, a)
})"));
    const DType dtype = std::string(type) == "float"     ? DType::kFloat
                        : std::string(type) == "float16" ? DType::kFloat16
                                                         : DType::kBFloat16;
    for (int at = -1; at < 19; ++at) {
      Tensor a = testing::Gradient(dtype, 19, 3);
      if (at >= 0) testing::SetElement(a, at, at % 2 == 0 ? testing::kInf : NAN);
      const std::vector<Tensor> out = RunOnCpu(cpu, model.graph(), {testing::Floats({}, {8}), a});
      ASSERT_EQ(out.size(), 3u);
      EXPECT_EQ(out[0].data<bool>()[0], at >= 0) << type << " at " << at;
    }
  }
}

}  // namespace
}  // namespace ampc
