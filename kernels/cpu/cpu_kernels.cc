#include "kernels/cpu/cpu_kernels.h"

#ifdef AMPC_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace ampc {

void RegisterCpuKernels(KernelRegistry& registry) {
  RegisterElementwiseKernels(registry);
  RegisterLinalgKernels(registry);
  RegisterReduceKernels(registry);
  RegisterNormKernels(registry);
  RegisterTensorKernels(registry);
  RegisterMathKernels(registry);
  RegisterControlFlowKernels(registry);
  RegisterScalerKernels(registry);
  RegisterGradKernels(registry);
}

const KernelRegistry& DefaultRegistry() {
  static const KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    RegisterCpuKernels(*r);
#ifdef AMPC_HAVE_CUDA
    RegisterCudaKernels(*r);
#endif
    return r;
  }();
  return *registry;
}

}  // namespace ampc
