#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/index.h"
#include "kernels/numerics/num.h"

namespace ampc::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

int Blocks(int64_t work) {
  return static_cast<int>(
      std::max<int64_t>(1, std::min(kMaxBlocks, (work + kThreads - 1) / kThreads)));
}

// ---- Gather: rows copied in the widest word that divides the row and both pointers ----

template <typename W>
__global__ void GatherKernel(const W* x, W* y, const int64_t* index, int64_t dim, int64_t count,
                             int64_t words, int64_t total) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t w = i % words;
    const int64_t row = i / words;  // o * count + j
    const int64_t j = row % count;
    const int64_t o = row / count;
    y[i] = x[(o * dim + index[j]) * words + w];
  }
}

template <typename W>
cudaError_t LaunchGather(const void* x, void* y, const int64_t* index, int64_t outer, int64_t dim,
                         int64_t count, size_t row_bytes, cudaStream_t stream) {
  const int64_t words = static_cast<int64_t>(row_bytes / sizeof(W));
  const int64_t total = outer * count * words;
  GatherKernel<W><<<Blocks(total), kThreads, 0, stream>>>(
      static_cast<const W*>(x), static_cast<W*>(y), index, dim, count, words, total);
  return cudaGetLastError();
}

// y[o, j, :] = x[o, index[j], :], or zeros where index[j] is out of range.
template <typename W, typename I>
__global__ void GatherDeviceIndexKernel(const W* x, W* y, const I* index, int64_t dim,
                                        int64_t count, int64_t words, int64_t total) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t w = i % words;
    const int64_t row = i / words;
    const int64_t j = row % count;
    const int64_t o = row / count;
    int64_t at = static_cast<int64_t>(index[j]);
    if (at < 0) at += dim;
    y[i] = at >= 0 && at < dim ? x[(o * dim + at) * words + w] : W{};
  }
}

template <typename W>
cudaError_t LaunchGatherDeviceIndex(const void* x, void* y, const void* index, bool index64,
                                    int64_t outer, int64_t dim, int64_t count, size_t row_bytes,
                                    cudaStream_t stream) {
  const int64_t words = static_cast<int64_t>(row_bytes / sizeof(W));
  const int64_t total = outer * count * words;
  if (index64) {
    GatherDeviceIndexKernel<W, int64_t><<<Blocks(total), kThreads, 0, stream>>>(
        static_cast<const W*>(x), static_cast<W*>(y), static_cast<const int64_t*>(index), dim,
        count, words, total);
  } else {
    GatherDeviceIndexKernel<W, int32_t><<<Blocks(total), kThreads, 0, stream>>>(
        static_cast<const W*>(x), static_cast<W*>(y), static_cast<const int32_t*>(index), dim,
        count, words, total);
  }
  return cudaGetLastError();
}

bool Fits(size_t word, size_t row_bytes, const void* x, const void* y) {
  return row_bytes % word == 0 && reinterpret_cast<uintptr_t>(x) % word == 0 &&
         reinterpret_cast<uintptr_t>(y) % word == 0;
}

// launch(W{}) with the widest word W that divides the row and both pointers.
template <typename Launch>
cudaError_t ByWord(size_t row_bytes, const void* x, const void* y, Launch launch) {
  if (Fits(16, row_bytes, x, y)) return launch(uint4{});
  if (Fits(8, row_bytes, x, y)) return launch(uint64_t{});
  if (Fits(4, row_bytes, x, y)) return launch(uint32_t{});
  if (Fits(2, row_bytes, x, y)) return launch(uint16_t{});
  return launch(uint8_t{});
}

// ---- ScatterND: one thread per (destination, element of the slice) ----

template <typename T>
__device__ typename Num<T>::type Combine(ScatterReduction r, typename Num<T>::type a,
                                         typename Num<T>::type b) {
  switch (r) {
    case ScatterReduction::kAdd:
      return a + b;
    case ScatterReduction::kMul:
      return a * b;
    case ScatterReduction::kMax:
      return a < b ? b : a;
    case ScatterReduction::kMin:
      return b < a ? b : a;
    case ScatterReduction::kNone:
      break;
  }
  return b;
}

template <typename T>
__global__ void ScatterKernel(ScatterReduction reduction, T* out, const T* updates,
                              const int64_t* dest, const int64_t* start, const int64_t* order,
                              int64_t destinations, int64_t slice) {
  const int64_t total = destinations * slice;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t u = i / slice;
    const int64_t e = i % slice;
    T* target = out + dest[u] + e;
    T value = *target;
    for (int64_t p = start[u]; p < start[u + 1]; ++p) {
      const T update = updates[order[p] * slice + e];
      value = reduction == ScatterReduction::kNone
                  ? update
                  : Num<T>::Store(Combine<T>(reduction, Num<T>::Load(value), Num<T>::Load(update)));
    }
    *target = value;
  }
}

