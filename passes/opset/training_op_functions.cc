// FunctionProto bodies of the ai.ampc ops in standard ONNX ops, written in ONNX's text syntax. Each
// mirrors its CPU kernel's arithmetic step by step (kernels/cpu/scaler_kernels.cc), so a runtime
// that inlines the function computes the same values.

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/opset/function_text.h"
#include "passes/opset/gradient_ops.h"
#include "passes/opset/training_ops.h"

namespace ampc {
namespace {

// A body: its input and output names, attribute names, and nodes (one per line).
using Body = FunctionText;

std::vector<std::string> Numbered(const std::string& prefix, int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(absl::StrCat(prefix, i));
  return names;
}

absl::StatusOr<Body> CheckFiniteBody(int num_inputs, int num_outputs) {
  if (num_inputs < 1 || num_outputs != 1) return absl::InvalidArgumentError("n -> 1");
  // x * 0 is NaN exactly when x is inf or NaN, and a NaN survives the sum.
  Body b{Numbered("g", num_inputs), {"found"}, {}, "zero = Constant <value_float = 0.0> ()\n"};
  std::vector<std::string> sums;
  for (int i = 0; i < num_inputs; ++i) {
    absl::StrAppend(&b.nodes, "f", i, " = Cast <to = 1> (g", i, ")\n", "z", i, " = Mul (f", i,
                    ", zero)\n", "s", i, " = ReduceSum <keepdims = 0> (z", i, ")\n");
    sums.push_back(absl::StrCat("s", i));
  }
  absl::StrAppend(&b.nodes, "total = Sum (", absl::StrJoin(sums, ", "), ")\n",
                  "found = IsNaN (total)\n");
  return b;
}

absl::StatusOr<Body> UpdateScaleBody(int num_inputs, int num_outputs) {
  if (num_inputs != 5 || num_outputs != 3) return absl::InvalidArgumentError("5 -> 3");
  return Body{{"scale", "tracker", "hysteresis_left", "found", "loss_bad"},
              {"scale_out", "tracker_out", "hysteresis_out"},
              {"growth_factor", "backoff_factor", "growth_interval", "hysteresis", "min_scale",
               "max_scale", "dynamic"},
              R"(
growth = Constant <value_float: float = @growth_factor> ()
backoff = Constant <value_float: float = @backoff_factor> ()
interval = Constant <value_int: int = @growth_interval> ()
refill = Constant <value_int: int = @hysteresis> ()
min_scale = Constant <value_float: float = @min_scale> ()
max_scale = Constant <value_float: float = @max_scale> ()
dynamic = Constant <value_int: int = @dynamic> ()
flt_min = Constant <value_float = 1.17549435e-38> ()
zero_f = Constant <value_float = 0.0> ()
one = Constant <value_int = 1> ()
zero = Constant <value_int = 0> ()
h_dec = Sub (hysteresis_left, one)
back_now = LessOrEqual (h_dec, zero)
floor = Max (min_scale, flt_min)
scaled_down = Mul (scale, backoff)
backed = Max (scaled_down, floor)
scale_found = Where (back_now, backed, scale)
h_found = Where (back_now, refill, h_dec)
t_inc = Add (tracker, one)
due = GreaterOrEqual (t_inc, interval)
grown = Mul (scale, growth)
grown_inf = IsInf (grown)
grown_nan = IsNaN (grown)
grown_bad = Or (grown_inf, grown_nan)
grown_finite = Not (grown_bad)
no_max = LessOrEqual (max_scale, zero_f)
within = LessOrEqual (grown, max_scale)
allowed = Or (no_max, within)
ok = And (grown_finite, allowed)
grow = And (due, ok)
scale_ok = Where (grow, grown, scale)
t_ok = Where (due, zero, t_inc)
s1 = Where (found, scale_found, scale_ok)
t1 = Where (found, zero, t_ok)
h1 = Where (found, h_found, refill)
is_dynamic = Cast <to = 9> (dynamic)
loss_ok = Not (loss_bad)
active = And (is_dynamic, loss_ok)
scale_out = Where (active, s1, scale)
tracker_out = Where (active, t1, tracker)
hysteresis_out = Where (active, h1, hysteresis_left)
)"};
}

absl::StatusOr<Body> UnscaleClipBody(int num_inputs, int num_outputs) {
  if (num_inputs < 2 || num_outputs != num_inputs) return absl::InvalidArgumentError("1+n -> n+1");
  const int n = num_inputs - 1;
  Body b;
  b.inputs = Numbered("g", n);
  b.inputs.insert(b.inputs.begin(), "scale");
  b.outputs = Numbered("u", n);
  b.outputs.push_back("norm");
  b.attributes = {"max_norm"};
  b.nodes = R"(
scale_d = Cast <to = 11> (scale)
inv_d = Reciprocal (scale_d)
inv = Cast <to = 1> (inv_d)
)";
  std::vector<std::string> squares;
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&b.nodes, "f", i, " = Cast <to = 1> (g", i, ")\n", "r", i, " = Mul (f", i,
                    ", inv)\n", "d", i, " = Cast <to = 11> (r", i, ")\n", "q", i,
                    " = ReduceSumSquare <keepdims = 0> (d", i, ")\n");
    squares.push_back(absl::StrCat("q", i));
  }
  absl::StrAppend(&b.nodes, "sum_sq = Sum (", absl::StrJoin(squares, ", "), ")\n", R"(
norm_d = Sqrt (sum_sq)
norm = Cast <to = 1> (norm_d)
max_norm = Constant <value_float: float = @max_norm> ()
eps = Constant <value_float = 1e-6> ()
one = Constant <value_float = 1.0> ()
zero = Constant <value_float = 0.0> ()
denom = Add (norm, eps)
ratio = Div (max_norm, denom)
clipped = Min (ratio, one)
clip_on = Greater (max_norm, zero)
coef = Where (clip_on, clipped, one)
)");
  for (int i = 0; i < n; ++i) absl::StrAppend(&b.nodes, "u", i, " = Mul (r", i, ", coef)\n");
  return b;
}

