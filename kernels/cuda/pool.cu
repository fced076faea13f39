#include <cmath>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/float_storage.cuh"
#include "kernels/cuda/pool.h"

namespace ampc::cuda {
namespace {

constexpr int kThreads = 256;

// Calls visit(in-plane offset) for each tap of output element `o` (an in-plane index) that lies
// inside the input, in row-major order, the CPU's order. Returns the window's taps.
template <typename Visit>
__device__ void ForEachTap(const PoolGeometry& g, int64_t o, AxisTaps taps[kMaxPoolDims],
                           Visit&& visit) {
  const int64_t o2 = o % g.out[2];
  const int64_t o1 = (o / g.out[2]) % g.out[1];
  const int64_t o0 = o / (g.out[2] * g.out[1]);
  taps[0] = TapsOf(g, 0, o0);
  taps[1] = TapsOf(g, 1, o1);
  taps[2] = TapsOf(g, 2, o2);
  for (int64_t t0 = 0; t0 < taps[0].count; ++t0) {
    const int64_t i0 = taps[0].first + t0 * g.dilation[0];
    for (int64_t t1 = 0; t1 < taps[1].count; ++t1) {
      const int64_t row = (i0 * g.in[1] + taps[1].first + t1 * g.dilation[1]) * g.in[2];
      for (int64_t t2 = 0; t2 < taps[2].count; ++t2) {
        visit(row + taps[2].first + t2 * g.dilation[2]);
      }
    }
  }
}

template <typename T>
__global__ void MaxPoolKernel(const T* x, T* y, int64_t* indices, bool column_major,
                              PoolGeometry g) {
  const int64_t in_size = InPlaneSize(g), out_size = OutPlaneSize(g);
  const int64_t total = g.planes * out_size;
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; e < total; e += step) {
    const int64_t plane = e / out_size;
    const T* xp = x + plane * in_size;
    float best = -INFINITY;
    int64_t best_offset = -1;
    AxisTaps taps[kMaxPoolDims];
    ForEachTap(g, e % out_size, taps, [&](int64_t offset) {
      const float v = LoadFloat(xp, offset);
      if (best_offset < 0) best_offset = offset;  // the window's first tap, as the CPU starts
      if (v > best || isnan(v)) {                 // a later NaN takes over, as on the CPU
        best = v;
        best_offset = offset;
      }
    });
    StoreFloat(y, e, best);
    if (indices != nullptr) {
      if (best_offset < 0) best_offset = 0;  // an empty window
      indices[e] =
          plane * in_size + (column_major ? ColumnMajorOffset(g, best_offset) : best_offset);
    }
  }
}

template <typename T>
__global__ void AveragePoolKernel(const T* x, T* y, bool count_include_pad, PoolGeometry g) {
  const int64_t in_size = InPlaneSize(g), out_size = OutPlaneSize(g);
  const int64_t total = g.planes * out_size;
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; e < total; e += step) {
    const T* xp = x + (e / out_size) * in_size;
    float sum = 0;
    AxisTaps taps[kMaxPoolDims];
    ForEachTap(g, e % out_size, taps, [&](int64_t offset) { sum += LoadFloat(xp, offset); });
    const int64_t count = count_include_pad ? taps[0].padded * taps[1].padded * taps[2].padded
                                            : taps[0].count * taps[1].count * taps[2].count;
    StoreFloat(y, e, sum / static_cast<float>(count));
  }
}

// One warp per plane: lane l sums elements l, l + 32, ...; then a butterfly over the lanes.
template <typename T>
__global__ void GlobalAveragePoolKernel(const T* x, T* y, int64_t planes, int64_t inner) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / 32);
  for (int64_t p = int64_t{blockIdx.x} * (blockDim.x / 32) + threadIdx.x / 32; p < planes;
       p += warps) {
    const T* xp = x + p * inner;
    float sum = 0;
    for (int64_t j = lane; j < inner; j += 32) sum += LoadFloat(xp, j);
    for (int offset = 16; offset > 0; offset /= 2) {
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    }
    if (lane == 0) StoreFloat(y, p, sum / static_cast<float>(inner));
  }
}

// MaxPoolGrad, step 1: keys = the indices (x_size for one out of range), values = positions.
__global__ void PrepareKeysKernel(const int64_t* indices, int64_t n, int64_t x_size, uint32_t* keys,
                                  int32_t* positions) {
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += step) {
    const int64_t k = indices[i];
    keys[i] = static_cast<uint32_t>(k >= 0 && k < x_size ? k : x_size);
    positions[i] = static_cast<int32_t>(i);
  }
}

// Step 3, after the sort: the first element of each run of equal keys sums the run in position
// order (the sort is stable and the positions started in order) and writes dx once.
template <typename T>
__global__ void SumRunsKernel(const T* dy, const uint32_t* keys, const int32_t* positions,
                              int64_t n, int64_t x_size, T* dx) {
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += step) {
    const uint32_t key = keys[i];
    if (key >= x_size || (i > 0 && keys[i - 1] == key)) continue;
    float sum = 0;
    for (int64_t j = i; j < n && keys[j] == key; ++j) sum += LoadFloat(dy, positions[j]);
    StoreFloat(dx, key, sum);
  }
}