// ---- ScatterND with device indices: sort the tuples by destination, then combine in order ----

// key[t]: tuple t's destination slice (`rows` when out of range: sorted last, ignored); value[t]:
// t.
__global__ void ScatterKeysKernel(const int64_t* indices, int64_t tuples, ScatterDims dims,
                                  int64_t rows, unsigned long long* key, int64_t* value) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t t = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < tuples; t += stride) {
    int64_t row = 0;
    bool inside = true;
    for (int d = 0; d < dims.k; ++d) {
      int64_t v = indices[t * dims.k + d];
      if (v < 0) v += dims.dim[d];
      inside = inside && v >= 0 && v < dims.dim[d];
      row = row * dims.dim[d] + (inside ? v : 0);
    }
    key[t] = static_cast<unsigned long long>(inside ? row : rows);
    value[t] = t;
  }
}

// One thread per (sorted tuple, element of the slice); the first tuple of each destination
// combines that destination's updates in tuple order.
template <typename T>
__global__ void ScatterSortedKernel(ScatterReduction reduction, T* out, const T* updates,
                                    const unsigned long long* key, const int64_t* order,
                                    int64_t tuples, int64_t rows, int64_t slice) {
  const int64_t total = tuples * slice;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t q = i / slice;
    const int64_t e = i % slice;
    const unsigned long long row = key[q];
    if ((q > 0 && key[q - 1] == row) || row >= static_cast<unsigned long long>(rows)) continue;
    T* target = out + static_cast<int64_t>(row) * slice + e;
    T value = *target;
    for (int64_t p = q; p < tuples && key[p] == row; ++p) {
      const T update = updates[order[p] * slice + e];
      value = reduction == ScatterReduction::kNone
                  ? update
                  : Num<T>::Store(Combine<T>(reduction, Num<T>::Load(value), Num<T>::Load(update)));
    }
    *target = value;
  }
}

template <typename T>
struct ScatterSortedLaunch {
  static cudaError_t Run(ScatterReduction reduction, void* out, const void* updates,
                         const unsigned long long* key, const int64_t* order, int64_t tuples,
                         int64_t rows, int64_t slice, cudaStream_t stream) {
    ScatterSortedKernel<T><<<Blocks(tuples * slice), kThreads, 0, stream>>>(
        reduction, static_cast<T*>(out), static_cast<const T*>(updates), key, order, tuples, rows,
        slice);
    return cudaGetLastError();
  }
};

// The scratch: keys and values in and out (tuples each), then cub's temporary storage.
struct ScatterScratch {
  size_t arrays = 0, sort = 0;
  int end_bit = 1;
  cudaError_t query = cudaSuccess;  // of cub's size query
};

size_t Align16(size_t bytes) { return (bytes + 15) / 16 * 16; }

ScatterScratch PlanScatterScratch(int64_t tuples, int64_t rows) {
  ScatterScratch plan;
  plan.arrays = 4 * Align16(static_cast<size_t>(tuples) * 8);
  while (plan.end_bit < 64 && (uint64_t{1} << plan.end_bit) <= static_cast<uint64_t>(rows)) {
    ++plan.end_bit;  // keys go up to `rows` itself
  }
  plan.query = cub::DeviceRadixSort::SortPairs(
      nullptr, plan.sort, static_cast<unsigned long long*>(nullptr),
      static_cast<unsigned long long*>(nullptr), static_cast<int64_t*>(nullptr),
      static_cast<int64_t*>(nullptr), static_cast<int>(tuples), 0, plan.end_bit);
  return plan;
}

// ---- Sum of same-shape inputs ----

struct SumInputs {
  const void* data[kMaxSumInputs];
};

template <typename T>
__global__ void SumKernel(SumInputs inputs, int count, T* y, int64_t n) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    typename Num<T>::type acc = Num<T>::Load(static_cast<const T*>(inputs.data[0])[i]);
    for (int k = 1; k < count; ++k)
      acc = acc + Num<T>::Load(static_cast<const T*>(inputs.data[k])[i]);
    y[i] = Num<T>::Store(acc);
  }
}

template <typename T>
struct ScatterLaunch {
  static cudaError_t Run(ScatterReduction reduction, void* out, const void* updates,
                         const int64_t* dest, const int64_t* start, const int64_t* order,
                         int64_t destinations, int64_t slice, cudaStream_t stream) {
    ScatterKernel<T><<<Blocks(destinations * slice), kThreads, 0, stream>>>(
        reduction, static_cast<T*>(out), static_cast<const T*>(updates), dest, start, order,
        destinations, slice);
    return cudaGetLastError();
  }
};

template <typename T>
struct SumLaunch {
  static cudaError_t Run(SumInputs inputs, int count, void* y, int64_t n, cudaStream_t stream) {
    SumKernel<T><<<Blocks(n), kThreads, 0, stream>>>(inputs, count, static_cast<T*>(y), n);
    return cudaGetLastError();
  }
};

