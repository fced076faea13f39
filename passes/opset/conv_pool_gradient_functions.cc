#include "passes/opset/conv_pool_gradient_functions.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace ampc {
namespace {

// The stated auto_pad of a conv or pool node ("NOTSET" when absent).
std::string AutoPad(const onnx::NodeProto& node) {
  for (const auto& a : node.attribute()) {
    if (a.name() == "auto_pad") return a.s();
  }
  return "NOTSET";
}

bool States(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute()) {
    if (a.name() == name) return true;
  }
  return false;
}

// SAME_UPPER/SAME_LOWER padding from shapes: `full` is the extent the windows cover from the
// first one's start ((out - 1) * stride + extent, a shape vector like x_shape); total = max(0,
// full - x), begin = total / 2 (UPPER) or total - total / 2 (LOWER), as the kernels compute it.
std::string SamePadNodes(const std::string& full, bool lower) {
  return absl::StrCat(R"(
over = Sub ()",
                      full, R"(, x_shape)
total = Max (over, zeros_r)
two = Constant <value_ints = [2]> ()
half = Div (total, two)
)",
                      lower ? "pb = Sub (total, half)\n" : "pb = Identity (half)\n",
                      "pe = Sub (total, pb)\n");
}

// Conv's pads as [rank] rows `pb` and `pe`: from @pads when the node states them (zeros for
// the batch and channel axes when `full_rank`), else zeros.
std::string StatedPadNodes(bool full_rank) {
  std::string nodes = R"(
pads = Constant <value_ints: ints = @pads> ()
two_rows = Constant <value_ints = [2, -1]> ()
pads2 = Reshape (pads, two_rows)
row0 = Constant <value_int = 0> ()
row1 = Constant <value_int = 1> ()
)";
  if (!full_rank) {
    return nodes + "pb = Gather <axis = 0> (pads2, row0)\npe = Gather <axis = 0> (pads2, row1)\n";
  }
  return nodes + R"(pb_sp = Gather <axis = 0> (pads2, row0)
pe_sp = Gather <axis = 0> (pads2, row1)
zero2 = Constant <value_ints = [0, 0]> ()
pb = Concat <axis = 0> (zero2, pb_sp)
pe = Concat <axis = 0> (zero2, pe_sp)
)";
}

}  // namespace

