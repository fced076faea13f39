// Tensor family, layout: kernels that move whole elements to new positions (Transpose, Concat,
// Split, Slice, Expand, Tile, Pad, DepthToSpace, SpaceToDepth, Trilu, ReverseSequence).
#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/tensor_ops.h"
#include "passes/graph/status_macros.h"

namespace ampc::tensor_ops {
namespace {

using Maps = std::vector<std::vector<int64_t>>;

// Output dim d walks input axis `axis` with step `step` from `start`.
std::vector<int64_t> Walk(int64_t count, int64_t start, int64_t step, int64_t stride) {
  std::vector<int64_t> map(count);
  for (int64_t i = 0; i < count; ++i) map[i] = (start + i * step) * stride;
  return map;
}

// Copies `input` reordered as the transpose of its view with shape `view` by `perm`, into `out`.
void PermutedCopy(KernelContext& context, const Tensor& input, const Shape& view,
                  const std::vector<int>& perm, Tensor& out) {
  const std::vector<int64_t> strides = Strides(view);
  Shape shape;
  Maps maps;
  for (int axis : perm) {
    shape.push_back(view[axis]);
    maps.push_back(Walk(view[axis], 0, 1, strides[axis]));
  }
  MappedCopy(context, input.raw(), out.raw(), shape, maps, DTypeSize(input.dtype()));
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> TransposePerm(const KernelContext& context, int rank) {
  std::vector<int64_t> perm = context.attributes().Ints("perm");
  if (perm.empty()) {
    for (int d = rank - 1; d >= 0; --d) perm.push_back(d);
  }
  std::vector<bool> seen(rank, false);
  bool valid = static_cast<int>(perm.size()) == rank;
  for (int64_t p : perm) {
    valid = valid && p >= 0 && p < rank && !seen[p];
    if (valid) seen[p] = true;
  }
  if (!valid) {
    return NodeError(context, absl::StrCat("perm [", absl::StrJoin(perm, ","),
                                           "] is not a permutation of ", rank, " axes"));
  }
  return perm;
}

absl::Status Transpose(KernelContext& context) {
  const Tensor& input = context.in(0);
  AMPC_ASSIGN_OR_RETURN(const std::vector<int64_t> perm, TransposePerm(context, input.rank()));
  Shape shape;
  for (int64_t p : perm) shape.push_back(input.dim(static_cast<int>(p)));
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, shape, input.dtype()));
  PermutedCopy(context, input, input.shape(), std::vector<int>(perm.begin(), perm.end()), *out);
  return absl::OkStatus();
}

absl::Status Concat(KernelContext& context) {
  const Tensor& first = context.in(0);
  int64_t axis_attr = 1;  // the default before opset 4
  if (context.info().opset >= 4) {
    AMPC_ASSIGN_OR_RETURN(axis_attr, context.attributes().RequiredInt("axis"));
  }
  AMPC_ASSIGN_OR_RETURN(const int axis, NormalizeAxis(context, axis_attr, first.rank()));
  Shape shape = first.shape();
  shape[axis] = 0;
  for (int i = 0; i < context.num_inputs(); ++i) {
    const Tensor& t = context.in(i);
    bool same = t.rank() == first.rank() && t.dtype() == first.dtype();
    for (int d = 0; same && d < t.rank(); ++d) same = d == axis || t.dim(d) == first.dim(d);
    if (!same) {
      return NodeError(context,
                       absl::StrCat("input ", i, " ", t.TypeString(), " does not match input 0 ",
                                    first.TypeString(), " outside axis ", axis));
    }
    shape[axis] += t.dim(axis);
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, shape, first.dtype()));
  const size_t es = DTypeSize(first.dtype());
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  const int64_t inner = ElementCount(std::span(shape).subspan(axis + 1));
  const size_t row = shape[axis] * inner * es;
  size_t column = 0;
  for (int i = 0; i < context.num_inputs(); ++i) {
    const Tensor& t = context.in(i);
    const size_t chunk = t.dim(axis) * inner * es;
    for (int64_t o = 0; o < outer && chunk > 0; ++o) {
      std::memcpy(static_cast<char*>(out->raw()) + o * row + column,
                  static_cast<const char*>(t.raw()) + o * chunk, chunk);
    }
    column += chunk;
  }
  return absl::OkStatus();
}

