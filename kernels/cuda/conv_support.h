// What the cuDNN convolutions in conv_ops.cc need around them: the bias (and FusedConv's Relu)
// applied to the output, and the copy that pads an input explicitly where ONNX pads differ at the
// two ends of an axis (cuDNN pads both ends alike). Plain C++ header: includable without nvcc.
#ifndef AMPC_KERNELS_CUDA_CONV_SUPPORT_H_
#define AMPC_KERNELS_CUDA_CONV_SUPPORT_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/elem_type.h"

namespace ampc::cuda {

// y[n, c, j] = act(y[n, c, j] + bias[c]) in FP32, rounded to `type`; bias may be null (none), act
// is Relu (v < 0 ? 0 : v, so a NaN stays NaN) when `relu`, else the identity. y is [N, C, inner].
cudaError_t AddBiasActivation(ElemType type, void* y, const void* bias, int64_t batch,
                              int64_t channels, int64_t inner, bool relu, cudaStream_t stream);

// Up to 3 spatial dims (fewer as leading dims of size 1) of `planes` planes (N * C).
struct ShiftDims {
  int64_t d[3] = {1, 1, 1};
};

// dst[p, i] = src[p, i - shift] where that lies inside src, else 0, for every element of dst:
// with a positive shift and a larger dst, src padded; with a negative shift, dst cropped from src.
cudaError_t ShiftCopy(ElemType type, const void* src, const ShiftDims& src_dims, void* dst,
                      const ShiftDims& dst_dims, const ShiftDims& shift, int64_t planes,
                      cudaStream_t stream);

}  // namespace ampc::cuda

#endif  // AMPC_KERNELS_CUDA_CONV_SUPPORT_H_