// g = grad + weight_decay * param (when weight_decay != 0), as torch.optim.SGD and Adam (L2).
constexpr char kWeightDecayNodes[] = R"(
wd = Constant <value_float: float = @weight_decay> ()
zero_f = Constant <value_float = 0.0> ()
one_f = Constant <value_float = 1.0> ()
one_d = Cast <to = 11> (one_f)
wd_zero = Equal (wd, zero_f)
has_wd = Not (wd_zero)
wd_p = Mul (wd, param)
g_l2 = Add (grad, wd_p)
)";

absl::StatusOr<Body> SgdBody(int num_inputs, int num_outputs) {
  const bool momentum = num_inputs == 6;
  if (!((num_inputs == 5 && num_outputs == 1) || (momentum && num_outputs == 2))) {
    return absl::InvalidArgumentError("5 -> 1 or 6 -> 2");
  }
  Body b{
      {"skip", "lr", "first", "param", "grad"},
      {"param_out"},
      {"weight_decay"},
      absl::StrCat(kWeightDecayNodes, "g = Where (has_wd, g_l2, grad)\n", "neg_lr = Neg (lr)\n")};
  if (!momentum) {
    absl::StrAppend(&b.nodes, "d = Identity (g)\n");
  } else {
    b.inputs.push_back("buf");
    b.outputs.push_back("buf_out");
    b.attributes = {"weight_decay", "momentum", "dampening", "nesterov"};
    absl::StrAppend(&b.nodes, R"(
mom = Constant <value_float: float = @momentum> ()
damp = Constant <value_float: float = @dampening> ()
nesterov = Constant <value_int: int = @nesterov> ()
damp_d = Cast <to = 11> (damp)
keep_d = Sub (one_d, damp_d)
keep = Cast <to = 1> (keep_d)
buf_m = Mul (buf, mom)
keep_g = Mul (keep, g)
buf_acc = Add (buf_m, keep_g)
buf_new = Where (first, g, buf_acc)
mom_buf = Mul (mom, buf_new)
g_nesterov = Add (g, mom_buf)
is_nesterov = Cast <to = 9> (nesterov)
d = Where (is_nesterov, g_nesterov, buf_new)
buf_out = Where (skip, buf, buf_new)
)");
  }
  absl::StrAppend(&b.nodes, R"(
step = Mul (neg_lr, d)
p_new = Add (param, step)
param_out = Where (skip, param, p_new)
)");
  return b;
}

