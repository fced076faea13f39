// The CUDA backend's kernels: one Register* function per family (kernels/cuda/<family>_ops.cc),
// all called by RegisterCudaKernels. The launchers they call are in the .cu files beside them.
#pragma once

#include "runtime/kernel_registry.h"

namespace ampc {

void RegisterCudaKernels(KernelRegistry& registry);

// Conv, FusedConv, ConvGrad, pooling, BatchNormalization and their gradients (conv_ops.cc).
void RegisterCudaConvKernels(KernelRegistry& registry);

}  // namespace ampc
