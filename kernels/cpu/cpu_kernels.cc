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
  RegisterResampleKernels(registry);
  RegisterRecurrentKernels(registry);
  RegisterBitwiseKernels(registry);
  RegisterSelectionKernels(registry);
  RegisterAttentionKernels(registry);
  RegisterLrnKernels(registry);
  RegisterUnpoolKernels(registry);
  RegisterDropoutKernels(registry);
}

}  // namespace ampc
