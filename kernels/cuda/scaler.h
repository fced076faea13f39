// The loss-scaling stage and the optimizers on the GPU, as multi-tensor kernels: each launch
// walks a table of tensors in fixed-size chunks, one chunk per thread block (as apex's and
// PyTorch's multi_tensor_apply). Every flag, scale, learning rate and step is read from device
// memory, so a step never waits for the host. The per-element arithmetic is
// kernels/numerics/scaler_math.h's, as in the CPU kernels (kernels/cpu/scaler_kernels.cc).
//
// Pointers are device pointers; every launch is asynchronous on `stream`; the result is the first
// launch error (cudaErrorInvalidValue for malformed arguments, before anything is launched).
// Plain C++ header: includable without nvcc.
#ifndef AMPC_KERNELS_CUDA_SCALER_H_
#define AMPC_KERNELS_CUDA_SCALER_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cuda/elem_type.h"
#include "kernels/numerics/scaler_math.h"

namespace ampc::cuda {

namespace math = ::ampc::scaler_math;  // the formulas the kernels apply

// `count` elements of `type` (FP32, FP16, BF16 or FP64) at `data`.
struct GradientRef {
  const void* data;
  int64_t count;
  ElemType type;
};

// Device scratch that CheckUnscaleClip needs for `grads`: one partial result per chunk.
size_t UnscaleScratchBytes(const std::vector<GradientRef>& grads);

// One pass over all gradients (one launch per table of up to a few dozen tensors, then one
// finalize launch), with u = float(g) * float(1 / double(*d_scale)) (1 when d_scale is null):
//  - d_found (nullable): whether any gradient element is inf or NaN, in its own type (CheckFinite);
//  - outs (empty, or one FP32 buffer per gradient): the unscaled gradients u (UnscaleClip);
//  - d_norm (nullable): sqrt of the sum of u^2, summed in double in a fixed order (per-chunk
//    partials, then one block over the partials: deterministic, no atomics), rounded to float;
//  - max_norm > 0: then every u is multiplied by min(1, max_norm / (norm + 1e-6)) (one more
//    launch; clip_grad_norm_ multiplies even by a coefficient of 1).
// `d_scratch` holds at least UnscaleScratchBytes(grads) bytes, 16-byte aligned; the launches use
// it until they finish.
cudaError_t CheckUnscaleClip(const std::vector<GradientRef>& grads, const std::vector<float*>& outs,
                             const float* d_scale, float max_norm, bool* d_found, float* d_norm,
                             void* d_scratch, size_t scratch_bytes, cudaStream_t stream);

// UpdateScale in one thread: the state (scale, growth tracker, hysteresis left) after a step
// whose gradients were non-finite (*d_found) or whose forward loss was (*d_loss_bad, nullable).
// The outputs may be the inputs.
cudaError_t UpdateScale(const float* d_scale, const int64_t* d_tracker,
                        const int64_t* d_hysteresis_left, const bool* d_found,
                        const bool* d_loss_bad, const math::ScaleAttrs& attrs, float* d_scale_out,
                        int64_t* d_tracker_out, int64_t* d_hysteresis_left_out,
                        cudaStream_t stream);

// The runtime's LearningRate in one thread: *d_rate_out = DecodedLearningRate(d_words, *d_step)
// (kernels/numerics/lr_schedule.h; d_words holds kRateWords doubles).
cudaError_t LearningRate(const double* d_words, const int64_t* d_step, float* d_rate_out,
                         cudaStream_t stream);

// One parameter of a fused SGD step. `buf`/`buf_out` are present exactly when momentum != 0.
// Outputs may be the inputs (an in-place update).
struct SgdTensor {
  const float* param;
  const void* grad;
  ElemType grad_type;  // FP32, FP16 or BF16 (widened exactly)
  const float* buf;
  float* param_out;
  float* buf_out;
  int64_t count;
};

// torch.optim.SGD on every tensor with the learning rate *d_lr. When *d_skip, the outputs get
// the inputs' bits (nothing is written when they are the same buffers). *d_first: the momentum
// buffer starts as the gradient (torch's buf is None).
cudaError_t MultiTensorSgd(const std::vector<SgdTensor>& tensors, const math::SgdAttrs& attrs,
                           const bool* d_skip, const float* d_lr, const bool* d_first,
                           cudaStream_t stream);

// One parameter of a fused Adam/AdamW step. Outputs may be the inputs.
struct AdamTensor {
  const float* param;
  const void* grad;
  ElemType grad_type;  // FP32, FP16 or BF16 (widened exactly)
  const float* m;
  const float* v;
  float* param_out;
  float* m_out;
  float* v_out;
  int64_t count;
};

// torch.optim.Adam(W) at step *d_step (counted from 1) with learning rate *d_lr. When *d_skip,
// or when *d_step < 1 (the CPU kernel's error, which the device cannot raise), the outputs get
// the inputs' bits.
cudaError_t MultiTensorAdam(const std::vector<AdamTensor>& tensors, const math::AdamAttrs& attrs,
                            const bool* d_skip, const float* d_lr, const int64_t* d_step,
                            cudaStream_t stream);

}  // namespace ampc::cuda

#endif  // AMPC_KERNELS_CUDA_SCALER_H_