absl::StatusOr<Body> AdamBody(int num_inputs, int num_outputs) {
  if (num_inputs != 7 || num_outputs != 3) return absl::InvalidArgumentError("7 -> 3");
  return Body{{"skip", "lr", "step", "param", "grad", "m", "v"},
              {"param_out", "m_out", "v_out"},
              {"beta1", "beta2", "epsilon", "weight_decay", "decoupled"},
              absl::StrCat(kWeightDecayNodes, R"(
beta1 = Constant <value_float: float = @beta1> ()
beta2 = Constant <value_float: float = @beta2> ()
eps = Constant <value_float: float = @epsilon> ()
decoupled = Constant <value_int: int = @decoupled> ()
half = Constant <value_float = 0.5> ()
is_decoupled = Cast <to = 9> (decoupled)
not_decoupled = Not (is_decoupled)
use_adamw = And (has_wd, is_decoupled)
use_l2 = And (has_wd, not_decoupled)
lr_d = Cast <to = 11> (lr)
wd_d = Cast <to = 11> (wd)
lr_wd = Mul (lr_d, wd_d)
decay_d = Sub (one_d, lr_wd)
decay = Cast <to = 1> (decay_d)
p_decayed = Mul (param, decay)
p0 = Where (use_adamw, p_decayed, param)
g = Where (use_l2, g_l2, grad)
beta1_d = Cast <to = 11> (beta1)
beta2_d = Cast <to = 11> (beta2)
w1_d = Sub (one_d, beta1_d)
w1 = Cast <to = 1> (w1_d)
w2_d = Sub (one_d, beta2_d)
w2 = Cast <to = 1> (w2_d)
diff = Sub (g, m)
w1_abs = Abs (w1)
small = Less (w1_abs, half)
w1_diff = Mul (w1, diff)
m_small = Add (m, w1_diff)
w1_rest = Sub (one_f, w1)
diff_rest = Mul (diff, w1_rest)
m_large = Sub (g, diff_rest)
m_new = Where (small, m_small, m_large)
v_b2 = Mul (v, beta2)
w2_g = Mul (w2, g)
w2_gg = Mul (w2_g, g)
v_new = Add (v_b2, w2_gg)
step_d = Cast <to = 11> (step)
pow1 = Pow (beta1_d, step_d)
pow2 = Pow (beta2_d, step_d)
bc1 = Sub (one_d, pow1)
bc2 = Sub (one_d, pow2)
step_size_d = Div (lr_d, bc1)
neg_step_size_d = Neg (step_size_d)
neg_step_size = Cast <to = 1> (neg_step_size_d)
bc2_sqrt_d = Sqrt (bc2)
bc2_sqrt = Cast <to = 1> (bc2_sqrt_d)
v_sqrt = Sqrt (v_new)
v_hat = Div (v_sqrt, bc2_sqrt)
denom = Add (v_hat, eps)
scaled_m = Mul (neg_step_size, m_new)
update = Div (scaled_m, denom)
p_new = Add (p0, update)
param_out = Where (skip, param, p_new)
m_out = Where (skip, m, m_new)
v_out = Where (skip, v, v_new)
)")};
}

// ai.ampc.Dropout: ONNX Dropout with the node's seed; `call` is what the ampc kernel draws from
// (another runtime draws its own masks, as ONNX lets it).
absl::StatusOr<Body> DropoutBody(int num_inputs, int num_outputs) {
  if (num_inputs != 4 || (num_outputs != 1 && num_outputs != 2)) {
    return absl::InvalidArgumentError("4 -> 1 or 2");
  }
  Body b{{"data", "ratio", "training_mode", "call"}, {"output"}, {"seed"}, ""};
  if (num_outputs == 2) b.outputs.push_back("mask");
  absl::StrAppend(&b.nodes, absl::StrJoin(b.outputs, ", "),
                  " = Dropout <seed: int = @seed> (data, ratio, training_mode)\n");
  return b;
}

using BodyBuilder = absl::StatusOr<Body> (*)(int num_inputs, int num_outputs);

// Every ai.ampc op with a body. The gradient ops add theirs here.
const std::map<std::string, BodyBuilder>& Builders() {
  static const auto* builders = new std::map<std::string, BodyBuilder>{
      {"CheckFinite", CheckFiniteBody},
      {"UpdateScale", UpdateScaleBody},
      {"UnscaleClip", UnscaleClipBody},
      {"SGD", SgdBody},
      {"Adam", AdamBody},
      {"Dropout", DropoutBody},
  };
  return *builders;
}

}  // namespace