// dx: ConvTranspose of dy with w (Conv's w is ConvTranspose's [C_in, C_out / group, k...])
// without pads covers the padded input from the first window's start; dx is the input's part
// of it, zero-extended where the windows never reached (the floor of Conv's output size).
// dw: the correlation of the padded x with dy over images: x as [cg, group * N, ...] (images as
// channels, per group), dy as the weight [M, N, ...], strides and dilations swapped, cut to the
// kernel's extent (the correlation may reach further). db: dy summed over images and positions.
// The node's strides, dilations and group pass on as references; those it leaves out are Conv's
// defaults.
FunctionText ConvGradBody(const onnx::NodeProto& node) {
  const std::string auto_pad = AutoPad(node);
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  const bool stated_pads = auto_pad == "NOTSET" && States(node, "pads");
  // References only to stated attributes (libonnx's function expansion keeps a reference to a
  // missing one as an empty attribute).
  std::vector<std::string> transpose, correlate;
  FunctionText b{{"dy", "x", "w"}, {"dx", "dw", "db"}, {}, ""};
  for (const auto& [name, swapped] : {std::pair<std::string, std::string>{"strides", "dilations"},
                                      {"dilations", "strides"},
                                      {"group", "group"}}) {
    if (!States(node, name)) continue;
    b.attributes.push_back(name);
    const std::string type = name == "group" ? "int" : "ints";
    transpose.push_back(absl::StrCat(name, ": ", type, " = @", name));
    correlate.push_back(absl::StrCat(swapped, ": ", type, " = @", name));
  }
  const auto attributes = [](const std::vector<std::string>& list) {
    return list.empty() ? std::string() : absl::StrCat("<", absl::StrJoin(list, ", "), "> ");
  };
  absl::StrAppend(&b.nodes, R"(
x_shape = Shape (x)
w_shape = Shape (w)
zeros_r = Sub (x_shape, x_shape)
big2 = Constant <value_ints = [9223372036854775807, 9223372036854775807]> ()
minus1 = Constant <value_ints = [-1]> ()
ct = ConvTranspose )",
                  attributes(transpose), R"((dy, w)
ct_shape = Shape (ct)
)");
  if (same) {
    absl::StrAppend(&b.nodes, SamePadNodes("ct_shape", auto_pad == "SAME_LOWER"));
  } else if (stated_pads) {
    b.attributes.push_back("pads");
    absl::StrAppend(&b.nodes, StatedPadNodes(/*full_rank=*/true));
  } else {
    absl::StrAppend(&b.nodes, "pb = Identity (zeros_r)\npe = Identity (zeros_r)\n");
  }
  absl::StrAppend(&b.nodes, R"(
xp_pads = Concat <axis = 0> (pb, pe)
xp = Pad (x, xp_pads)
end = Add (pb, x_shape)
short = Sub (end, ct_shape)
tail = Max (short, zeros_r)
ct_pads = Concat <axis = 0> (zeros_r, tail)
ct_padded = Pad (ct, ct_pads)
dx = Slice (ct_padded, pb, end)
n = Shape <start = 0, end = 1> (x)
c = Shape <start = 1, end = 2> (x)
cg = Shape <start = 1, end = 2> (w)
m = Shape <start = 0, end = 1> (w)
groups = Div (c, cg)
mg = Div (m, groups)
xp_spatial = Shape <start = 2> (xp)
x4_shape = Concat <axis = 0> (n, groups, cg, minus1)
x4 = Reshape (xp, x4_shape)
xt = Transpose <perm = [2, 1, 0, 3]> (x4)
xr_shape = Concat <axis = 0> (cg, minus1, xp_spatial)
xr = Reshape (xt, xr_shape)
dy_spatial = Shape <start = 2> (dy)
dy4_shape = Concat <axis = 0> (n, groups, mg, minus1)
dy4 = Reshape (dy, dy4_shape)
dyt = Transpose <perm = [1, 2, 0, 3]> (dy4)
dyr_shape = Concat <axis = 0> (m, n, dy_spatial)
dyr = Reshape (dyt, dyr_shape)
corr = Conv )",
                  attributes(correlate), R"((xr, dyr)
w_zeros = Sub (w_shape, w_shape)
kernel = Shape <start = 2> (w)
corr_end = Concat <axis = 0> (big2, kernel)
dwt = Slice (corr, w_zeros, corr_end)
dwt3_shape = Concat <axis = 0> (cg, m, minus1)
dwt3 = Reshape (dwt, dwt3_shape)
dw3 = Transpose <perm = [1, 0, 2]> (dwt3)
dw = Reshape (dw3, w_shape)
shape3 = Constant <value_ints = [0, 0, -1]> ()
axes02 = Constant <value_ints = [0, 2]> ()
dy3 = Reshape (dy, shape3)
db = ReduceSum <keepdims = 0> (dy3, axes02)
)");
  return b;
}

