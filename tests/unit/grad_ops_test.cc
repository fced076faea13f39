// ai.ampc gradient ops of the softmax family, GELU, SoftmaxCrossEntropyLoss,
// NegativeLogLikelihoodLoss and LayerNormalization against central finite differences of the
// standard forward op (FP64), and in FP16/BF16 against their FP32 result rounded. Convolution,
// pooling and BatchNormalization are in grad_ops_nn_test.cc.
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/substitute.h"
#include "passes/opset/gradient_ops.h"
#include "tests/support/grad_op_check.h"

namespace ampc {
namespace {

using testing::CheckGradCase;
using testing::Dims;
using testing::GradCase;
using testing::Model;
using testing::Pseudo;
using testing::Value;

constexpr DType kF64 = DType::kDouble;

// y = op<axis>(x) and dx = ai.ampc.<op>Grad<axis>(dy, y).
GradCase SoftmaxCase(const std::string& op, const Shape& shape, int axis) {
  GradCase c;
  c.forward = absl::Substitute("f ($$T[$0] x) => ($$T[$0] y) { y = $1<axis = $2>(x) }", Dims(shape),
                               op, axis);
  c.grad = absl::Substitute(
      "g ($$T[$0] dy, $$T[$0] y) => ($$T[$0] dx) { dx = ai.ampc.$1Grad<axis = $2>(dy, y) }",
      Dims(shape), op, axis);
  c.inputs = {Pseudo(kF64, shape, -2, 2, 3)};
  c.wrt = {0};
  c.grad_inputs = [](const auto&, const std::vector<Value>& out, const Value& r) {
    return std::vector<Value>{r, out[0]};
  };
  return c;
}

TEST(SoftmaxGradTest, MatchesFiniteDifferences) {
  CheckGradCase(SoftmaxCase("Softmax", {3, 5}, -1));
  CheckGradCase(SoftmaxCase("Softmax", {2, 3, 4}, 1));
  CheckGradCase(SoftmaxCase("Softmax", {2, 3, 4}, 0));
  CheckGradCase(SoftmaxCase("Softmax", {2, 3, 4}, -1), DType::kBFloat16, 1.6e-2);
}

TEST(LogSoftmaxGradTest, MatchesFiniteDifferences) {
  CheckGradCase(SoftmaxCase("LogSoftmax", {3, 5}, -1));
  CheckGradCase(SoftmaxCase("LogSoftmax", {2, 3, 4}, 1));
  CheckGradCase(SoftmaxCase("LogSoftmax", {4, 3}, 0), DType::kBFloat16, 1.6e-2);
}

TEST(GeluGradTest, MatchesFiniteDifferencesOfTheErfForm) {
  GradCase c;
  // Gelu(x) = 0.5 * x * (1 + erf(x / sqrt(2))), with the constants as inputs (exact in FP64).
  c.forward = R"(f ($T[2,7] x, $T[] sqrt2, $T[] half, $T[] one) => ($T[2,7] y) {
    s = Div(x, sqrt2)
    e = Erf(s)
    p = Add(e, one)
    h = Mul(x, half)
    y = Mul(h, p)
  })";
  c.grad = "g ($T[2,7] dy, $T[2,7] x) => ($T[2,7] dx) { dx = ai.ampc.GeluGrad(dy, x) }";
  c.inputs = {Pseudo(kF64, {2, 7}, -3, 3, 5), Value{kF64, {}, {std::sqrt(2.0)}},
              Value{kF64, {}, {0.5}}, Value{kF64, {}, {1.0}}};
  c.wrt = {0};
  c.grad_inputs = [](const std::vector<Value>& in, const auto&, const Value& r) {
    return std::vector<Value>{r, in[0]};
  };
  CheckGradCase(c);
  CheckGradCase(c, DType::kBFloat16, 1.6e-2);
}

// SoftmaxCrossEntropyLoss (or NegativeLogLikelihoodLoss) over scores [N, C, d...] with labels;
// dloss has the loss's shape.
struct LossSpec {
  Shape scores;
  std::vector<double> labels;
  std::string reduction;
  std::string ignore;  // "" or the ignore_index value
  bool weights = false;
  bool nll = false;  // NegativeLogLikelihoodLoss: the grad op reads the input x for its shape
};

