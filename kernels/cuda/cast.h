// Elementwise float <-> FP16/BF16 casts on the GPU, round to nearest even (the hardware cvt).
// On every non-NaN value they equal the CPU conversions in kernels/cpu/half.h bit for bit; a NaN
// becomes the hardware's canonical NaN. Plain C++ header: includable without nvcc.
#ifndef AMPC_KERNELS_CUDA_CAST_H_
#define AMPC_KERNELS_CUDA_CAST_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ampc {

// Pointers are device pointers to `n` elements, any element alignment; 16-byte aligned buffers
// take the vector path. The launch is asynchronous on `stream`; the result is the launch error.
cudaError_t CastFloatToHalf(const float* d_in, uint16_t* d_out, int64_t n, cudaStream_t stream);
cudaError_t CastHalfToFloat(const uint16_t* d_in, float* d_out, int64_t n, cudaStream_t stream);
cudaError_t CastFloatToBFloat16(const float* d_in, uint16_t* d_out, int64_t n, cudaStream_t stream);
cudaError_t CastBFloat16ToFloat(const uint16_t* d_in, float* d_out, int64_t n, cudaStream_t stream);

}  // namespace ampc

#endif  // AMPC_KERNELS_CUDA_CAST_H_
