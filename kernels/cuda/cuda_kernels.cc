#include "kernels/cuda/cuda_kernels.h"

namespace ampc {

// Views and shape queries (Reshape, Shape, ...) are registered for "cuda" by the tensor family
// in kernels/cpu: they touch no element data.
void RegisterCudaKernels(KernelRegistry& registry) {
  RegisterCudaLinalgKernels(registry);
  RegisterCudaScalerKernels(registry);
  RegisterCudaReduceKernels(registry);
  RegisterCudaElementwiseKernels(registry);
  RegisterCudaCopyKernels(registry);
  RegisterCudaConvKernels(registry);
  RegisterCudaIndexKernels(registry);
  RegisterCudaDropoutKernels(registry);
}

}  // namespace ampc
