// What the reduce-family kernels share: accumulator types (FP32 for FP16/BF16/FP32, FP64 for
// FP64), rounding once to the output type, axis checks, the [outer, n, inner] view around one
// axis, and reading small integer inputs (axes, k).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kernels/cpu/parallel_for.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/kernel.h"

namespace ampc::reduce {

// The type sums of T accumulate in: float for FP16/BF16/FP32, double for FP64, 64-bit integers
// for integers.
template <typename T>
using Acc = std::conditional_t<std::is_floating_point_v<typename Compute<T>::type>,
                               typename Compute<T>::type,
                               std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;

// The type log/exp/sqrt of T are computed in: the accumulator for floats, double for integers.
template <typename T>
using FloatAcc = std::conditional_t<std::is_floating_point_v<Acc<T>>, Acc<T>, double>;

// Sums term(j) for j in [0, n): in A, in order, as a one-thread CUDA reduction does, within
// chunks of kSumChunk terms; chunk sums add up in double. Up to a chunk the result is the plain
// running sum (bit for bit what the CUDA kernels' host mirror gives); beyond, a float sum no
// longer drifts (a running float sum of 2^25 ones stops at 2^24). Integer sums are plain.
inline constexpr int64_t kSumChunk = 4096;
template <typename A, typename Term>
A ChunkedSum(int64_t n, Term&& term) {
  if (std::is_integral_v<A> || n <= kSumChunk) {
    A sum{0};
    for (int64_t j = 0; j < n; ++j) sum += term(j);
    return sum;
  }
  double total = 0;
  for (int64_t begin = 0; begin < n; begin += kSumChunk) {
    A sum{0};
    for (int64_t j = begin, end = std::min(n, begin + kSumChunk); j < end; ++j) sum += term(j);
    total += static_cast<double>(sum);
  }
  return static_cast<A>(total);
}

template <typename T>
Acc<T> LoadAcc(T v) {
  return static_cast<Acc<T>>(Compute<T>::Load(v));
}

// Rounds a computed value once to storage type T.
template <typename T, typename V>
T StoreAs(V v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return Compute<T>::Store(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// a < b with NaN above every number (a strict weak order, so sorting never goes wrong).
template <typename C>
bool LessNanLast(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (a != a) return false;
    if (b != b) return true;
  }
  return a < b;
}

// `axis` in [-rank, rank) made non-negative, or an error naming it.
inline absl::StatusOr<int> NormalizeAxis(const KernelContext& context, int64_t axis, int rank,
                                         absl::string_view what = "axis") {
  if (axis < -rank || axis >= rank) {
    return NodeError(context,
                     absl::StrCat(what, " ", axis, " is out of range for an input of rank ", rank));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// A tensor seen as [outer, n, inner] around one axis (or, for old Softmax, [outer, n] with n the
// product of the trailing dims).
struct AxisLayout {
  int64_t outer = 1, n = 1, inner = 1;
  int64_t rows() const { return outer * inner; }
  // First element of row r (r in [0, outer * inner)); the row's elements are `inner` apart.
  int64_t RowStart(int64_t r) const { return (r / inner) * n * inner + r % inner; }
};

inline AxisLayout LayoutAround(const Shape& shape, int axis) {
  AxisLayout layout;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    (d < axis ? layout.outer : d == axis ? layout.n : layout.inner) *= shape[d];
  }
  return layout;
}

// The values of an int32/int64 tensor (axes, k, axis inputs).
inline absl::StatusOr<std::vector<int64_t>> ReadInts(const KernelContext& context,
                                                     const Tensor& tensor, absl::string_view what) {
  std::vector<int64_t> values;
  if (tensor.dtype() == DType::kInt64) {
    for (int64_t v : tensor.span<const int64_t>()) values.push_back(v);
  } else if (tensor.dtype() == DType::kInt32) {
    for (int32_t v : tensor.span<const int32_t>()) values.push_back(v);
  } else {
    return NodeError(
        context, absl::StrCat(what, " must be int32 or int64, got ", DTypeName(tensor.dtype())));
  }
  return values;
}

// Softmax/LogSoftmax/Hardmax's rows: around attribute `axis` (default -1 from opset 13, else 1);
// before opset 13 the input is flattened to 2-D at `axis`.
inline absl::StatusOr<AxisLayout> SoftmaxLayout(const KernelContext& context) {
  const Tensor& x = context.in(0);
  const int opset = context.info().opset;
  const int64_t axis_attribute = context.attributes().Int("axis", opset >= 13 ? -1 : 1);
  AMPC_ASSIGN_OR_RETURN(int axis, NormalizeAxis(context, axis_attribute, x.rank()));
  AxisLayout layout = LayoutAround(x.shape(), axis);
  if (opset < 13) layout = {.outer = layout.outer, .n = layout.n * layout.inner, .inner = 1};
  return layout;
}

// A reduction's axes: input 1 for ReduceSum from opset 13 (every reduction from opset 18), else
// the attribute.
inline absl::StatusOr<std::vector<int64_t>> ReduceAxes(const KernelContext& context) {
  const int opset = context.info().opset;
  const bool from_input =
      opset >= 18 || (opset >= 13 && context.info().node.op_type() == "ReduceSum");
  if (!from_input) return context.attributes().Ints("axes");
  const Tensor* axes = context.input(1);
  if (axes == nullptr) return std::vector<int64_t>{};
  if (axes->rank() > 1) {
    return NodeError(context,
                     absl::StrCat("axes must be 1-D, got shape ", ShapeString(axes->shape())));
  }
  return ReadInts(context, *axes, "axes");
}

// The dims of input 0 a reduction reduces (all of them for empty axes), checked.
struct ReducedDims {
  bool noop = false;  // empty axes with noop_with_empty_axes: the output is the input
  bool keepdims = true;
  std::vector<bool> reduced;  // per input dim
};

inline absl::StatusOr<ReducedDims> ReadReducedDims(const KernelContext& context) {
  const int rank = context.in(0).rank();
  AMPC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReduceAxes(context));
  const Attributes attributes = context.attributes();
  ReducedDims dims;
  if (axes.empty() && attributes.Int("noop_with_empty_axes", 0) != 0) {
    dims.noop = true;
    return dims;
  }
  dims.reduced.assign(rank, axes.empty());
  for (int64_t axis : axes) {
    AMPC_ASSIGN_OR_RETURN(int d, NormalizeAxis(context, axis, rank, "axes value"));
    if (dims.reduced[d]) {
      return NodeError(context, absl::StrCat("axis ", axis, " is repeated in axes"));
    }
    dims.reduced[d] = true;
  }
  dims.keepdims = attributes.Int("keepdims", 1) != 0;
  return dims;
}

// The single value of a one-element int32/int64 input (a scalar or a [1] tensor).
inline absl::StatusOr<int64_t> ReadScalarInt(const KernelContext& context, const Tensor& tensor,
                                             absl::string_view what) {
  auto values = ReadInts(context, tensor, what);
  if (!values.ok()) return values.status();
  if (values->size() != 1 || tensor.rank() > 1) {
    return NodeError(context, absl::StrCat(what, " must hold a single value, got shape ",
                                           ShapeString(tensor.shape())));
  }
  return (*values)[0];
}

// parallel_for.h's, here too: linalg_col2im.h calls it as reduce::ParallelFor.
using ::ampc::ParallelFor;

inline absl::Status UnsupportedType(const KernelContext& context) {
  return NodeError(context, absl::StrCat("element type ", DTypeName(context.in(0).dtype()),
                                         " is not supported"));
}

// Whether the node names optional output i.
inline bool WantsOutput(const KernelContext& context, int i) {
  const auto& outputs = context.info().node.output();
  return i < outputs.size() && !outputs[i].empty();
}

}  // namespace ampc::reduce
