// FP32 device arrays to and from float tensors of any float type, for kernels that compute small
// per-channel vectors in FP32 (BatchNormalization's statistics, ConvGrad's bias gradient). The
// conversions are cast.h's: exact widening, one round to nearest even.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/cast.h"
#include "runtime/core/tensor.h"

namespace ampc::cuda {

// dst[i] = src's element i as float, for its src.size() elements.
inline cudaError_t LoadFloats(const Tensor& src, float* dst, cudaStream_t stream) {
  const int64_t n = src.size();
  switch (src.dtype()) {
    case DType::kFloat:
      return cudaMemcpyAsync(dst, src.raw(), n * sizeof(float), cudaMemcpyDeviceToDevice, stream);
    case DType::kFloat16:
      return CastHalfToFloat(src.data<uint16_t>(), dst, n, stream);
    case DType::kBFloat16:
      return CastBFloat16ToFloat(src.data<uint16_t>(), dst, n, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

// dst's dst.size() elements = src[i] rounded to dst's element type.
inline cudaError_t StoreFloats(const float* src, const Tensor& dst, cudaStream_t stream) {
  const int64_t n = dst.size();
  switch (dst.dtype()) {
    case DType::kFloat:
      return cudaMemcpyAsync(dst.raw(), src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream);
    case DType::kFloat16:
      return CastFloatToHalf(src, dst.data<uint16_t>(), n, stream);
    case DType::kBFloat16:
      return CastFloatToBFloat16(src, dst.data<uint16_t>(), n, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace ampc::cuda
