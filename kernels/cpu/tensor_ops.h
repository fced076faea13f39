// The tensor family (shape and data movement): helpers its kernels share, and the kernel functions
// of tensor_layout_kernels.cc and tensor_index_kernels.cc that RegisterTensorKernels registers.
// Data is moved as bytes (element size from DTypeSize), so every element type works unchanged.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/kernel.h"

namespace ampc::tensor_ops {

// An int32 or int64 tensor's values as int64 (shapes, axes, pads, repeats, indices).
absl::StatusOr<std::vector<int64_t>> ReadInts(const KernelContext& context, const Tensor& tensor,
                                              absl::string_view what);

// `axis` in [-rank, rank) as a non-negative axis, or an error naming `what`.
absl::StatusOr<int> NormalizeAxis(const KernelContext& context, int64_t axis, int rank,
                                  absl::string_view what = "axis");

// Indices with negatives wrapped, checked against `dim` (errors name the index and `axis`).
absl::StatusOr<std::vector<int64_t>> CheckedIndices(const KernelContext& context,
                                                    const Tensor& indices, int64_t dim, int axis);

// ScatterElements/ScatterND's `reduction` attribute.
enum class Reduction { kNone, kAdd, kMul, kMax, kMin };
absl::StatusOr<Reduction> ReductionOf(const KernelContext& context);

// GatherND/ScatterND: the element offset in `data` of every index tuple (the last dim of
// `indices`), the tuples addressing data's dims from `first` on; errors name the bad index.
absl::StatusOr<std::vector<int64_t>> TupleOffsets(const KernelContext& context, const Shape& data,
                                                  const Tensor& indices, int first);

// Row-major strides in elements.
std::vector<int64_t> Strides(const Shape& shape);

// A map entry meaning "no input element here": the output element gets the fill value. Far enough
// below zero that any sum with other entries stays negative.
inline constexpr int64_t kOutside = -(int64_t{1} << 56);

// Writes out (row-major over `shape`) from in: the output element with multi-index i reads input
// element sum_d maps[d][i[d]], or `fill` (one element) when that sum is negative. Transpose,
// Slice, Expand, Tile, Pad and DepthToSpace are all such maps. Parallel over rows.
void MappedCopy(KernelContext& context, const void* in, void* out, const Shape& shape,
                const std::vector<std::vector<int64_t>>& maps, size_t element_size,
                const void* fill = nullptr);

// Copies one element of `size` bytes (constant sizes so the compiler emits plain moves).
inline void CopyElement(char* dst, const char* src, size_t size) {
  switch (size) {
    case 1:
      std::memcpy(dst, src, 1);
      break;
    case 2:
      std::memcpy(dst, src, 2);
      break;
    case 4:
      std::memcpy(dst, src, 4);
      break;
    case 8:
      std::memcpy(dst, src, 8);
      break;
    default:
      std::memcpy(dst, src, size);
  }
}

// Sets the n elements of `size` bytes at dst to the one at value.
template <typename U>
void FillAs(char* dst, int64_t n, const char* value) {
  U v;
  std::memcpy(&v, value, sizeof(U));
  U* out = reinterpret_cast<U*>(dst);
  std::fill(out, out + n, v);
}
inline void FillElements(char* dst, int64_t n, const char* value, size_t size) {
  switch (size) {
    case 1:
      return FillAs<uint8_t>(dst, n, value);
    case 2:
      return FillAs<uint16_t>(dst, n, value);
    case 4:
      return FillAs<uint32_t>(dst, n, value);
    case 8:
      return FillAs<uint64_t>(dst, n, value);
    default:
      for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * size, value, size);
  }
}

// Transpose's `perm` attribute for an input of `rank` dims (reversed dims when absent), checked
// to be a permutation.
absl::StatusOr<std::vector<int64_t>> TransposePerm(const KernelContext& context, int rank);

// Expand's output shape: input 0's shape broadcast with the shape in input 1 (non-negative).
absl::StatusOr<Shape> ExpandShape(const KernelContext& context);

// ConstantOfShape's output shape (input 0, non-negative dims) and fill value (attribute 'value',
// one element; float 0 when absent).
struct ConstantFill {
  Shape shape;
  Tensor value;
};
absl::StatusOr<ConstantFill> ReadConstantOfShape(const KernelContext& context);

// Gather: the axis, the checked indices (negatives wrapped), the output shape, and data seen as
// [outer, dim, chunk bytes] around the axis.
struct GatherPlan {
  int axis = 0;
  std::vector<int64_t> index;
  Shape output;
  int64_t outer = 1, dim = 0;
  size_t chunk = 0;
};
absl::StatusOr<GatherPlan> PlanGather(const KernelContext& context);
// The plan without `index` (indices not read): shapes only.
absl::StatusOr<GatherPlan> GatherShape(const KernelContext& context);

// ScatterND: the reduction, the element offset in data of every index tuple (checked), and the
// elements each tuple's update slice holds; updates checked against data and indices.
struct ScatterNDPlan {
  Reduction reduction = Reduction::kNone;
  std::vector<int64_t> offsets;
  int64_t slice = 1;
};
absl::StatusOr<ScatterNDPlan> PlanScatterND(const KernelContext& context);
// ScatterND's shapes only (indices not read): the elements of each tuple's update slice.
absl::StatusOr<int64_t> ScatterNDSlice(const KernelContext& context);

// tensor_layout_kernels.cc
absl::Status Transpose(KernelContext& context);
absl::Status Concat(KernelContext& context);
absl::Status Split(KernelContext& context);
absl::Status Slice(KernelContext& context);
absl::Status Expand(KernelContext& context);
absl::Status Tile(KernelContext& context);
absl::Status Pad(KernelContext& context);
absl::Status DepthToSpace(KernelContext& context);
absl::Status SpaceToDepth(KernelContext& context);
absl::Status Trilu(KernelContext& context);
absl::Status ReverseSequence(KernelContext& context);

// tensor_index_kernels.cc
absl::Status Gather(KernelContext& context);
absl::Status GatherElements(KernelContext& context);
absl::Status GatherND(KernelContext& context);
absl::Status ScatterElements(KernelContext& context);
absl::Status ScatterND(KernelContext& context);
absl::Status OneHot(KernelContext& context);
absl::Status NonZero(KernelContext& context);
absl::Status Compress(KernelContext& context);

}  // namespace ampc::tensor_ops
