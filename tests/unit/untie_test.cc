// The untie pass (passes/training/untie.h): which initializers are parameters the exporter merged
// (read through Identity copies) and which are one weight shared on purpose (read directly more
// than once); --untie's copies, and that they then train separately where merged ones train tied.
#include "passes/training/untie.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "passes/graph/tensor_data.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/training_session.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"
#include "tests/support/train_compile.h"

namespace ampc {
namespace {

using testing::CompileForTraining;
using ::testing::ElementsAre;
using testing::Floats;
using ::testing::HasSubstr;
using testing::Values;

// `ones` is read as two parameters through Identity copies a and b (as torch's exporters merge a
// LayerNorm weight and a BatchNorm running_var, both ones).
constexpr char kMerged[] = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 2] x) => (float loss)
<float[2] ones = {1, 1}>
{
  a = Identity (ones)
  b = Identity (ones)
  ya = Mul (x, a)
  yb = Add (ya, b)
  loss = ReduceSum <keepdims = 0> (yb)
}
)";

// `ones` is read directly and through the Identity copy a.
constexpr char kReadBoth[] = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 2] x) => (float[2, 2] y)
<float[2] ones = {1, 1}>
{
  a = Identity (ones)
  ya = Mul (x, a)
  y = Add (ya, ones)
}
)";

std::vector<std::string> Groups(const onnx::ModelProto& model) {
  absl::StatusOr<std::unique_ptr<GraphIndex>> index = GraphIndex::Build(model.graph());
  EXPECT_TRUE(index.ok()) << index.status();
  std::vector<std::string> groups;
  for (const MergedParameters& group : FindMergedParameters(**index)) {
    std::string text = group.initializer + (group.read_directly ? " (direct):" : ":");
    for (const onnx::NodeProto* identity : group.identities) text += " " + identity->output(0);
    groups.push_back(text);
  }
  return groups;
}

TEST(Untie, IdentityCopiesOfOneInitializerAreAMergedGroup) {
  EXPECT_THAT(Groups(testing::ParseModelText(kMerged)), ElementsAre("ones: a b"));
}

TEST(Untie, AnInitializerReadDirectlyAndThroughAnIdentityIsAMergedGroup) {
  EXPECT_THAT(Groups(testing::ParseModelText(kReadBoth)), ElementsAre("ones (direct): a"));
}

TEST(Untie, OneWeightReadDirectlyTwiceIsSharedNotMerged) {
  // A tied embedding and LM head: one tensor that both nodes read, as the model means it.
  EXPECT_THAT(Groups(testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (int64[2] ids) => (float[2, 5] logits)
<float[5, 3] wte = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}>
{
  h = Gather (wte, ids)
  logits = Gemm <transB = 1> (h, wte)
}
)")),
              ::testing::IsEmpty());
}

TEST(Untie, ASingleIdentityOrAnIntegerInitializerIsNoGroup) {
  EXPECT_THAT(Groups(testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 2] x) => (float[2, 2] y, int64[1] s)
<float[2] w = {1, 1}, int64[1] k = {1}>
{
  a = Identity (w)
  y = Mul (x, a)
  i = Identity (k)
  j = Identity (k)
  s = Add (i, j)
}
)")),
              ::testing::IsEmpty());
}

TEST(Untie, WithoutUntieEachGroupIsAWarningNamingTheCopiesAndTheFlag) {
  onnx::ModelProto model = testing::ParseModelText(kMerged);
  absl::StatusOr<std::vector<std::string>> warnings =
      CompileForTraining(model, {"untie"}, TrainingOptions{});
  ASSERT_TRUE(warnings.ok()) << warnings.status();
  EXPECT_THAT(*warnings,
              ElementsAre(HasSubstr(
                  "initializer 'ones' is read as 2 parameters (through Identity, a, b)")));
  EXPECT_THAT(warnings->front(), HasSubstr("--untie"));
  EXPECT_EQ(model.graph().node_size(), 5);  // unchanged
}

