// Device-side access to the float storage types (float, FP16, BF16; double for the reduce family)
// for the CNN and reduce families' kernels: loads widen to float exactly, stores round to nearest
// even once, as kernels/numerics/half.h does on the host. Include from .cu files only.
#ifndef AMPC_KERNELS_CUDA_FLOAT_STORAGE_CUH_
#define AMPC_KERNELS_CUDA_FLOAT_STORAGE_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/elem_type.h"

namespace ampc::cuda {

// FloatStorage<T>: C is the type storage type T computes in; Load widens exactly, Store rounds
// once (the hardware's round to nearest even for FP16/BF16, a plain conversion otherwise).
template <typename T>
struct FloatStorage {
  using C = T;
  __device__ static T Load(T v) { return v; }
  template <typename V>
  __device__ static T Store(V v) {
    return static_cast<T>(v);
  }
};

template <>
struct FloatStorage<__half> {
  using C = float;
  __device__ static float Load(__half v) { return __half2float(v); }
  template <typename V>
  __device__ static __half Store(V v) {
    return __float2half_rn(static_cast<float>(v));
  }
};

template <>
struct FloatStorage<__nv_bfloat16> {
  using C = float;
  __device__ static float Load(__nv_bfloat16 v) { return __bfloat162float(v); }
  template <typename V>
  __device__ static __nv_bfloat16 Store(V v) {
    return __float2bfloat16_rn(static_cast<float>(v));
  }
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
