// FunctionProto bodies of the ai.ampc gradient ops in standard ONNX ops (ONNX text syntax), each
// following its CPU kernel's arithmetic (kernels/cpu/grad_kernels.cc and grad_*.h) step by step.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "passes/opset/conv_pool_gradient_functions.h"
#include "passes/opset/function_text.h"
#include "passes/opset/gradient_ops.h"

namespace ampc {
namespace {

using Body = FunctionText;

// Reductions along `axis` as a 1-D axes input (ReduceSum's axes are an input from opset 13).
constexpr char kAxisNodes[] = R"(
axis = Constant <value_int: int = @axis> ()
zero_axis = Constant <value_ints = [0]> ()
axes = Unsqueeze (axis, zero_axis)
)";

Body SoftmaxGradBody() {
  return {{"dy", "y"}, {"dx"}, {"axis"}, absl::StrCat(kAxisNodes, R"(
prod = Mul (dy, y)
sum = ReduceSum <keepdims = 1> (prod, axes)
diff = Sub (dy, sum)
dx = Mul (y, diff)
)")};
}

Body LogSoftmaxGradBody() {
  return {{"dy", "y"}, {"dx"}, {"axis"}, absl::StrCat(kAxisNodes, R"(
sum = ReduceSum <keepdims = 1> (dy, axes)
p = Exp (y)
ps = Mul (p, sum)
dx = Sub (dy, ps)
)")};
}

Body GeluGradBody() {
  return {{"dy", "x"}, {"dx"}, {}, R"(
c_sqrt1_2 = Constant <value_float = 0.70710678118654752> ()
c_half = Constant <value_float = 0.5> ()
c_one = Constant <value_float = 1.0> ()
c_neg_half = Constant <value_float = -0.5> ()
c_inv_sqrt_2pi = Constant <value_float = 0.39894228040143268> ()
sqrt1_2 = CastLike (c_sqrt1_2, x)
half = CastLike (c_half, x)
one = CastLike (c_one, x)
neg_half = CastLike (c_neg_half, x)
inv_sqrt_2pi = CastLike (c_inv_sqrt_2pi, x)
xs = Mul (x, sqrt1_2)
e = Erf (xs)
e1 = Add (one, e)
cdf = Mul (half, e1)
nh = Mul (neg_half, x)
nhx = Mul (nh, x)
ex = Exp (nhx)
pdf = Mul (inv_sqrt_2pi, ex)
xpdf = Mul (x, pdf)
d = Add (cdf, xpdf)
dx = Mul (dy, d)
)"};
}

// Scores seen as [N, C, D] and labels as [N, D]; k(n, d) the factor of each label's row.
// SoftmaxCrossEntropyLossGrad: k * (exp(log_prob) - onehot); NegativeLogLikelihoodLossGrad:
// -k * onehot, its input 1 (`input`, the forward's) read for its shape and type only.
Body LossGradBody(const onnx::NodeProto& node) {
  const bool softmax = node.op_type() == "SoftmaxCrossEntropyLossGrad";
  std::string reduction = "mean";
  bool has_ignore = false;
  for (const auto& a : node.attribute()) {
    if (a.name() == "reduction") reduction = a.s();
    if (a.name() == "ignore_index") has_ignore = true;
  }
  const bool weighted = node.input_size() > 3 && !node.input(3).empty();
  Body b{{"dloss", "log_prob", "labels"}, {"dscores"}, {}, ""};
  // Without ignore_index, a value no valid label has (labels lie in [0, C)).
  absl::StrAppend(&b.nodes, has_ignore ? "ignore = Constant <value_int: int = @ignore_index> ()\n"
                                       : "ignore = Constant <value_int = -1> ()\n");
  if (has_ignore) b.attributes.push_back("ignore_index");
  absl::StrAppend(&b.nodes, R"(
shape3 = Constant <value_ints = [0, 0, -1]> ()
shape2 = Constant <value_ints = [0, -1]> ()
shape_c = Constant <value_ints = [1, -1, 1]> ()
one_axis = Constant <value_ints = [1]> ()
zero_i = Constant <value_int = 0> ()
one_i = Constant <value_int = 1> ()
c_zero = Constant <value_float = 0.0> ()
c_one = Constant <value_float = 1.0> ()
zero = CastLike (c_zero, log_prob)
one = CastLike (c_one, log_prob)
$exp
labels64 = Cast <to = 7> (labels)
lab = Reshape (labels64, shape2)
classes_1 = Shape <start = 1, end = 2> (log_prob)
classes = Squeeze (classes_1)
range = Range (zero_i, classes, one_i)
class_ids = Reshape (range, shape_c)
lab3 = Unsqueeze (lab, one_axis)
hit = Equal (lab3, class_ids)
onehot = CastLike (hit, log_prob)
ignored = Equal (lab, ignore)
)");
  if (weighted) {
    b.inputs.push_back("weights");
    absl::StrAppend(&b.nodes, R"(
safe = Where (ignored, zero_i, lab)
w = Gather (weights, safe)
k = Where (ignored, zero, w)
)");
  } else {
    absl::StrAppend(&b.nodes, "k = Where (ignored, zero, one)\n");
  }
  if (reduction == "none") {
    absl::StrAppend(&b.nodes, "g = Reshape (dloss, shape2)\nkk = Mul (k, g)\n");
  } else if (reduction == "sum") {
    absl::StrAppend(&b.nodes, "kk = Mul (k, dloss)\n");
  } else {
    absl::StrAppend(&b.nodes, "wsum = ReduceSum <keepdims = 0> (k)\nq = Div (dloss, wsum)\n",
                    "kk = Mul (k, q)\n");
  }
  absl::StrAppend(&b.nodes, R"(
kk3 = Unsqueeze (kk, one_axis)
$diff
grad = Mul (kk3, diff)
scores_shape = Shape (log_prob)
dscores = Reshape (grad, scores_shape)
)");
  const std::string scores = softmax ? "log_prob" : "input";
  b.inputs[1] = scores;
  b.nodes = absl::StrReplaceAll(
      b.nodes, {{"$exp", softmax ? "lp = Reshape (log_prob, shape3)\np = Exp (lp)" : ""},
                {"$diff", softmax ? "diff = Sub (p, onehot)" : "diff = Neg (onehot)"},
                {"log_prob", scores}});
  return b;
}

// Rows [R, K] of x from `axis` on (Flatten), statistics as [R, 1] columns.
Body LayerNormalizationGradBody() {
  return {{"dy", "x", "scale", "mean", "inv_std_dev"}, {"dx", "dscale", "dbias"}, {"axis"}, R"(
x2 = Flatten <axis: int = @axis> (x)
dy2 = Flatten <axis: int = @axis> (dy)
normalized = Shape <start: int = @axis> (x)
x_shape = Shape (x)
col = Constant <value_ints = [-1, 1]> ()
row = Constant <value_ints = [1, -1]> ()
axis0 = Constant <value_ints = [0]> ()
axis1 = Constant <value_ints = [1]> ()
scale_full = Expand (scale, normalized)
s = Reshape (scale_full, row)
mean_t = CastLike (mean, x)
inv_t = CastLike (inv_std_dev, x)
m = Reshape (mean_t, col)
r = Reshape (inv_t, col)
xc = Sub (x2, m)
xhat = Mul (xc, r)
g = Mul (dy2, s)
cols_1 = Shape <start = 1> (x2)
cols = CastLike (cols_1, x)
sum_g = ReduceSum <keepdims = 1> (g, axis1)
mean_g = Div (sum_g, cols)
gx = Mul (g, xhat)
sum_gx = ReduceSum <keepdims = 1> (gx, axis1)
mean_gx = Div (sum_gx, cols)
t1 = Sub (g, mean_g)
t2 = Mul (xhat, mean_gx)
t3 = Sub (t1, t2)
dx2 = Mul (r, t3)
dx = Reshape (dx2, x_shape)
dyx = Mul (dy2, xhat)
ds = ReduceSum <keepdims = 0> (dyx, axis0)
dscale = Reshape (ds, normalized)
db = ReduceSum <keepdims = 0> (dy2, axis0)
dbias = Reshape (db, normalized)
)"};
}

// x seen as [N, C, S], per-channel values as [1, C, 1].
Body BatchNormalizationGradBody() {
  return {{"dy", "x", "scale", "saved_mean", "saved_inv_std"}, {"dx", "dscale", "dbias"}, {}, R"(
shape3 = Constant <value_ints = [0, 0, -1]> ()
shape_c = Constant <value_ints = [1, -1, 1]> ()
flat = Constant <value_ints = [-1]> ()
axes = Constant <value_ints = [0, 2]> ()
x3 = Reshape (x, shape3)
dy3 = Reshape (dy, shape3)
x_shape = Shape (x)
mean_t = CastLike (saved_mean, x)
inv_t = CastLike (saved_inv_std, x)
m = Reshape (mean_t, shape_c)
r = Reshape (inv_t, shape_c)
scale_t = CastLike (scale, x)
s = Reshape (scale_t, shape_c)
xc = Sub (x3, m)
xhat = Mul (xc, r)
db = ReduceSum <keepdims = 1> (dy3, axes)
dyx = Mul (dy3, xhat)
ds = ReduceSum <keepdims = 1> (dyx, axes)
size = Size (x)
channels = Shape <start = 1, end = 2> (x)
count_i = Div (size, channels)
count = CastLike (count_i, x)
k = Mul (s, r)
b_mean = Div (db, count)
s_mean = Div (ds, count)
t1 = Sub (dy3, b_mean)
t2 = Mul (xhat, s_mean)
t3 = Sub (t1, t2)
dx3 = Mul (k, t3)
dx = Reshape (dx3, x_shape)
ds_flat = Reshape (ds, flat)
db_flat = Reshape (db, flat)
dscale = CastLike (ds_flat, scale)
dbias = CastLike (db_flat, scale)
)"};
}

// The scatter adds in FP64 (exact for every float type, rounded once by the CastLike):
// onnxruntime's CPU provider has no FP16 ScatterElements with reduction add.
Body MaxPoolGradBody() {
  return {{"dy", "indices", "x"}, {"dx"}, {}, R"(
flat = Constant <value_ints = [-1]> ()
x_shape = Shape (x)
size = Size (x)
size_1 = Reshape (size, flat)
zeros = ConstantOfShape <value = double[1] {0.0}> (size_1)
dy_flat = Reshape (dy, flat)
dy_f = Cast <to = 11> (dy_flat)
indices_flat = Reshape (indices, flat)
sum = ScatterElements <axis = 0, reduction = "add"> (zeros, indices_flat, dy_f)
sum_t = CastLike (sum, dy)
dx = Reshape (sum_t, x_shape)
)"};
}

}  // namespace

// `body` computing in FP32: every input cast to float, every result cast back like input 0.
Body InFp32(const Body& body) {
  Body wide{{}, {}, body.attributes, ""};
  for (const std::string& input : body.inputs) {
    wide.inputs.push_back(input + "_in");
    absl::StrAppend(&wide.nodes, input, " = Cast <to = 1> (", input, "_in)\n");
  }
  absl::StrAppend(&wide.nodes, body.nodes);
  for (const std::string& output : body.outputs) {
    wide.outputs.push_back(output + "_out");
    absl::StrAppend(&wide.nodes, output, "_out = CastLike (", output, ", ", wide.inputs[0], ")\n");
  }
  return wide;
}

absl::StatusOr<onnx::FunctionProto> GradientFunctionBody(const onnx::NodeProto& node,
                                                         int onnx_opset, bool in_fp32) {
  const std::string& op = node.op_type();
  Body body;
  if (op == "SoftmaxGrad") {
    body = SoftmaxGradBody();
  } else if (op == "LogSoftmaxGrad") {
    body = LogSoftmaxGradBody();
  } else if (op == "GeluGrad") {
    body = GeluGradBody();
  } else if (op == "SoftmaxCrossEntropyLossGrad" || op == "NegativeLogLikelihoodLossGrad") {
    body = LossGradBody(node);
  } else if (op == "LayerNormalizationGrad") {
    body = LayerNormalizationGradBody();
  } else if (op == "BatchNormalizationGrad") {
    body = BatchNormalizationGradBody();
  } else if (op == "MaxPoolGrad") {
    body = MaxPoolGradBody();
  } else if (op == "ConvGrad") {
    body = in_fp32 ? InFp32(ConvGradBody(node)) : ConvGradBody(node);
  } else if (op == "AveragePoolGrad") {
    body = in_fp32 ? InFp32(AveragePoolGradBody(node)) : AveragePoolGradBody(node);
  } else {
    return absl::NotFoundError(absl::StrCat("ai.ampc.", op, " has no function body"));
  }
  if (onnx_opset < 16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the body of ai.ampc.", op, " needs ONNX opset 16 or later, not ", onnx_opset));
  }
  return ParseAmpcFunction(op, body, onnx_opset);
}

}  // namespace ampc
