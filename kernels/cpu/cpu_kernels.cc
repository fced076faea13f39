#include "kernels/cpu/cpu_kernels.h"

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
    return r;
  }();
  return *registry;
}

}  // namespace ampc
