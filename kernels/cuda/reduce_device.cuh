// Device-side pieces the reduce-family kernels share (reduce.cu, reduce_softmax.cu,
// reduce_norm.cu): loading storage types to their compute type and rounding back once, dispatch
// on ElemType, and the thread groups that reduce one row each. nvcc only.
#ifndef AMPC_KERNELS_CUDA_REDUCE_DEVICE_CUH_
#define AMPC_KERNELS_CUDA_REDUCE_DEVICE_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/elem_type.h"
#include "kernels/cuda/float_storage.cuh"
#include "kernels/cuda/reduce_math.h"

namespace ampc::cuda::detail {

inline constexpr int kThreads = 256;  // threads per block of every row kernel
inline constexpr int kWarp = 32;
inline constexpr int64_t kMaxBlocks = 65535;  // grid-stride loops cover any rows beyond

// ---- Storage types -----------------------------------------------------------------------------

// Io<T>: the storage type's loads and stores (float_storage.cuh); ComputeOf<T> its compute type.
template <typename T>
using Io = FloatStorage<T>;

template <typename T>
using ComputeOf = typename FloatStorage<T>::C;

template <typename T>
struct Tag {
  using type = T;
};

// fn(Tag<T>{}) with T the storage type of a float ElemType; cudaErrorNotSupported otherwise.
template <typename Fn>
cudaError_t DispatchFloat(ElemType type, Fn&& fn) {
  switch (type) {
    case ElemType::kFloat:
      return fn(Tag<float>{});
    case ElemType::kFloat16:
      return fn(Tag<__half>{});
    case ElemType::kBFloat16:
      return fn(Tag<__nv_bfloat16>{});
    case ElemType::kDouble:
      return fn(Tag<double>{});
    default:
      return cudaErrorNotSupported;
  }
}

// ---- Combining functors ------------------------------------------------------------------------

struct AddOp {
  template <typename V>
  __device__ V operator()(V a, V b) const {
    return a + b;
  }
};

// Op::Combine as a functor.
template <typename Op>
struct CombineOp {
  template <typename V>
  __device__ V operator()(V a, V b) const {
    return Op::Combine(a, b);
  }
};

template <typename V>
__device__ V ShuffleXor(V v, int lane_mask) {
  if constexpr (sizeof(V) < sizeof(int)) {
    return static_cast<V>(__shfl_xor_sync(0xffffffffu, static_cast<int>(v), lane_mask));
  } else {
    return __shfl_xor_sync(0xffffffffu, v, lane_mask);
  }
}

// Every lane of the (whole, converged) warp gets op over the warp's 32 values. The butterfly
// applies op in the same order on every lane, up to swapping its operands.
template <typename V, typename Op>
__device__ V WarpAllReduce(V v, Op op) {
  for (int lane_mask = kWarp / 2; lane_mask > 0; lane_mask /= 2) {
    v = op(v, ShuffleXor(v, lane_mask));
  }
  return v;
}

// ---- Row groups --------------------------------------------------------------------------------
// A group of Size() threads reduces one row; lane l handles the row's elements l, l + Size(), ...
// A block holds kRowsPerBlock groups; group Slot() takes row r0 + Slot() of each block-step.
// AllReduce gives every thread of the group the same result. It synchronises the block, so every
// thread of the block must call it the same number of times: kernels loop over rows uniformly
// and let threads past the last row take part with their identity values ("active" false).

// One warp per row: for rows of up to about a thousand elements.
struct WarpRows {
  static constexpr int kRowsPerBlock = kThreads / kWarp;
  static constexpr int kSize = kWarp;
  static dim3 Block() { return dim3(kThreads); }
  static __device__ int Lane() { return threadIdx.x % kWarp; }
  static __device__ int Slot() { return threadIdx.x / kWarp; }
  template <typename V, typename Op>
  static __device__ V AllReduce(V v, Op op) {
    return WarpAllReduce(v, op);
  }
};

// One block per row: for long rows.
struct BlockRows {
  static constexpr int kRowsPerBlock = 1;
  static constexpr int kSize = kThreads;
  static dim3 Block() { return dim3(kThreads); }
  static __device__ int Lane() { return threadIdx.x; }
  static __device__ int Slot() { return 0; }
  template <typename V, typename Op>
  static __device__ V AllReduce(V v, Op op) {
    constexpr int kWarps = kThreads / kWarp;
    __shared__ V partial[kWarps];
    v = WarpAllReduce(v, op);
    __syncthreads();  // an earlier call's readers are done with `partial`
    if (threadIdx.x % kWarp == 0) partial[threadIdx.x / kWarp] = v;
    __syncthreads();
    V result = partial[0];
    for (int w = 1; w < kWarps; ++w) result = op(result, partial[w]);
    return result;
  }
};

// Strided rows (the [outer, n, inner] view with inner > 1): blockDim (32, 8); the 32 threads of a
// warp take 32 neighbouring rows, whose elements are neighbours in memory, and the 8 warps split
// each row's elements.
struct ColumnRows {
  static constexpr int kColumns = kWarp;
  static constexpr int kLanes = kThreads / kWarp;
  static constexpr int kRowsPerBlock = kColumns;
  static constexpr int kSize = kLanes;
  static dim3 Block() { return dim3(kColumns, kLanes); }
  static __device__ int Lane() { return threadIdx.y; }
  static __device__ int Slot() { return threadIdx.x; }
  template <typename V, typename Op>
  static __device__ V AllReduce(V v, Op op) {
    __shared__ V partial[kLanes][kColumns];
    __syncthreads();  // an earlier call's readers are done with `partial`
    partial[threadIdx.y][threadIdx.x] = v;
    __syncthreads();
    V result = partial[0][threadIdx.x];
    for (int l = 1; l < kLanes; ++l) result = op(result, partial[l][threadIdx.x]);
    return result;
  }
};

// ---- Row addressing ----------------------------------------------------------------------------

// Rows of n contiguous elements.
struct ContiguousRows {
  int64_t n;
  __device__ int64_t Base(int64_t r) const { return r * n; }
  __device__ int64_t At(int64_t base, int64_t k) const { return base + k; }
};

// Row r = (o, i) of the [outer, n, inner] view: elements inner apart from o * n * inner + i.
struct StridedRows {
  int64_t n, inner;
  __device__ int64_t Base(int64_t r) const { return (r / inner) * n * inner + r % inner; }
  __device__ int64_t At(int64_t base, int64_t k) const { return base + k * inner; }
};

// Blocks for `rows` rows in groups of Group::kRowsPerBlock, capped (grid-stride loops).
template <typename Group>
unsigned BlocksFor(int64_t rows) {
  const int64_t blocks = (rows + Group::kRowsPerBlock - 1) / Group::kRowsPerBlock;
  return static_cast<unsigned>(std::min(blocks, kMaxBlocks));
}

// Kernels walk rows in block-steps: for (r0 = FirstRow<G>(); r0 < rows; r0 += RowStride<G>()),
// group Slot() taking row r0 + Slot().
template <typename Group>
__device__ int64_t FirstRow() {
  return int64_t{blockIdx.x} * Group::kRowsPerBlock;
}
template <typename Group>
__device__ int64_t RowStride() {
  return int64_t{gridDim.x} * Group::kRowsPerBlock;
}

// Rows of at least this many elements get a block each, shorter ones a warp.
inline constexpr int64_t kBlockRowLength = 1024;
// Strided rows go 32 to a block unless there are this few of them and they are long (a tall,
// narrow reduction): then a block each, so more than a handful of blocks run.
inline constexpr int64_t kFewStridedRows = 1024;
inline constexpr int64_t kLongStridedRow = 4096;

// Calls launch(Group{}, index) with the thread group and addressing for the `rows` rows of an
// [outer, n, inner] view (rows = outer * inner).
template <typename Launch>
cudaError_t ForRows(int64_t rows, int64_t n, int64_t inner, Launch&& launch) {
  if (inner > 1) {
    if (rows <= kFewStridedRows && n >= kLongStridedRow) {
      return launch(BlockRows{}, StridedRows{n, inner});
    }
    return launch(ColumnRows{}, StridedRows{n, inner});
  }
  if (n >= kBlockRowLength) return launch(BlockRows{}, ContiguousRows{n});
  return launch(WarpRows{}, ContiguousRows{n});
}

}  // namespace ampc::cuda::detail

#endif  // AMPC_KERNELS_CUDA_REDUCE_DEVICE_CUH_