// Bits the radix sort must look at for keys in [0, x_size].
int KeyBits(int64_t x_size) {
  int bits = 1;
  while (bits < 32 && (int64_t{1} << bits) <= x_size) ++bits;
  return bits;
}

constexpr size_t kAlign = 256;
size_t Aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// The workspace: keys in and out, positions in and out, then CUB's temporary storage.
struct ScatterWorkspace {
  uint32_t* keys_in;
  uint32_t* keys_out;
  int32_t* positions_in;
  int32_t* positions_out;
  void* sort_storage;
  size_t sort_bytes;
};

size_t ArraysBytes(int64_t n) {
  return 2 * Aligned(sizeof(uint32_t) * n) + 2 * Aligned(sizeof(int32_t) * n);
}

cudaError_t SortBytes(int64_t n, int64_t x_size, size_t* bytes) {
  *bytes = 0;
  return cub::DeviceRadixSort::SortPairs(
      nullptr, *bytes, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), static_cast<int>(n), 0,
      KeyBits(x_size));
}

}  // namespace

cudaError_t MaxPoolForward(ElemType type, const void* x, void* y, int64_t* indices,
                           bool column_major, const PoolGeometry& g, cudaStream_t stream) {
  const int64_t total = g.planes * OutPlaneSize(g);
  if (total == 0) return cudaSuccess;
  return DispatchFloatStorage(type, [&](auto tag) {
    using T = decltype(tag);
    MaxPoolKernel<T><<<GridFor(total, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), indices, column_major, g);
    return cudaGetLastError();
  });
}

cudaError_t AveragePoolForward(ElemType type, const void* x, void* y, bool count_include_pad,
                               const PoolGeometry& g, cudaStream_t stream) {
  const int64_t total = g.planes * OutPlaneSize(g);
  if (total == 0) return cudaSuccess;
  return DispatchFloatStorage(type, [&](auto tag) {
    using T = decltype(tag);
    AveragePoolKernel<T><<<GridFor(total, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), count_include_pad, g);
    return cudaGetLastError();
  });
}

cudaError_t GlobalAveragePoolForward(ElemType type, const void* x, void* y, int64_t planes,
                                     int64_t inner, cudaStream_t stream) {
  if (planes == 0) return cudaSuccess;
  constexpr int kWarpsPerBlock = kThreads / 32;
  return DispatchFloatStorage(type, [&](auto tag) {
    using T = decltype(tag);
    GlobalAveragePoolKernel<T><<<GridFor(planes, kWarpsPerBlock), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), planes, inner);
    return cudaGetLastError();
  });
}

cudaError_t MaxPoolBackwardWorkspace(int64_t n, int64_t x_size, size_t* bytes) {
  *bytes = 0;
  if (n <= 0) return cudaSuccess;
  if (n > INT32_MAX || x_size >= INT32_MAX) return cudaErrorInvalidValue;
  size_t sort_bytes = 0;
  if (cudaError_t e = SortBytes(n, x_size, &sort_bytes); e != cudaSuccess) return e;
  *bytes = ArraysBytes(n) + Aligned(sort_bytes);
  return cudaSuccess;
}

cudaError_t MaxPoolBackward(ElemType type, const void* dy, const int64_t* indices, int64_t n,
                            void* dx, int64_t x_size, void* workspace, size_t workspace_bytes,
                            cudaStream_t stream) {
  if (x_size > 0) {
    if (cudaError_t e = cudaMemsetAsync(dx, 0, x_size * ElemSize(type), stream); e != cudaSuccess) {
      return e;
    }
  }
  if (n == 0 || x_size == 0) return cudaSuccess;
  size_t needed = 0;
  if (cudaError_t e = MaxPoolBackwardWorkspace(n, x_size, &needed); e != cudaSuccess) return e;
  if (workspace_bytes < needed) return cudaErrorInvalidValue;
  char* base = static_cast<char*>(workspace);
  ScatterWorkspace w;
  w.keys_in = reinterpret_cast<uint32_t*>(base);
  base += Aligned(sizeof(uint32_t) * n);
  w.keys_out = reinterpret_cast<uint32_t*>(base);
  base += Aligned(sizeof(uint32_t) * n);
  w.positions_in = reinterpret_cast<int32_t*>(base);
  base += Aligned(sizeof(int32_t) * n);
  w.positions_out = reinterpret_cast<int32_t*>(base);
  base += Aligned(sizeof(int32_t) * n);
  w.sort_storage = base;
  w.sort_bytes = needed - ArraysBytes(n);
  PrepareKeysKernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(indices, n, x_size, w.keys_in,
                                                                   w.positions_in);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (cudaError_t e = cub::DeviceRadixSort::SortPairs(
          w.sort_storage, w.sort_bytes, w.keys_in, w.keys_out, w.positions_in, w.positions_out,
          static_cast<int>(n), 0, KeyBits(x_size), stream);
      e != cudaSuccess) {
    return e;
  }
  return DispatchFloatStorage(type, [&](auto tag) {
    using T = decltype(tag);
    SumRunsKernel<T><<<GridFor(n, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(dy), w.keys_out, w.positions_out, n, x_size, static_cast<T*>(dx));
    return cudaGetLastError();
  });
}

}  // namespace ampc::cuda