GradCase LossCase(const LossSpec& s) {
  Shape labels_shape = s.scores;
  labels_shape.erase(labels_shape.begin() + 1);
  const std::string loss_shape = s.reduction == "none" ? Dims(labels_shape) : "";
  std::string attributes = absl::StrCat("reduction = \"", s.reduction, "\"");
  if (!s.ignore.empty()) absl::StrAppend(&attributes, ", ignore_index = ", s.ignore);
  const std::string w_decl = s.weights ? absl::StrCat(", $T[", s.scores[1], "] w") : "";
  const std::string w_use = s.weights ? ", w" : "";
  // NegativeLogLikelihoodLoss has no log_prob output; its grad op reads x for the shape.
  const std::string op = s.nll ? "NegativeLogLikelihoodLoss" : "SoftmaxCrossEntropyLoss";
  const std::string log_prob = s.nll ? "" : ", log_prob";
  const std::string scores = s.nll ? "x" : "log_prob";
  GradCase c;
  c.forward = absl::Substitute(
      "f ($$T[$0] x, int64[$1] labels$2) => ($$T[$3] loss$6) {\n"
      "  loss$7 = $8<$4>(x, labels$5)\n}",
      Dims(s.scores), Dims(labels_shape), w_decl, loss_shape, attributes, w_use,
      s.nll ? "" : absl::StrCat(", $T[", Dims(s.scores), "] log_prob"), log_prob, op);
  c.grad = absl::Substitute(
      "g ($$T[$3] dloss, $$T[$0] $6, int64[$1] labels$2) => ($$T[$0] dx) {\n"
      "  dx = ai.ampc.$7Grad<$4>(dloss, $6, labels$5)\n}",
      Dims(s.scores), Dims(labels_shape), w_decl, loss_shape, attributes, w_use, scores, op);
  c.inputs = {Pseudo(kF64, s.scores, -2, 2, 9), Value{DType::kInt64, labels_shape, s.labels}};
  if (s.weights) c.inputs.push_back(Pseudo(kF64, {s.scores[1]}, 0.5, 2, 11));
  c.wrt = {0};
  c.grad_inputs = [nll = s.nll](const std::vector<Value>& in, const std::vector<Value>& out,
                                const Value& r) {
    std::vector<Value> g = {r, nll ? in[0] : out[1], in[1]};
    if (in.size() > 2) g.push_back(in[2]);
    return g;
  };
  return c;
}

TEST(SoftmaxCrossEntropyLossGradTest, ReductionsMatchFiniteDifferences) {
  for (const char* reduction : {"none", "sum", "mean"}) {
    SCOPED_TRACE(reduction);
    CheckGradCase(LossCase({{4, 5}, {0, 3, 4, 1}, reduction, ""}));
    CheckGradCase(LossCase({{2, 3, 4}, {0, 1, 2, 2, 1, 0, 0, 2}, reduction, ""}));
  }
}

TEST(SoftmaxCrossEntropyLossGradTest, IgnoreIndexAndWeightsMatchFiniteDifferences) {
  for (const char* reduction : {"none", "sum", "mean"}) {
    SCOPED_TRACE(reduction);
    // Ignored labels: their rows get no gradient and, for "mean", drop out of the divisor.
    CheckGradCase(LossCase({{5, 4}, {1, 2, 0, 2, 3}, reduction, "2"}));
    CheckGradCase(LossCase({{5, 4}, {1, -1, 0, 3, -1}, reduction, "-1", true}));
    CheckGradCase(LossCase({{2, 3, 4}, {0, 1, 2, 2, 1, 0, 0, 2}, reduction, "", true}));
  }
  CheckGradCase(LossCase({{5, 4}, {1, -1, 0, 3, -1}, "mean", "-1", true}), DType::kBFloat16,
                1.6e-2);
}

TEST(NegativeLogLikelihoodLossGradTest, ReductionsIgnoreIndexAndWeightsMatchFiniteDifferences) {
  for (const char* reduction : {"none", "sum", "mean"}) {
    SCOPED_TRACE(reduction);
    CheckGradCase(LossCase({{4, 5}, {0, 3, 4, 1}, reduction, "", false, true}));
    CheckGradCase(LossCase({{2, 3, 4}, {0, 1, 2, 2, 1, 0, 0, 2}, reduction, "", true, true}));
    // An in-range ignore_index (2) and an out-of-range one (-1), with and without weights.
    CheckGradCase(LossCase({{5, 4}, {1, 2, 0, 2, 3}, reduction, "2", false, true}));
    CheckGradCase(LossCase({{5, 4}, {1, -1, 0, 3, -1}, reduction, "-1", true, true}));
  }
  CheckGradCase(LossCase({{5, 4}, {1, -1, 0, 3, -1}, "mean", "-1", true, true}), DType::kBFloat16,
                1.6e-2);
}