// Each window's divisor (count_include_pad: its taps inside the padded input, else inside the
// input) is a strided sum of a 0/1 mask; dy / divisor spread back over the windows with a
// ConvTranspose of ones covers the padded input from the first window's start (and beyond it
// with ceil_mode); dx is the input's part of that. Planes (N * C) run as a batch of one channel.
// Attributes the node leaves out are ONNX's defaults (strides 1, pads 0, count_include_pad 0).
FunctionText AveragePoolGradBody(const onnx::NodeProto& node) {
  const std::string auto_pad = AutoPad(node);
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  const bool notset = !same && auto_pad != "VALID";
  FunctionText b{{"dy", "x"}, {"dx"}, {"kernel_shape"}, R"(
k = Constant <value_ints: ints = @kernel_shape> ()
x_shape = Shape (x)
x_spatial = Shape <start = 2> (x)
o_spatial = Shape <start = 2> (dy)
zero_k = Sub (k, k)
zero2 = Constant <value_ints = [0, 0]> ()
one2 = Constant <value_ints = [1, 1]> ()
big2 = Constant <value_ints = [9223372036854775807, 9223372036854775807]> ()
minus_one_one = Constant <value_ints = [-1, 1]> ()
c_one = Constant <value_float = 1.0> ()
one = CastLike (c_one, dy)
)"};
  auto stated = [&](const std::string& name, const std::string& ref_node,
                    const std::string& default_node) {
    if (States(node, name)) b.attributes.push_back(name);
    absl::StrAppend(&b.nodes, States(node, name) ? ref_node : default_node, "\n");
  };
  stated("strides", "s = Constant <value_ints: ints = @strides> ()", "s = Div (k, k)");
  stated("count_include_pad", "cip = Constant <value_int: int = @count_include_pad> ()",
         "cip = Constant <value_int = 0> ()");
  const std::string conv_strides = States(node, "strides") ? "<strides: ints = @strides> " : "";
  absl::StrAppend(&b.nodes, R"(
one_i = Constant <value_ints = [1]> ()
o_less = Sub (o_spatial, one_i)
o_steps = Mul (o_less, s)
full = Add (o_steps, k)
)");
  if (same) {
    absl::StrAppend(&b.nodes, "zeros_r = Identity (zero_k)\nx_shape_sp = Identity (x_spatial)\n",
                    absl::StrReplaceAll(SamePadNodes("full", auto_pad == "SAME_LOWER"),
                                        {{"x_shape)", "x_shape_sp)"}}));
  } else if (notset && States(node, "pads")) {
    b.attributes.push_back("pads");
    absl::StrAppend(&b.nodes, StatedPadNodes(/*full_rank=*/false));
  } else {
    absl::StrAppend(&b.nodes, "pb = Identity (zero_k)\npe = Identity (zero_k)\n");
  }
  absl::StrAppend(&b.nodes, R"(
padded_in = Add (x_spatial, pb)
padded_all = Add (padded_in, pe)
beyond = Sub (full, padded_all)
e = Max (beyond, zero_k)
pe_e = Add (pe, e)
ones_shape = Concat <axis = 0> (one2, x_spatial)
zeros_x = ConstantOfShape (ones_shape)
zeros_t = CastLike (zeros_x, dy)
ones_x = Add (zeros_t, one)
valid_pads = Concat <axis = 0> (zero2, pb, zero2, pe_e)
valid = Pad (ones_x, valid_pads)
region_pads = Concat <axis = 0> (zero2, pb, zero2, pe)
region = Pad (ones_x, region_pads, one)
beyond_pads = Concat <axis = 0> (zero2, zero_k, zero2, e)
region_e = Pad (region, beyond_pads)
include = Cast <to = 9> (cip)
mask = Where (include, region_e, valid)
kernel_shape4 = Concat <axis = 0> (one2, k)
kernel_zeros = ConstantOfShape (kernel_shape4)
kernel_t = CastLike (kernel_zeros, dy)
kernel = Add (kernel_t, one)
count = Conv )",
                  conv_strides, R"((mask, kernel)
divisor = Max (count, one)
share = Div (dy, divisor)
planes_shape = Concat <axis = 0> (minus_one_one, o_spatial)
planes = Reshape (share, planes_shape)
spread = ConvTranspose )",
                  conv_strides, R"((planes, kernel)
end = Add (pb, x_spatial)
short = Sub (end, full)
tail = Max (short, zero_k)
tail_pads = Concat <axis = 0> (zero2, zero_k, zero2, tail)
spread_t = Pad (spread, tail_pads)
starts = Concat <axis = 0> (zero2, pb)
ends = Concat <axis = 0> (big2, end)
dx_planes = Slice (spread_t, starts, ends)
dx = Reshape (dx_planes, x_shape)
)");
  return b;
}

}  // namespace ampc