absl::Status Split(KernelContext& context) {
  const Tensor& input = context.in(0);
  AMPC_ASSIGN_OR_RETURN(const int axis,
                        NormalizeAxis(context, context.attributes().Int("axis", 0), input.rank()));
  std::vector<int64_t> split = context.attributes().Ints("split");
  if (context.input(1) != nullptr) {
    AMPC_ASSIGN_OR_RETURN(split, ReadInts(context, context.in(1), "split"));
  }
  const int n = context.num_outputs();
  const int64_t dim = input.dim(axis);
  if (split.empty()) {
    // Split-18's num_outputs: chunks of ceil(dim / n), the last one smaller.
    const bool uneven_allowed = context.attributes().Has("num_outputs");
    if (dim % n != 0 && !uneven_allowed) {
      return NodeError(context, absl::StrCat("axis ", axis, " of size ", dim,
                                             " does not split evenly into ", n, " outputs"));
    }
    const int64_t chunk = (dim + n - 1) / n;
    split.assign(n, chunk);
    split.back() = dim - chunk * (n - 1);
  }
  const int64_t total = std::accumulate(split.begin(), split.end(), int64_t{0});
  const bool negative = std::any_of(split.begin(), split.end(), [](int64_t s) { return s < 0; });
  if (static_cast<int>(split.size()) != n || total != dim || negative) {
    return NodeError(context,
                     absl::StrCat("split [", absl::StrJoin(split, ","), "] does not cut ", "axis ",
                                  axis, " of size ", dim, " into ", n, " outputs"));
  }
  const size_t es = DTypeSize(input.dtype());
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= input.dim(d);
  const int64_t inner = ElementCount(std::span(input.shape()).subspan(axis + 1));
  const size_t row = dim * inner * es;
  size_t column = 0;
  for (int i = 0; i < n; ++i) {
    Shape shape = input.shape();
    shape[axis] = split[i];
    AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(i, shape, input.dtype()));
    const size_t chunk = split[i] * inner * es;
    for (int64_t o = 0; o < outer && chunk > 0; ++o) {
      std::memcpy(static_cast<char*>(out->raw()) + o * chunk,
                  static_cast<const char*>(input.raw()) + o * row + column, chunk);
    }
    column += chunk;
  }
  return absl::OkStatus();
}

absl::Status Slice(KernelContext& context) {
  const Tensor& input = context.in(0);
  const int rank = input.rank();
  std::vector<int64_t> starts, ends, axes, steps;
  if (context.info().opset < 10) {
    starts = context.attributes().Ints("starts");
    ends = context.attributes().Ints("ends");
    axes = context.attributes().Ints("axes");
  } else {
    AMPC_ASSIGN_OR_RETURN(starts, ReadInts(context, context.in(1), "starts"));
    AMPC_ASSIGN_OR_RETURN(ends, ReadInts(context, context.in(2), "ends"));
    if (context.input(3) != nullptr) {
      AMPC_ASSIGN_OR_RETURN(axes, ReadInts(context, context.in(3), "axes"));
    }
    if (context.input(4) != nullptr) {
      AMPC_ASSIGN_OR_RETURN(steps, ReadInts(context, context.in(4), "steps"));
    }
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    return NodeError(context, "starts, ends, axes and steps differ in length");
  }
  const std::vector<int64_t> strides = Strides(input.shape());
  Shape shape = input.shape();
  std::vector<int64_t> first(rank, 0), step(rank, 1);
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    AMPC_ASSIGN_OR_RETURN(const int a, NormalizeAxis(context, axes[i], rank));
    if (seen[a]) return NodeError(context, absl::StrCat("axis ", axes[i], " is repeated"));
    seen[a] = true;
    if (steps[i] == 0) return NodeError(context, absl::StrCat("step of axis ", a, " is 0"));
    const int64_t dim = input.dim(a);
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t end = ends[i] < 0 ? ends[i] + dim : ends[i];
    int64_t count;
    if (dim == 0) {
      count = 0;
    } else if (steps[i] > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      count = end > start ? (end - start - 1) / steps[i] + 1 : 0;  // no overflow near INT64_MAX
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      const uint64_t stride =
          uint64_t{0} - static_cast<uint64_t>(steps[i]);  // |step|, INT64_MIN too
      count = start > end
                  ? static_cast<int64_t>(static_cast<uint64_t>(start - end - 1) / stride) + 1
                  : 0;
    }
    shape[a] = count;
    first[a] = start;
    step[a] = steps[i];
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, shape, input.dtype()));
  Maps maps;
  for (int d = 0; d < rank; ++d) maps.push_back(Walk(shape[d], first[d], step[d], strides[d]));
  MappedCopy(context, input.raw(), out->raw(), shape, maps, DTypeSize(input.dtype()));
  return absl::OkStatus();
}