TEST(SoftmaxCrossEntropyLossGradTest, BadLabelIsAnErrorNamingTheNode) {
  RegisterGradientOpSchemas();
  CpuBackend backend(1);  // declared first: the session refers to it until destroyed
  auto session = Session::Create(
      testing::ParseModelText(R"(<ir_version: 8, opset_import: ["" : 17, "ai.ampc" : 1]>
g (float dloss, float[2, 3] log_prob, int64[2] labels) => (float[2, 3] dx) {
  dx = ai.ampc.SoftmaxCrossEntropyLossGrad<reduction = "sum">(dloss, log_prob, labels)
})"),
      DefaultRegistry(), backend);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<Tensor> inputs = {testing::ToTensor({DType::kFloat, {}, {1}}),
                                testing::ToTensor({DType::kFloat, {2, 3}, {0, 0, 0, 0, 0, 0}}),
                                testing::ToTensor({DType::kInt64, {2}, {0, 3}})};
  auto out = (*session)->Run(inputs);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("SoftmaxCrossEntropyLossGrad"), std::string::npos)
      << out.status();
  EXPECT_NE(out.status().message().find("label 3"), std::string::npos) << out.status();
}

// LayerNormalization over x.shape[axis:] with Scale and B of the normalized shape (or a
// broadcast one); the grad op's dscale and dbias have the normalized shape.
GradCase LayerNormCase(const Shape& x, int axis, const Shape& scale) {
  const int rank = static_cast<int>(x.size());
  const Shape normalized(x.begin() + (axis < 0 ? axis + rank : axis), x.end());
  Shape stats = x;
  for (int d = axis < 0 ? axis + rank : axis; d < rank; ++d) stats[d] = 1;
  GradCase c;
  c.forward = absl::Substitute(
      "f ($$T[$0] x, $$T[$1] s, $$T[$1] b) => ($$T[$0] y, float[$2] m, float[$2] r) {\n"
      "  y, m, r = LayerNormalization<axis = $3, epsilon = 0.001>(x, s, b)\n}",
      Dims(x), Dims(scale), Dims(stats), axis);
  c.grad = absl::Substitute(
      "g ($$T[$0] dy, $$T[$0] x, $$T[$1] s, float[$2] m, float[$2] r) => ($$T[$0] dx, $$T[$3] ds, "
      "$$T[$3] db) {\n"
      "  dx, ds, db = ai.ampc.LayerNormalizationGrad<axis = $4>(dy, x, s, m, r)\n}",
      Dims(x), Dims(scale), Dims(stats), Dims(normalized), axis);
  c.inputs = {Pseudo(kF64, x, -2, 2, 13), Pseudo(kF64, scale, 0.5, 1.5, 17),
              Pseudo(kF64, scale, -1, 1, 19)};
  c.wrt = {0, 1, 2};
  c.statistics = {3, 4};
  c.grad_inputs = [](const std::vector<Value>& in, const std::vector<Value>& out, const Value& r) {
    return std::vector<Value>{r, in[0], in[1], out[1], out[2]};
  };
  return c;
}

TEST(LayerNormalizationGradTest, LastAxisMatchesFiniteDifferences) {
  CheckGradCase(LayerNormCase({3, 4}, -1, {4}));
  CheckGradCase(LayerNormCase({2, 3, 5}, 2, {5}));
  CheckGradCase(LayerNormCase({2, 3, 5}, -1, {5}), DType::kBFloat16, 1.6e-2);
}

TEST(LayerNormalizationGradTest, LastTwoAxesMatchFiniteDifferences) {
  CheckGradCase(LayerNormCase({2, 3, 4}, 1, {3, 4}));
  CheckGradCase(LayerNormCase({2, 3, 4}, -2, {3, 4}));
}