TEST(Untie, UntieGivesEachIdentityOutputItsOwnInitializer) {
  onnx::ModelProto model = testing::ParseModelText(kMerged);
  const std::string ones = RawBytes(model.graph().initializer(0));
  TrainingOptions options;
  options.untie = true;
  absl::StatusOr<std::vector<std::string>> warnings = CompileForTraining(model, {"untie"}, options);
  ASSERT_TRUE(warnings.ok()) << warnings.status();
  EXPECT_THAT(*warnings, ::testing::IsEmpty());
  std::vector<std::string> initializers, ops;
  for (const onnx::TensorProto& t : model.graph().initializer()) initializers.push_back(t.name());
  for (const onnx::NodeProto& node : model.graph().node()) ops.push_back(node.op_type());
  // ones had no other reader: only the copies are left.
  EXPECT_THAT(initializers, ElementsAre("a", "b"));
  EXPECT_THAT(ops, ElementsAre("Mul", "Add", "ReduceSum"));
  for (const onnx::TensorProto& t : model.graph().initializer()) {  // each a copy of ones
    EXPECT_THAT(t.dims(), ElementsAre(2));
    EXPECT_EQ(t.data_type(), onnx::TensorProto::FLOAT);
    EXPECT_EQ(RawBytes(t), ones);
  }
  // A second run finds nothing left to split.
  EXPECT_THAT(Groups(model), ::testing::IsEmpty());
}

TEST(Untie, TheMergedInitializerStaysWhenItIsAlsoReadDirectly) {
  onnx::ModelProto model = testing::ParseModelText(kReadBoth);
  TrainingOptions options;
  options.untie = true;
  ASSERT_TRUE(CompileForTraining(model, {"untie"}, options).ok());
  std::vector<std::string> initializers;
  for (const onnx::TensorProto& t : model.graph().initializer()) initializers.push_back(t.name());
  EXPECT_THAT(initializers, ElementsAre("ones", "a"));
  EXPECT_EQ(model.graph().node_size(), 2);
}

// One SGD step (lr 0.5, no loss scaling) of kMerged on x = [[1, 2], [3, 4]]: dloss/da = the
// column sums of x, {4, 6}; dloss/db = the number of rows, {2, 2}.
TEST(Untie, UntiedCopiesTrainSeparatelyWhereMergedOnesTrainTied) {
  const std::vector<std::string> passes = {"untie", "infer-types", "training-step"};
  TrainingOptions options;
  options.loss = "loss";
  options.optimizer = TrainingOptions::Optimizer::kSgd;
  options.loss_scale = TrainingOptions::LossScale::kNone;
  CpuBackend backend(1);
  const NamedTensors inputs = {{"x", Floats({2, 2}, {1, 2, 3, 4})}};
  auto step = [&](onnx::ModelProto& model) {
    auto session = TrainingSession::Create(model, DefaultRegistry(), backend);
    EXPECT_TRUE(session.ok()) << session.status();
    EXPECT_TRUE((*session)->Step(inputs, 0.5f).ok());
    return std::move(*session);
  };

  onnx::ModelProto tied = testing::ParseModelText(kMerged);
  ASSERT_TRUE(CompileForTraining(tied, passes, options).ok());
  auto tied_session = step(tied);
  // One parameter, updated by the sum of both uses' gradients: 1 - 0.5 * ({4, 6} + {2, 2}).
  absl::StatusOr<Tensor> ones = tied_session->State("ones");
  ASSERT_TRUE(ones.ok()) << ones.status();
  EXPECT_THAT(Values<float>(*ones), ElementsAre(-2, -3));

  onnx::ModelProto untied = testing::ParseModelText(kMerged);
  options.untie = true;
  ASSERT_TRUE(CompileForTraining(untied, passes, options).ok());
  auto untied_session = step(untied);
  absl::StatusOr<Tensor> a = untied_session->State("a");
  absl::StatusOr<Tensor> b = untied_session->State("b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_THAT(Values<float>(*a), ElementsAre(-1, -2));  // 1 - 0.5 * {4, 6}
  EXPECT_THAT(Values<float>(*b), ElementsAre(0, 0));    // 1 - 0.5 * {2, 2}
}

}  // namespace
}  // namespace ampc
