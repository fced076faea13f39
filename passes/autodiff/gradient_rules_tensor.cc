// Gradients of shape, layout, indexing and reduction ops, in standard ONNX.
#include <onnx/defs/attr_proto_util.h>

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "passes/autodiff/gradient_rules.h"

namespace ampc {
namespace {

using onnx::MakeAttribute;

// Ops that only rearrange elements of input 0 into another shape: the gradient is dy reshaped back.
GradientRule ReshapeBack() {
  return {[](GradientContext& c) {
            c.SetGrad(0, c.b().Op("Reshape", {c.dy(), c.b().ShapeOf(c.input(0))}));
            return absl::OkStatus();
          },
          {}};
}

absl::Status TransposeGrad(GradientContext& c) {
  std::vector<int64_t> perm = c.Ints("perm");
  if (perm.empty()) {
    absl::StatusOr<std::vector<Dim>> dims = c.DimsOf(c.input(0));
    if (!dims.ok()) return dims.status();
    for (size_t i = dims->size(); i > 0; --i) perm.push_back(static_cast<int64_t>(i - 1));
  }
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  c.SetGrad(0, c.b().Op("Transpose", {c.dy()}, {MakeAttribute("perm", inverse)}));
  return absl::OkStatus();
}

// Rank of `value`, and `axis` made non-negative against it.
absl::StatusOr<int64_t> Axis(GradientContext& c, const std::string& value, int64_t axis) {
  absl::StatusOr<std::vector<Dim>> dims = c.DimsOf(value);
  if (!dims.ok()) return dims.status();
  const int64_t rank = static_cast<int64_t>(dims->size());
  return axis < 0 ? axis + rank : axis;
}

// dx_i = the slice of dy that input i filled: a Split of dy by the inputs' sizes along the axis,
// constants where the shapes say them, else read from Shape(input) at run time.
absl::Status ConcatGrad(GradientContext& c) {
  GradientBuilder& b = c.b();
  absl::StatusOr<int64_t> axis = Axis(c, c.output(0), c.Int("axis", 0));
  if (!axis.ok()) return axis.status();
  std::vector<int64_t> sizes;
  bool known = true;
  for (int i = 0; i < c.num_inputs(); ++i) {
    absl::StatusOr<std::vector<Dim>> dims = c.DimsOf(c.input(i));
    if (!dims.ok()) return dims.status();
    known = known && (*dims)[*axis].size.has_value();
    sizes.push_back((*dims)[*axis].size.value_or(0));
  }
  std::string split_sizes;
  if (known) {
    split_sizes = b.Ints(sizes);
  } else {
    std::vector<std::string> parts;
    for (int i = 0; i < c.num_inputs(); ++i) {
      parts.push_back(b.Op("Gather", {b.Op("Shape", {c.input(i)}), b.Ints({*axis})}));
    }
    split_sizes = parts.size() == 1 ? parts[0] : b.Op("Concat", parts, {MakeAttribute("axis", 0L)});
  }
  onnx::NodeProto& split = b.Node("Split", {c.dy(), split_sizes}, c.num_inputs());
  *split.add_attribute() = MakeAttribute("axis", *axis);
  for (int i = 0; i < c.num_inputs(); ++i) c.SetGrad(i, split.output(i));
  return absl::OkStatus();
}

// dx = Concat of the outputs' gradients; an output without one contributes zeros.
absl::Status SplitGrad(GradientContext& c) {
  std::vector<std::string> parts;
  for (int i = 0; i < c.node().output_size(); ++i) {
    parts.push_back(c.dy(i).empty() ? c.b().ZerosLike(c.output(i)) : c.dy(i));
  }
  c.SetGrad(0, c.b().Op("Concat", parts, c.CopyAttributes({"axis"})));
  return absl::OkStatus();
}

// The same Slice of a grid of flat element indices says where each element of dy came from: dy
// is scattered there into zeros (any starts, ends, axes and steps; the picked indices are unique).
absl::Status SliceGrad(GradientContext& c) {
  GradientBuilder& b = c.b();
  const std::string& x = c.input(0);
  const std::string count = b.Op("Size", {x});
  const std::string ids =
      b.Op("Range", {b.Op("Constant", {}, {MakeAttribute("value_int", int64_t{0})}), count,
                     b.Op("Constant", {}, {MakeAttribute("value_int", int64_t{1})})});
  std::vector<std::string> inputs = {b.Op("Reshape", {ids, b.ShapeOf(x)})};
  for (int slot = 1; slot < c.num_inputs(); ++slot) inputs.push_back(c.input(slot));
  const std::string flat = b.Ints({-1});
  const std::string picked = b.Op("Reshape", {b.Op("Slice", inputs), flat});
  const std::string zeros = b.Op("Reshape", {b.ZerosLike(x), flat});
  const std::string scattered =
      b.Op("ScatterElements", {zeros, picked, b.Op("Reshape", {c.dy(), flat})});
  c.SetGrad(0, b.Op("Reshape", {scattered, b.ShapeOf(x)}));
  return absl::OkStatus();
}

// The rows of dy are added into zeros at the looked-up indices (an embedding's gradient). Another
// axis is moved to the front first: x's axis, and in dy the indices' dims that replace it.
absl::Status GatherGrad(GradientContext& c) {
  GradientBuilder& b = c.b();
  absl::StatusOr<int64_t> axis = Axis(c, c.input(0), c.Int("axis", 0));
  if (!axis.ok()) return axis.status();
  absl::StatusOr<std::vector<Dim>> x_dims = c.DimsOf(c.input(0));
  absl::StatusOr<std::vector<Dim>> index_dims = c.DimsOf(c.input(1));
  if (!x_dims.ok()) return x_dims.status();
  if (!index_dims.ok()) return index_dims.status();
  const int64_t rank = static_cast<int64_t>(x_dims->size());
  const int64_t index_rank = static_cast<int64_t>(index_dims->size());
  std::vector<int64_t> x_perm = {*axis}, dy_perm;
  for (int64_t i = 0; i < index_rank; ++i) dy_perm.push_back(*axis + i);
  for (int64_t i = 0; i < rank; ++i) {
    if (i == *axis) continue;
    x_perm.push_back(i);
    dy_perm.push_back(i < *axis ? i : i - 1 + index_rank);
  }
  auto transpose = [&](const std::string& value, const std::vector<int64_t>& perm) {
    return *axis == 0 ? value : b.Op("Transpose", {value}, {MakeAttribute("perm", perm)});
  };
  std::vector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i) inverse[x_perm[i]] = i;
  const std::string indices = b.Op("Unsqueeze", {c.input(1), b.Ints({-1})});
  const std::string scattered =
      b.Op("ScatterND",
           {transpose(b.ZerosLike(c.input(0)), x_perm), indices, transpose(c.dy(), dy_perm)},
           {MakeAttribute("reduction", std::string("add"))});
  c.SetGrad(0, transpose(scattered, inverse));
  return absl::OkStatus();
}

// dx = dy added into zeros at the indices GatherElements read (any axis; negative indices are
// ScatterElements' too).
absl::Status GatherElementsGrad(GradientContext& c) {
  GradientBuilder& b = c.b();
  std::vector<onnx::AttributeProto> attributes = c.CopyAttributes({"axis"});
  attributes.push_back(MakeAttribute("reduction", std::string("add")));
  c.SetGrad(0, b.Op("ScatterElements", {b.ZerosLike(c.input(0)), c.input(1), c.dy()},
                    std::move(attributes)));
  return absl::OkStatus();
}

// Shape(value)[from:], as a 1-D int64 value.
std::string ShapeTail(GradientBuilder& b, const std::string& value, int64_t from) {
  return b.Op("Slice", {b.Op("Shape", {value}), b.Ints({from}), b.Ints({INT64_MAX})});
}

// dx = dy added into zeros at the index tuples (ScatterND). With batch_dims b, the b batch axes
// flatten into one whose position heads every tuple, so one ScatterND serves all batches.
absl::Status GatherNDGrad(GradientContext& c) {
  GradientBuilder& b = c.b();
  const std::string& x = c.input(0);
  const int64_t batch = c.Int("batch_dims", 0);
  const std::vector<onnx::AttributeProto> add = {MakeAttribute("reduction", std::string("add"))};
  if (batch == 0) {
    c.SetGrad(0, b.Op("ScatterND", {b.ZerosLike(x), c.input(1), c.dy()}, add));
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<Dim>> index_dims = c.DimsOf(c.input(1));
  if (!index_dims.ok()) return index_dims.status();
  const int64_t tuple_rank = static_cast<int64_t>(index_dims->size()) - batch;  // I..., k
  auto flatten = [&](const std::string& value) {
    const std::string shape =
        b.Op("Concat", {b.Ints({-1}), ShapeTail(b, value, batch)}, {MakeAttribute("axis", 0L)});
    return b.Op("Reshape", {value, shape});
  };
  const std::string tuples = flatten(c.input(1));  // [batches, I..., k]
  const std::string batches =
      b.Op("ReduceProd", {b.Op("Slice", {b.Op("Shape", {x}), b.Ints({0}), b.Ints({batch})})},
           {MakeAttribute("keepdims", 0L)});
  const std::string ids =
      b.Op("Range", {b.Op("Constant", {}, {MakeAttribute("value_int", int64_t{0})}), batches,
                     b.Op("Constant", {}, {MakeAttribute("value_int", int64_t{1})})});
  std::vector<int64_t> column(tuple_rank + 1, 1);
  column[0] = -1;
  const std::string heads_shape = b.Op(
      "Concat", {b.Op("Slice", {b.Op("Shape", {tuples}), b.Ints({0}), b.Ints({-1})}), b.Ints({1})},
      {MakeAttribute("axis", 0L)});
  const std::string heads = b.Op("Expand", {b.Op("Reshape", {ids, b.Ints(column)}), heads_shape});
  const std::string full = b.Op("Concat", {heads, tuples}, {MakeAttribute("axis", -1L)});
  const std::string scattered =
      b.Op("ScatterND", {flatten(b.ZerosLike(x)), full, flatten(c.dy())}, add);
  c.SetGrad(0, b.Op("Reshape", {scattered, b.ShapeOf(x)}));
  return absl::OkStatus();
}

// dx = dy with the reduced axes restored (keepdims=0) and expanded to x's shape; for a mean, also
// divided by the number of elements each output averages (Size(x) / Size(y)).
absl::Status ReduceGrad(GradientContext& c, bool mean) {
  GradientBuilder& b = c.b();
  std::string dy = c.dy();
  if (c.Int("keepdims", 1) == 0) {
    std::string axes;
    if (c.num_inputs() > 1 && !c.input(1).empty()) {
      axes = c.input(1);
    } else if (!c.Ints("axes").empty()) {
      axes = b.Ints(c.Ints("axes"));
    }
    if (!axes.empty()) dy = b.Op("Unsqueeze", {dy, axes});  // else a scalar: Expand broadcasts it
  }
  if (c.Int("noop_with_empty_axes", 0) != 0) return c.Error("noop_with_empty_axes has no gradient");
  std::string dx = b.Op("Expand", {dy, b.ShapeOf(c.input(0))});
  if (mean) {
    const int64_t type = b.ElemType(c.input(0));
    const std::string in = b.Op("Cast", {b.Op("Size", {c.input(0)})}, {MakeAttribute("to", type)});
    const std::string out =
        b.Op("Cast", {b.Op("Size", {c.output(0)})}, {MakeAttribute("to", type)});
    dx = b.Op("Mul", {dx, b.Op("Div", {out, in})});
  }
  c.SetGrad(0, dx);
  return absl::OkStatus();
}

absl::Status ExpandGrad(GradientContext& c) {
  absl::StatusOr<std::vector<Dim>> dims = c.DimsOf(c.output(0));
  if (!dims.ok()) return dims.status();
  return c.SetReducedGrad(0, c.dy(), *dims);
}

}  // namespace

void AddTensorGradientRules(GradientRuleTable& table) {
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}) {
    table.emplace_back(op, ReshapeBack());
  }
  table.emplace_back("Transpose", GradientRule{TransposeGrad, {}});
  table.emplace_back("Concat", GradientRule{ConcatGrad, {}});
  table.emplace_back("Split", GradientRule{SplitGrad, {}});
  table.emplace_back("Slice", GradientRule{SliceGrad, {}});
  table.emplace_back("Gather", GradientRule{GatherGrad, {}});
  table.emplace_back("GatherElements", GradientRule{GatherElementsGrad, {}});
  table.emplace_back("GatherND", GradientRule{GatherNDGrad, {}});
  table.emplace_back("Expand", GradientRule{ExpandGrad, {}});
  table.emplace_back("ReduceSum",
                     GradientRule{[](GradientContext& c) { return ReduceGrad(c, false); }, {}});
  table.emplace_back("ReduceMean",
                     GradientRule{[](GradientContext& c) { return ReduceGrad(c, true); }, {}});
  table.emplace_back("GlobalAveragePool",
                     GradientRule{[](GradientContext& c) { return ReduceGrad(c, true); }, {}});
}

}  // namespace ampc