TEST(LayerNormalizationGradTest, BroadcastScaleGradientSumsToScalesShape) {
  // Scale [4] broadcast over the normalized [3, 4]: ds has the normalized shape, and its sum over
  // the broadcast axis is the gradient of Scale.
  const GradCase c = LayerNormCase({2, 3, 4}, 1, {4});
  const Model forward(c.forward, kF64);
  std::vector<Value> outputs;
  for (const Tensor& t : forward.Run(c.inputs)) outputs.push_back(testing::OutputValue(t));
  ASSERT_EQ(outputs.size(), 3u);
  const Value r = Pseudo(kF64, {2, 3, 4}, -1, 1, 77);
  std::vector<Value> grad_inputs = c.grad_inputs(c.inputs, outputs, r);
  for (size_t i : c.statistics) grad_inputs[i] = testing::As(grad_inputs[i], DType::kFloat);
  const std::vector<double> ds = Model(c.grad, kF64).Output(grad_inputs, 1);
  ASSERT_EQ(ds.size(), 12u);
  std::vector<double> reduced(4, 0.0);
  for (size_t i = 0; i < ds.size(); ++i) reduced[i % 4] += ds[i];
  testing::ExpectClose(reduced, testing::NumericGradient(forward, c.inputs, 1, 0, r.values, 1e-6),
                       1e-6, 1e-5, "dscale summed over the broadcast axis");
}

TEST(GradientSchemasTest, CheckerAcceptsAndInferenceGivesGradientShapes) {
  RegisterGradientOpSchemas();
  onnx::ModelProto model = testing::ModelOf(R"(
g (float[2,3,4] dy, float[2,3,4] x, float[3,4] s, float[2,1,1] m, float[2,1,1] r, float[3] c,
   float[2,4,3,3] cy, float[2,3,5,5] cx, float[4,3,3,3] cw, float[2,4,5,5] px, int64[2,4,3,3] pi,
   float[] dl, float[2,4,3,3] lp, int64[2,3,3] lab) => (float[2,3,4] dx) {
  dx, ds, db = ai.ampc.LayerNormalizationGrad<axis = 1>(dy, x, s, m, r)
  bx, bs, bb = ai.ampc.BatchNormalizationGrad<epsilon = 0.001>(dy, x, c, c, c)
  cdx, cdw, cdb = ai.ampc.ConvGrad<pads = [0, 0, 0, 0]>(cy, cx, cw)
  mdx = ai.ampc.MaxPoolGrad(cy, pi, px)
  adx = ai.ampc.AveragePoolGrad<kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]>(cy, px)
  sdx = ai.ampc.SoftmaxGrad<axis = 1>(dy, x)
  ldx = ai.ampc.LogSoftmaxGrad<axis = 1>(dy, x)
  gdx = ai.ampc.GeluGrad(dy, x)
  ddx = ai.ampc.SoftmaxCrossEntropyLossGrad<reduction = "mean", ignore_index = -1>(dl, lp, lab)
  ndx = ai.ampc.NegativeLogLikelihoodLossGrad<reduction = "mean">(dl, lp, lab)
})",
                                            DType::kFloat);
  try {
    onnx::checker::check_model(model);
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(/*check_type_val=*/true,
                                                                   /*strict_mode_val=*/1, false));
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& v : model.graph().value_info()) {
    EXPECT_EQ(v.type().tensor_type().elem_type(), onnx::TensorProto::FLOAT) << v.name();
    for (const auto& d : v.type().tensor_type().shape().dim())
      shapes[v.name()].push_back(d.dim_value());
  }
  using V = std::vector<int64_t>;
  EXPECT_EQ(shapes["ds"], (V{3, 4}));
  EXPECT_EQ(shapes["db"], (V{3, 4}));
  EXPECT_EQ(shapes["bx"], (V{2, 3, 4}));
  EXPECT_EQ(shapes["bs"], (V{3}));
  EXPECT_EQ(shapes["cdx"], (V{2, 3, 5, 5}));
  EXPECT_EQ(shapes["cdw"], (V{4, 3, 3, 3}));
  EXPECT_EQ(shapes["cdb"], (V{4}));
  EXPECT_EQ(shapes["mdx"], (V{2, 4, 5, 5}));
  EXPECT_EQ(shapes["adx"], (V{2, 4, 5, 5}));
  EXPECT_EQ(shapes["sdx"], (V{2, 3, 4}));
  EXPECT_EQ(shapes["gdx"], (V{2, 3, 4}));
  EXPECT_EQ(shapes["ddx"], (V{2, 4, 3, 3}));
  EXPECT_EQ(shapes["ndx"], (V{2, 4, 3, 3}));
}

}  // namespace
}  // namespace ampc
