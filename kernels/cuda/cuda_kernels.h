// The CUDA backend's kernels: one Register* function per family (kernels/cuda/<family>_ops.cc),
// all called by RegisterCudaKernels. The launchers they call are in the .cu files beside them.
#pragma once

#include "runtime/kernel_registry.h"

namespace ampc {

void RegisterCudaKernels(KernelRegistry& registry);

}  // namespace ampc
