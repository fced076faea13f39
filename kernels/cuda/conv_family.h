// The CNN family's kernels for the CUDA backend, registered together by RegisterCudaConvKernels
// (cuda_kernels.h, defined in conv_ops.cc): convolutions there, pooling in pool_ops.cc,
// BatchNormalization in batch_norm_ops.cc.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/norm_common.h"  // WantsOutput, the CPU family's checks
#include "kernels/cuda/op_support.h"  // Labeled
#include "runtime/core/dtype.h"
#include "runtime/core/kernel.h"
#include "runtime/core/kernel_registry.h"

namespace ampc::cuda {

// The element types the family's CUDA kernels take (no FP64: the GPU path is for speed).
inline std::vector<DType> CnnFloatTypes() {
  return {DType::kFloat, DType::kFloat16, DType::kBFloat16};
}

void RegisterCudaPoolKernels(KernelRegistry& registry);
void RegisterCudaBatchNormKernels(KernelRegistry& registry);

}  // namespace ampc::cuda
