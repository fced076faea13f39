#include <cstdint>

#include "kernels/cuda/conv_support.h"
#include "kernels/cuda/float_storage.cuh"

namespace ampc::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void BiasActivationKernel(T* y, const T* bias, int64_t channels, int64_t inner,
                                     int64_t total, bool relu) {
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; e < total; e += step) {
    float v = LoadFloat(y, e);
    if (bias != nullptr) v += LoadFloat(bias, (e / inner) % channels);
    if (relu) v = v < 0.0f ? 0.0f : v;
    StoreFloat(y, e, v);
  }
}

template <typename T>
__global__ void ShiftCopyKernel(const T* src, ShiftDims src_dims, T* dst, ShiftDims dst_dims,
                                ShiftDims shift, int64_t total) {
  const int64_t dst_plane = dst_dims.d[0] * dst_dims.d[1] * dst_dims.d[2];
  const int64_t src_plane = src_dims.d[0] * src_dims.d[1] * src_dims.d[2];
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; e < total; e += step) {
    const int64_t plane = e / dst_plane;
    int64_t rest = e % dst_plane;
    int64_t coord[3];
    for (int d = 2; d >= 0; --d) {
      coord[d] = rest % dst_dims.d[d] - shift.d[d];
      rest /= dst_dims.d[d];
    }
    bool inside = true;
    int64_t offset = 0;
    for (int d = 0; d < 3; ++d) {
      inside = inside && coord[d] >= 0 && coord[d] < src_dims.d[d];
      offset = offset * src_dims.d[d] + coord[d];
    }
    dst[e] = inside ? src[plane * src_plane + offset] : FloatStorage<T>::Store(0.0f);
  }
}

}  // namespace

cudaError_t AddBiasActivation(ElemType type, void* y, const void* bias, int64_t batch,
                              int64_t channels, int64_t inner, bool relu, cudaStream_t stream) {
  const int64_t total = batch * channels * inner;
  if (total == 0 || (bias == nullptr && !relu)) return cudaSuccess;
  return DispatchFloatStorage(type, [&](auto tag) {
    using T = decltype(tag);
    BiasActivationKernel<T><<<GridFor(total, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(y), static_cast<const T*>(bias), channels, inner, total, relu);
    return cudaGetLastError();
  });
}

cudaError_t ShiftCopy(ElemType type, const void* src, const ShiftDims& src_dims, void* dst,
                      const ShiftDims& dst_dims, const ShiftDims& shift, int64_t planes,
                      cudaStream_t stream) {
  const int64_t total = planes * dst_dims.d[0] * dst_dims.d[1] * dst_dims.d[2];
  if (total == 0) return cudaSuccess;
  return DispatchFloatStorage(type, [&](auto tag) {
    using T = decltype(tag);
    ShiftCopyKernel<T><<<GridFor(total, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(src), src_dims, static_cast<T*>(dst), dst_dims, shift, total);
    return cudaGetLastError();
  });
}

}  // namespace ampc::cuda
