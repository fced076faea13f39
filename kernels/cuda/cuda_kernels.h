// The CUDA backend's kernels: one Register* function per family (kernels/cuda/<family>_ops.cc),
// all called by RegisterCudaKernels. The launchers they call are in the .cu files beside them.
#pragma once

#include "runtime/kernel_registry.h"

namespace ampc {

void RegisterCudaKernels(KernelRegistry& registry);

void RegisterCudaLinalgKernels(KernelRegistry& registry);  // Gemm, MatMul (cuBLASLt)
void RegisterCudaScalerKernels(KernelRegistry& registry);  // ai.ampc loss scaling, optimizers

}  // namespace ampc
