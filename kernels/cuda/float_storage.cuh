// Device-side access to the float storage types (float, FP16, BF16) for the CNN family's kernels
// (pool.cu, norm.cu, conv_support.cu): loads widen to float exactly, stores round to nearest even
// once, as kernels/cpu/half.h does on the host. Include from .cu files only.
#ifndef AMPC_KERNELS_CUDA_FLOAT_STORAGE_CUH_
#define AMPC_KERNELS_CUDA_FLOAT_STORAGE_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/elem_type.h"

namespace ampc::cuda {

template <typename T>
struct FloatStorage;

template <>
struct FloatStorage<float> {
  __device__ static float Load(float v) { return v; }
  __device__ static float Store(float v) { return v; }
};

template <>
struct FloatStorage<__half> {
  __device__ static float Load(__half v) { return __half2float(v); }
  __device__ static __half Store(float v) { return __float2half_rn(v); }
};

template <>
struct FloatStorage<__nv_bfloat16> {
  __device__ static float Load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 Store(float v) { return __float2bfloat16_rn(v); }
};

template <typename T>
__device__ inline float LoadFloat(const T* p, int64_t i) {
  return FloatStorage<T>::Load(p[i]);
}

template <typename T>
__device__ inline void StoreFloat(T* p, int64_t i, float v) {
  p[i] = FloatStorage<T>::Store(v);
}

// Calls fn(T{}) with T the storage type of `type` (float, __half or __nv_bfloat16) and returns
// its result; cudaErrorInvalidValue for any other element type.
template <typename Fn>
cudaError_t DispatchFloatStorage(ElemType type, Fn&& fn) {
  switch (type) {
    case ElemType::kFloat:
      return fn(float{});
    case ElemType::kFloat16:
      return fn(__half{});
    case ElemType::kBFloat16:
      return fn(__nv_bfloat16{});
    default:
      return cudaErrorInvalidValue;
  }
}

// Blocks of `threads` for `n` items, capped (the kernels loop over the rest with a grid stride).
inline unsigned int GridFor(int64_t n, int threads, int64_t max_blocks = 65535) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned int>(blocks < 1 ? 1 : (blocks > max_blocks ? max_blocks : blocks));
}

}  // namespace ampc::cuda

#endif  // AMPC_KERNELS_CUDA_FLOAT_STORAGE_CUH_