namespace {

// Output dims `shape` (right-aligned with the input's) reading input index i % dim: broadcasting
// (dim 1) and tiling alike.
absl::Status RepeatCopy(KernelContext& context, const Tensor& input, const Shape& shape) {
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, shape, input.dtype()));
  const std::vector<int64_t> strides = Strides(input.shape());
  const int lead = static_cast<int>(shape.size()) - input.rank();
  Maps maps;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    std::vector<int64_t> map(shape[d], 0);
    if (d >= lead) {
      const int64_t dim = input.dim(d - lead);
      for (int64_t i = 0; i < shape[d]; ++i) map[i] = (i % dim) * strides[d - lead];
    }
    maps.push_back(std::move(map));
  }
  MappedCopy(context, input.raw(), out->raw(), shape, maps, DTypeSize(input.dtype()));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Shape> ExpandShape(const KernelContext& context) {
  const Shape& input = context.in(0).shape();
  AMPC_ASSIGN_OR_RETURN(const Shape target, ReadInts(context, context.in(1), "shape"));
  std::optional<Shape> shape = BroadcastShapes(input, target);
  const bool negative = std::any_of(target.begin(), target.end(), [](int64_t d) { return d < 0; });
  if (!shape.has_value() || negative) {
    return NodeError(
        context, absl::StrCat("cannot expand ", ShapeString(input), " to ", ShapeString(target)));
  }
  return *std::move(shape);
}

absl::Status Expand(KernelContext& context) {
  AMPC_ASSIGN_OR_RETURN(const Shape shape, ExpandShape(context));
  return RepeatCopy(context, context.in(0), shape);
}

absl::Status Tile(KernelContext& context) {
  const Tensor& input = context.in(0);
  AMPC_ASSIGN_OR_RETURN(const std::vector<int64_t> repeats,
                        ReadInts(context, context.in(1), "repeats"));
  if (static_cast<int>(repeats.size()) != input.rank()) {
    return NodeError(context,
                     absl::StrCat(repeats.size(), " repeats for a rank-", input.rank(), " input"));
  }
  Shape shape = input.shape();
  for (int d = 0; d < input.rank(); ++d) {
    if (repeats[d] < 0) return NodeError(context, absl::StrCat("repeat ", repeats[d], " < 0"));
    if (__builtin_mul_overflow(shape[d], repeats[d], &shape[d])) {
      return NodeError(context, absl::StrCat("axis ", d, " of ", input.dim(d), " repeated ",
                                             repeats[d], " times overflows a dimension"));
    }
  }
  return RepeatCopy(context, input, shape);
}

