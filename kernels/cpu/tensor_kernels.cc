#include "kernels/cpu/cpu_kernels.h"

namespace ampc {

void RegisterTensorKernels(KernelRegistry& registry) {}

}  // namespace ampc
