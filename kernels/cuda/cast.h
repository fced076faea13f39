// Elementwise casts on the GPU. Float <-> FP16/BF16 round to nearest even (the hardware cvt): on
// every non-NaN value they equal the CPU conversions in kernels/numerics/half.h bit for bit; a NaN
// becomes the hardware's canonical NaN. cuda::Cast converts between any two element types with
// the CPU's Cast rules (kernels/numerics/cast_math.h). Plain C++ header: includable without nvcc.
#ifndef AMPC_KERNELS_CUDA_CAST_H_
#define AMPC_KERNELS_CUDA_CAST_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/elem_type.h"

namespace ampc {

// Pointers are device pointers to `n` elements, any element alignment; 16-byte aligned buffers
// take the vector path. The launch is asynchronous on `stream`; the result is the launch error.
cudaError_t CastFloatToHalf(const float* d_in, uint16_t* d_out, int64_t n, cudaStream_t stream);
cudaError_t CastHalfToFloat(const uint16_t* d_in, float* d_out, int64_t n, cudaStream_t stream);
cudaError_t CastFloatToBFloat16(const float* d_in, uint16_t* d_out, int64_t n, cudaStream_t stream);
cudaError_t CastBFloat16ToFloat(const uint16_t* d_in, float* d_out, int64_t n, cudaStream_t stream);

namespace cuda {

// out[i] = in[i] converted from `from` to `to`, bit for bit the CPU's ConvertElement except that
// float -> FP16/BF16 and back use the functions above (NaNs canonical): wider sources round to
// odd before narrowing to 16 bits, floats truncate to integers (NaN 0, saturating beyond 64
// bits), integers narrow modulo 2^bits. The same type is a device copy. The result is the launch
// error, or cudaErrorNotSupported for a type outside ElemType.
cudaError_t Cast(ElemType from, ElemType to, const void* d_in, void* d_out, int64_t n,
                 cudaStream_t stream);

}  // namespace cuda

}  // namespace ampc

#endif  // AMPC_KERNELS_CUDA_CAST_H_