namespace {

// The constant Pad writes: the `value` input (opset 11+) or attribute (before), as the data type.
absl::StatusOr<std::vector<char>> PadValue(KernelContext& context, DType dtype) {
  std::vector<char> fill(DTypeSize(dtype), 0);
  if (context.info().opset >= 11) {
    const Tensor* value = context.input(2);
    if (value != nullptr && value->size() > 0) {
      if (value->dtype() != dtype) return NodeError(context, "constant_value has another type");
      std::memcpy(fill.data(), value->raw(), fill.size());
    }
    return fill;
  }
  const float value = context.attributes().Float("value", 0.0f);
  Dispatch<AMPC_ALL_TYPES>(dtype, [&]<typename T>() {
    const T v = Compute<T>::Store(static_cast<typename Compute<T>::type>(value));
    std::memcpy(fill.data(), &v, sizeof(T));
  });
  return fill;
}

// Reflect an out-of-range index back into [0, dim) (numpy's "reflect": the edge is not repeated).
int64_t Reflect(int64_t i, int64_t dim) {
  if (dim == 1) return 0;
  const int64_t period = 2 * (dim - 1);
  i %= period;
  if (i < 0) i += period;
  return i < dim ? i : period - i;
}

// Wrap mode (Pad-19): output element i of an axis reads the kept part of the input (what negative
// pads leave, [lo, lo + kept)) as a ring, so i = before is its first element.
int64_t Wrap(int64_t i, int64_t before, int64_t lo, int64_t kept) {
  int64_t k = (i - std::max<int64_t>(before, 0)) % kept;
  if (k < 0) k += kept;
  return lo + k;
}

// The part of an axis of length `dim` that negative pads leave: its start, and its length.
std::pair<int64_t, int64_t> KeptPart(int64_t dim, int64_t before, int64_t after) {
  const int64_t lo = std::max<int64_t>(0, -before);
  return {lo, dim - std::max<int64_t>(0, -after) - lo};
}

// Pad-18: `pads` holds the begins, then the ends, of the axes listed in input 3; every other
// axis is not padded.
absl::StatusOr<std::vector<int64_t>> PadsOfAxes(KernelContext& context,
                                                const std::vector<int64_t>& pads, int rank) {
  AMPC_ASSIGN_OR_RETURN(const std::vector<int64_t> axes, ReadInts(context, context.in(3), "axes"));
  if (pads.size() != 2 * axes.size()) {
    return NodeError(context, absl::StrCat(pads.size(), " pads for ", axes.size(), " axes"));
  }
  std::vector<int64_t> full(2 * rank, 0);
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    AMPC_ASSIGN_OR_RETURN(const int axis, NormalizeAxis(context, axes[i], rank));
    if (seen[axis]) return NodeError(context, absl::StrCat("axis ", axis, " is listed twice"));
    seen[axis] = true;
    full[axis] = pads[i];
    full[axis + rank] = pads[i + axes.size()];
  }
  return full;
}

}  // namespace

