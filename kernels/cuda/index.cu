#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/index.h"
#include "kernels/cuda/num.h"

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

bool Fits(size_t word, size_t row_bytes, const void* x, const void* y) {
  return row_bytes % word == 0 && reinterpret_cast<uintptr_t>(x) % word == 0 &&
         reinterpret_cast<uintptr_t>(y) % word == 0;
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
  if (Fits(16, row_bytes, d_x, d_y)) {
    return LaunchGather<uint4>(d_x, d_y, d_index, outer, dim, count, row_bytes, stream);
  }
  if (Fits(8, row_bytes, d_x, d_y)) {
    return LaunchGather<uint64_t>(d_x, d_y, d_index, outer, dim, count, row_bytes, stream);
  }
  if (Fits(4, row_bytes, d_x, d_y)) {
    return LaunchGather<uint32_t>(d_x, d_y, d_index, outer, dim, count, row_bytes, stream);
  }
  if (Fits(2, row_bytes, d_x, d_y)) {
    return LaunchGather<uint16_t>(d_x, d_y, d_index, outer, dim, count, row_bytes, stream);
  }
  return LaunchGather<uint8_t>(d_x, d_y, d_index, outer, dim, count, row_bytes, stream);
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
