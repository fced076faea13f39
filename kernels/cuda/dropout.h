// Dropout on the GPU (ai.ampc.Dropout, kernels/cuda/dropout_ops.cc): the masks of
// kernels/cpu/philox.h, so the CPU and CUDA kernels draw the same bits. Every scalar (ratio,
// training_mode, call) is read on the device. Plain C++ header: includable without nvcc.
#ifndef AMPC_KERNELS_CUDA_DROPOUT_H_
#define AMPC_KERNELS_CUDA_DROPOUT_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/elem_type.h"

namespace ampc::cuda {

// y (and mask, nullable) from `count` elements of x, both of `type` (FP32, FP16 or BF16):
// *d_ratio (nullable: 0.5) of `ratio_type` (FP32, FP16 or BF16), *d_training (nullable: false)
// and *d_call (int64) as ai.ampc.Dropout's inputs. Not training, or ratio 0: y = x, mask all
// true. Else element i is kept when DropoutKeeps(seed, call, i, ratio), y = x * (1 / (1 - ratio))
// computed in float and rounded once, 0 where dropped.
cudaError_t Dropout(const void* d_x, ElemType type, int64_t count, const void* d_ratio,
                    ElemType ratio_type, const bool* d_training, const int64_t* d_call,
                    uint64_t seed, void* d_y, bool* d_mask, cudaStream_t stream);

}  // namespace ampc::cuda

#endif  // AMPC_KERNELS_CUDA_DROPOUT_H_