absl::StatusOr<onnx::FunctionProto> AmpcFunctionBody(const std::string& op, int num_inputs,
                                                     int num_outputs, int onnx_opset) {
  auto it = Builders().find(op);
  if (it == Builders().end()) {
    return absl::NotFoundError(absl::StrCat("ai.ampc op '", op, "' has no function body"));
  }
  if (onnx_opset < 13) {
    return absl::InvalidArgumentError(
        absl::StrCat("ai.ampc function bodies need ONNX opset 13 or later, not ", onnx_opset));
  }
  absl::StatusOr<Body> body = it->second(num_inputs, num_outputs);
  if (!body.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ai.ampc.", op, " takes ", body.status().message(), " inputs -> outputs, not ",
                     num_inputs, " -> ", num_outputs));
  }
  return ParseAmpcFunction(op, *body, onnx_opset);
}

absl::StatusOr<std::vector<onnx::FunctionProto>> AmpcFunctionBodies(const onnx::GraphProto& graph,
                                                                    int onnx_opset) {
  std::map<std::string, std::pair<const onnx::NodeProto*, onnx::FunctionProto>> functions;
  for (const onnx::NodeProto& node : graph.node()) {
    if (node.domain() != kAmpcDomain) continue;
    auto it = functions.find(node.op_type());
    const std::string label =
        absl::StrCat("node '", node.name(), "' (ai.ampc.", node.op_type(), ")");
    if (it != functions.end()) {
      const onnx::NodeProto& seen = *it->second.first;
      if (seen.input_size() != node.input_size() || seen.output_size() != node.output_size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            label, ": ", node.input_size(), " inputs and ", node.output_size(),
            " outputs, but node '", seen.name(), "' of the same op has ", seen.input_size(),
            " and ", seen.output_size(), "; one model-local function serves both"));
      }
    } else {
      absl::StatusOr<onnx::FunctionProto> body =
          AmpcFunctionBody(node.op_type(), node.input_size(), node.output_size(), onnx_opset);
      if (absl::IsNotFound(body.status())) body = GradientFunctionBody(node, onnx_opset);
      if (!body.ok())
        return absl::InvalidArgumentError(absl::StrCat(label, ": ", body.status().message()));
      it = functions.emplace(node.op_type(), std::make_pair(&node, *std::move(body))).first;
    }
    std::set<std::string> stated;
    for (const auto& attribute : node.attribute()) stated.insert(attribute.name());
    for (const std::string& name : it->second.second.attribute()) {
      if (!stated.contains(name)) {
        return absl::InvalidArgumentError(absl::StrCat(
            label, ": attribute '", name,
            "' must be stated (the model-local function reads it; IR 8 has no defaults)"));
      }
    }
  }
  std::vector<onnx::FunctionProto> result;
  for (auto& [name, entry] : functions) result.push_back(std::move(entry.second));
  return result;
}

}  // namespace ampc