// Launch<T>::Run(args...) for the storage type T of `type`; InvalidValue for other types.
template <template <typename> class Launch, typename... Args>
cudaError_t ByType(ElemType type, Args... args) {
  switch (type) {
    case ElemType::kFloat:
      return Launch<float>::Run(args...);
    case ElemType::kDouble:
      return Launch<double>::Run(args...);
    case ElemType::kFloat16:
      return Launch<F16>::Run(args...);
    case ElemType::kBFloat16:
      return Launch<BF16>::Run(args...);
    case ElemType::kInt32:
      return Launch<int32_t>::Run(args...);
    case ElemType::kInt64:
      return Launch<int64_t>::Run(args...);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t Gather(const void* d_x, void* d_y, const int64_t* d_index, int64_t outer, int64_t dim,
                   int64_t count, size_t row_bytes, cudaStream_t stream) {
  if (outer == 0 || count == 0 || row_bytes == 0) return cudaSuccess;
  return ByWord(row_bytes, d_x, d_y, [&](auto word) {
    return LaunchGather<decltype(word)>(d_x, d_y, d_index, outer, dim, count, row_bytes, stream);
  });
}

cudaError_t GatherDeviceIndex(const void* d_x, void* d_y, const void* d_index, bool index64,
                              int64_t outer, int64_t dim, int64_t count, size_t row_bytes,
                              cudaStream_t stream) {
  if (outer == 0 || count == 0 || row_bytes == 0) return cudaSuccess;
  return ByWord(row_bytes, d_x, d_y, [&](auto word) {
    return LaunchGatherDeviceIndex<decltype(word)>(d_x, d_y, d_index, index64, outer, dim, count,
                                                   row_bytes, stream);
  });
}

size_t ScatterScratchBytes(int64_t tuples, int64_t rows) {
  const ScatterScratch plan = PlanScatterScratch(tuples, rows);
  return plan.arrays + plan.sort;
}

cudaError_t ScatterSlicesDeviceIndex(ElemType type, ScatterReduction reduction, void* d_out,
                                     const void* d_updates, const int64_t* d_indices,
                                     int64_t tuples, const ScatterDims& dims, int64_t rows,
                                     int64_t slice, void* d_scratch, size_t scratch_bytes,
                                     cudaStream_t stream) {
  if (tuples == 0 || slice == 0) return cudaSuccess;
  if (dims.k < 1 || dims.k > kMaxScatterDims || tuples > INT32_MAX) return cudaErrorInvalidValue;
  const ScatterScratch plan = PlanScatterScratch(tuples, rows);
  if (plan.query != cudaSuccess) return plan.query;
  if (scratch_bytes < plan.arrays + plan.sort) return cudaErrorInvalidValue;
  char* base = static_cast<char*>(d_scratch);
  const size_t array = plan.arrays / 4;
  auto* keys_in = reinterpret_cast<unsigned long long*>(base);
  auto* keys_out = reinterpret_cast<unsigned long long*>(base + array);
  auto* order_in = reinterpret_cast<int64_t*>(base + 2 * array);
  auto* order_out = reinterpret_cast<int64_t*>(base + 3 * array);
  ScatterKeysKernel<<<Blocks(tuples), kThreads, 0, stream>>>(d_indices, tuples, dims, rows, keys_in,
                                                             order_in);
  if (cudaError_t error = cudaGetLastError(); error != cudaSuccess) return error;
  size_t sort_bytes = plan.sort;
  if (cudaError_t error = cub::DeviceRadixSort::SortPairs(
          base + plan.arrays, sort_bytes, keys_in, keys_out, order_in, order_out,
          static_cast<int>(tuples), 0, plan.end_bit, stream);
      error != cudaSuccess) {
    return error;
  }
  return ByType<ScatterSortedLaunch>(
      type, reduction, d_out, d_updates, static_cast<const unsigned long long*>(keys_out),
      static_cast<const int64_t*>(order_out), tuples, rows, slice, stream);
}

cudaError_t ScatterSlices(ElemType type, ScatterReduction reduction, void* d_out,
                          const void* d_updates, const int64_t* d_dest, const int64_t* d_start,
                          const int64_t* d_order, int64_t destinations, int64_t slice,
                          cudaStream_t stream) {
  if (destinations == 0 || slice == 0) return cudaSuccess;
  return ByType<ScatterLaunch>(type, reduction, d_out, d_updates, d_dest, d_start, d_order,
                               destinations, slice, stream);
}

cudaError_t SumSameShape(ElemType type, const void* const* inputs, int count, void* d_y, int64_t n,
                         cudaStream_t stream) {
  if (count < 1 || count > kMaxSumInputs) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  SumInputs packed{};
  for (int k = 0; k < count; ++k) packed.data[k] = inputs[k];
  return ByType<SumLaunch>(type, packed, count, d_y, n, stream);
}

}  // namespace ampc::cuda