absl::Status Pad(KernelContext& context) {
  const Tensor& input = context.in(0);
  const int rank = input.rank();
  std::vector<int64_t> pads;
  if (context.info().opset >= 11) {
    AMPC_ASSIGN_OR_RETURN(pads, ReadInts(context, context.in(1), "pads"));
  } else {
    pads = context.attributes().Ints(context.info().opset < 2 ? "paddings" : "pads");
  }
  if (context.num_inputs() > 3 && context.input(3) != nullptr) {  // Pad-18's axes
    AMPC_ASSIGN_OR_RETURN(pads, PadsOfAxes(context, pads, rank));
  }
  if (static_cast<int>(pads.size()) != 2 * rank) {
    return NodeError(context, absl::StrCat(pads.size(), " pads for a rank-", rank, " input"));
  }
  const std::string mode = context.attributes().String("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap") {
    return NodeError(context, absl::StrCat("mode '", mode, "' is not supported"));
  }
  AMPC_ASSIGN_OR_RETURN(const std::vector<char> fill, PadValue(context, input.dtype()));
  const std::vector<int64_t> strides = Strides(input.shape());
  Shape shape(rank);
  Maps maps(rank);
  for (int d = 0; d < rank; ++d) {
    const int64_t dim = input.dim(d), before = pads[d];
    if (__builtin_add_overflow(dim, before, &shape[d]) ||
        __builtin_add_overflow(shape[d], pads[d + rank], &shape[d])) {
      return NodeError(context, absl::StrCat("pads ", before, " and ", pads[d + rank], " of axis ",
                                             d, " overflow a dimension"));
    }
    if (shape[d] < 0) return NodeError(context, absl::StrCat("pads crop axis ", d, " below 0"));
    if (mode != "constant" && dim == 0 && shape[d] > 0) {
      return NodeError(context, absl::StrCat("cannot ", mode, "-pad the empty axis ", d));
    }
    if (mode == "wrap" && shape[d] > 0 && KeptPart(dim, before, pads[d + rank]).second <= 0) {
      return NodeError(context, absl::StrCat("pads crop all of axis ", d, " and wrap-pad it"));
    }
  }
  // The output first: a shape too large for memory is a node error before any map is built.
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, shape, input.dtype()));
  for (int d = 0; d < rank; ++d) {
    const int64_t dim = input.dim(d), before = pads[d];
    const auto [lo, kept] = KeptPart(dim, before, pads[d + rank]);
    for (int64_t i = 0; i < shape[d]; ++i) {
      int64_t src = i - before;
      if (mode == "edge") src = std::clamp<int64_t>(src, 0, dim - 1);
      if (mode == "reflect") src = Reflect(src, dim);
      if (mode == "wrap") src = Wrap(i, before, lo, kept);
      maps[d].push_back(src >= 0 && src < dim ? src * strides[d] : kOutside);
    }
  }
  MappedCopy(context, input.raw(), out->raw(), shape, maps, DTypeSize(input.dtype()), fill.data());
  return absl::OkStatus();
}

namespace {

absl::StatusOr<int64_t> BlockSize(KernelContext& context, const Tensor& input) {
  AMPC_ASSIGN_OR_RETURN(const int64_t b, context.attributes().RequiredInt("blocksize"));
  if (input.rank() != 4) {
    return NodeError(context,
                     absl::StrCat("input must be 4-D, it has shape ", ShapeString(input.shape())));
  }
  if (b <= 0) return NodeError(context, absl::StrCat("blocksize ", b, " must be positive"));
  return b;
}

}  // namespace

absl::Status DepthToSpace(KernelContext& context) {
  const Tensor& input = context.in(0);
  AMPC_ASSIGN_OR_RETURN(const int64_t b, BlockSize(context, input));
  const int64_t n = input.dim(0), c = input.dim(1), h = input.dim(2), w = input.dim(3);
  if (c % (b * b) != 0) {
    return NodeError(context, absl::StrCat("channels ", c, " not divisible by blocksize² ", b * b));
  }
  const std::string mode = context.attributes().String("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") {
    return NodeError(context, absl::StrCat("mode '", mode, "' is neither DCR nor CRD"));
  }
  const bool crd = mode == "CRD";
  const Shape view = crd ? Shape{n, c / (b * b), b, b, h, w} : Shape{n, b, b, c / (b * b), h, w};
  const std::vector<int> perm =
      crd ? std::vector<int>{0, 1, 4, 2, 5, 3} : std::vector<int>{0, 3, 4, 1, 5, 2};
  AMPC_ASSIGN_OR_RETURN(Tensor * out,
                        context.Output(0, {n, c / (b * b), h * b, w * b}, input.dtype()));
  PermutedCopy(context, input, view, perm, *out);
  return absl::OkStatus();
}

