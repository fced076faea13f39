// BatchNormalization on the GPU (inference and training form) and its gradient, plus the
// per-channel sums they share with ConvGrad's bias gradient. Tensors are [N, C, inner] (inner:
// the product of the spatial dims); statistics and parameters are FP32 device arrays (the ops
// widen whatever float type a model gives them). Sums over N * inner accumulate in FP32 in two
// stages with a split that depends only on the shape, so results are deterministic; the CPU sums
// sequentially, so they agree to rounding, not bit for bit. Plain C++ header.
#ifndef AMPC_KERNELS_CUDA_NORM_H_
#define AMPC_KERNELS_CUDA_NORM_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/elem_type.h"

namespace ampc::cuda {

struct ChannelLayout {
  int64_t batch = 0;
  int64_t channels = 0;
  int64_t inner = 1;
};

// What ChannelSums adds up for element (n, c, j), with v = x[n, c, j]:
//   kValue:          a = v
//   kCenteredSquare: a = (v - center[c])^2
//   kGradTerms:      a = dy * (v - center[c]) * inv_std[c] (dy times x-hat), b = dy
enum class ChannelTerm { kValue, kCenteredSquare, kGradTerms };

// FP32 elements of workspace ChannelSums needs for this layout.
int64_t ChannelSumsWorkspace(const ChannelLayout& layout);

// sum_a[c] = (sum over n and j of a) / divisor, and sum_b likewise (kGradTerms only; else
// unused, may be null). `type` is the element type of x and dy; center and inv_std are [C] FP32
// (unused by kValue). workspace: ChannelSumsWorkspace(layout) floats.
cudaError_t ChannelSums(ElemType type, ChannelTerm term, const void* x, const void* dy,
                        const float* center, const float* inv_std, const ChannelLayout& layout,
                        float divisor, float* sum_a, float* sum_b, float* workspace,
                        cudaStream_t stream);

// inv_std[p] = 1 / sqrt(var[p] + epsilon), for p in [0, n).
cudaError_t InverseStd(const float* var, float epsilon, float* inv_std, int64_t n,
                       cudaStream_t stream);

// out[p] = running[p] * momentum + batch[p] * (1 - momentum), for p in [0, n).
cudaError_t MomentumUpdate(const float* running, const float* batch, float momentum, float* out,
                           int64_t n, cudaStream_t stream);

// y = (x - mean[p]) * inv_std[p] * scale[p] + bias[p], in FP32, rounded once to `type`; p is the
// channel, or with `per_element` (BatchNormalization before opset 9, spatial = 0) c * inner + j.
cudaError_t BatchNormApply(ElemType type, const void* x, void* y, const ChannelLayout& layout,
                           bool per_element, const float* mean, const float* inv_std,
                           const float* scale, const float* bias, cudaStream_t stream);

// BatchNormalizationGrad's dx with x-hat = (x - mean[c]) * inv_std[c], given the per-channel sums
// dscale[c] = sum(dy * x-hat) and dbias[c] = sum(dy) over n and j:
// dx = scale[c] * inv_std[c] * (dy - dbias[c] / count - x-hat * dscale[c] / count).
cudaError_t BatchNormGradInput(ElemType type, const void* dy, const void* x, void* dx,
                               const ChannelLayout& layout, const float* scale, const float* mean,
                               const float* inv_std, const float* dscale, const float* dbias,
                               cudaStream_t stream);

}  // namespace ampc::cuda

#endif  // AMPC_KERNELS_CUDA_NORM_H_
