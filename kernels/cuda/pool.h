// Pooling on the GPU: MaxPool (and its Indices), AveragePool, GlobalAveragePool and the scatter
// of MaxPoolGrad. Each output element is one thread that walks its window in the CPU kernel's
// order (kernels/cpu/norm_pool_kernels.cc), so sums and tie-breaks match it; FP16/BF16 compute in
// FP32 and round once. Plain C++ header: includable without nvcc.
#ifndef AMPC_KERNELS_CUDA_POOL_H_
#define AMPC_KERNELS_CUDA_POOL_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/elem_type.h"

// Functions both the kernels and host code (tests, plans) call.
#ifndef AMPC_HOST_DEVICE
#ifdef __CUDACC__
#define AMPC_HOST_DEVICE __host__ __device__
#else
#define AMPC_HOST_DEVICE
#endif
#endif

namespace ampc::cuda {

inline constexpr int kMaxPoolDims = 3;

// The windows of a pool over up to 3 spatial dims, the same for every (n, c) plane. Fewer dims
// are given as leading dims of size 1 with kernel 1, stride 1, dilation 1 and no padding: they
// change neither the windows nor the offsets. Pads are resolved (auto_pad applied).
struct PoolGeometry {
  int64_t planes = 0;  // N * C
  int64_t in[kMaxPoolDims] = {1, 1, 1};
  int64_t out[kMaxPoolDims] = {1, 1, 1};
  int64_t kernel[kMaxPoolDims] = {1, 1, 1};
  int64_t stride[kMaxPoolDims] = {1, 1, 1};
  int64_t dilation[kMaxPoolDims] = {1, 1, 1};
  int64_t pad_begin[kMaxPoolDims] = {0, 0, 0};
  int64_t pad_end[kMaxPoolDims] = {0, 0, 0};
};

AMPC_HOST_DEVICE inline int64_t InPlaneSize(const PoolGeometry& g) {
  return g.in[0] * g.in[1] * g.in[2];
}
AMPC_HOST_DEVICE inline int64_t OutPlaneSize(const PoolGeometry& g) {
  return g.out[0] * g.out[1] * g.out[2];
}

// Where the window of output coordinate `o` reads along axis `d`: the first input coordinate
// inside the input, how many taps lie inside it and how many inside the padded input (for
// count_include_pad). The same loop as pool::MakePlan's AxisWindow.
struct AxisTaps {
  int64_t first = 0;
  int64_t count = 0;
  int64_t padded = 0;
};

AMPC_HOST_DEVICE inline AxisTaps TapsOf(const PoolGeometry& g, int d, int64_t o) {
  AxisTaps taps;
  for (int64_t t = 0; t < g.kernel[d]; ++t) {
    const int64_t i = o * g.stride[d] - g.pad_begin[d] + t * g.dilation[d];
    if (i >= 0 && i < g.in[d] && taps.count++ == 0) taps.first = i;
    if (i < g.in[d] + g.pad_end[d]) ++taps.padded;
  }
  return taps;
}

// A row-major in-plane offset as the column-major one (MaxPool's storage_order = 1).
AMPC_HOST_DEVICE inline int64_t ColumnMajorOffset(const PoolGeometry& g, int64_t offset) {
  const int64_t i2 = offset % g.in[2];
  const int64_t i1 = (offset / g.in[2]) % g.in[1];
  const int64_t i0 = offset / (g.in[2] * g.in[1]);
  return i0 + g.in[0] * (i1 + g.in[1] * i2);
}

// MaxPool: y = the largest element of each window (a NaN wins: the last NaN of the window, as on
// the CPU; an empty window gives -inf). `indices` (may be null): the winner's offset into the
// flattened input, its in-plane part row-major, or column-major when `column_major`.
cudaError_t MaxPoolForward(ElemType type, const void* x, void* y, int64_t* indices,
                           bool column_major, const PoolGeometry& g, cudaStream_t stream);

// AveragePool: the window's sum divided by its taps inside the input, or (count_include_pad) by
// those inside the padded input.
cudaError_t AveragePoolForward(ElemType type, const void* x, void* y, bool count_include_pad,
                               const PoolGeometry& g, cudaStream_t stream);

// GlobalAveragePool: y[p] = the mean of plane p's `inner` elements (one warp per plane, a fixed
// summation order: deterministic, but not the CPU's sequential order).
cudaError_t GlobalAveragePoolForward(ElemType type, const void* x, void* y, int64_t planes,
                                     int64_t inner, cudaStream_t stream);

// MaxPoolGrad without float atomics: the (index, position) pairs are sorted by index (a stable
// radix sort), then each run of equal indices is summed by one thread in position order, the
// order the CPU adds them in, so dx equals the CPU's bit for bit. Elements no index names get 0;
// indices outside [0, x_size) are ignored (the CPU kernel rejects them before it runs).
//
// The workspace the scatter needs for `n` indices into `x_size` elements (both below 2^31).
cudaError_t MaxPoolBackwardWorkspace(int64_t n, int64_t x_size, size_t* bytes);
// dx[indices[i]] += dy[i] for i in [0, n); dx has x_size elements and is overwritten.
cudaError_t MaxPoolBackward(ElemType type, const void* dy, const int64_t* indices, int64_t n,
                            void* dx, int64_t x_size, void* workspace, size_t workspace_bytes,
                            cudaStream_t stream);

}  // namespace ampc::cuda

#endif  // AMPC_KERNELS_CUDA_POOL_H_