absl::Status SpaceToDepth(KernelContext& context) {
  const Tensor& input = context.in(0);
  AMPC_ASSIGN_OR_RETURN(const int64_t b, BlockSize(context, input));
  const int64_t n = input.dim(0), c = input.dim(1), h = input.dim(2), w = input.dim(3);
  if (h % b != 0 || w % b != 0) {
    return NodeError(context,
                     absl::StrCat("spatial dims ", h, "x", w, " not divisible by blocksize ", b));
  }
  // `mode` from opset 28: DCR (the default, and all before) puts the block offsets first, CRD
  // after each channel.
  const std::string mode =
      context.info().opset >= 28 ? context.attributes().String("mode", "DCR") : "DCR";
  if (mode != "DCR" && mode != "CRD") {
    return NodeError(context, absl::StrCat("mode '", mode, "' is neither DCR nor CRD"));
  }
  const std::vector<int> perm =
      mode == "CRD" ? std::vector<int>{0, 1, 3, 5, 2, 4} : std::vector<int>{0, 3, 5, 1, 2, 4};
  AMPC_ASSIGN_OR_RETURN(Tensor * out,
                        context.Output(0, {n, c * b * b, h / b, w / b}, input.dtype()));
  PermutedCopy(context, input, {n, c, h / b, b, w / b, b}, perm, *out);
  return absl::OkStatus();
}

absl::Status Trilu(KernelContext& context) {
  const Tensor& input = context.in(0);
  if (input.rank() < 2) {
    return NodeError(context, absl::StrCat("input must have rank >= 2, it has shape ",
                                           ShapeString(input.shape())));
  }
  int64_t k = 0;
  if (const Tensor* k_input = context.input(1)) {
    if (k_input->size() != 1) return NodeError(context, "k must hold one value");
    k = k_input->data<int64_t>()[0];
  }
  const bool upper = context.attributes().Int("upper", 1) != 0;
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, input.shape(), input.dtype()));
  const size_t es = DTypeSize(input.dtype());
  const int64_t rows = input.dim(input.rank() - 2), cols = input.dim(input.rank() - 1);
  const char* x = static_cast<const char*>(input.raw());
  char* y = static_cast<char*>(out->raw());
  for (int64_t m = 0; m < input.size() / std::max<int64_t>(1, rows * cols); ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t at = (m * rows + i) * cols + j;
        const bool keep = upper ? j - i >= k : j - i <= k;
        if (keep) {
          CopyElement(y + at * es, x + at * es, es);
        } else {
          std::memset(y + at * es, 0, es);
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ReverseSequence(KernelContext& context) {
  const Tensor& input = context.in(0);
  const Tensor& lengths = context.in(1);
  const int rank = input.rank();
  if (rank < 2) return NodeError(context, "input must have rank >= 2");
  AMPC_ASSIGN_OR_RETURN(
      const int batch_axis,
      NormalizeAxis(context, context.attributes().Int("batch_axis", 1), rank, "batch_axis"));
  AMPC_ASSIGN_OR_RETURN(
      const int time_axis,
      NormalizeAxis(context, context.attributes().Int("time_axis", 0), rank, "time_axis"));
  if (batch_axis == time_axis || (batch_axis > 1 || time_axis > 1)) {
    return NodeError(context, "batch_axis and time_axis must be 0 and 1 in some order");
  }
  const int64_t batch = input.dim(batch_axis), time = input.dim(time_axis);
  if (lengths.rank() != 1 || lengths.dim(0) != batch) {
    return NodeError(context, absl::StrCat("sequence_lens has shape ", ShapeString(lengths.shape()),
                                           ", expected [", batch, "]"));
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, input.shape(), input.dtype()));
  const std::vector<int64_t> strides = Strides(input.shape());
  const size_t chunk = strides[1] * DTypeSize(input.dtype());  // the dims after the first two
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t length = lengths.data<int64_t>()[b];
    if (length < 0 || length > time) {
      return NodeError(context, absl::StrCat("sequence_lens[", b, "] = ", length,
                                             " is outside [0, ", time, "]"));
    }
    for (int64_t t = 0; t < time; ++t) {
      const int64_t src_t = t < length ? length - 1 - t : t;
      const int64_t dst = b * strides[batch_axis] + t * strides[time_axis];
      const int64_t src = b * strides[batch_axis] + src_t * strides[time_axis];
      std::memcpy(static_cast<char*>(out->raw()) + dst * DTypeSize(input.dtype()),
                  static_cast<const char*>(input.raw()) + src * DTypeSize(input.dtype()), chunk);
    }
  }
  return absl::OkStatus();
}

}  // namespace ampc::tensor_ops
