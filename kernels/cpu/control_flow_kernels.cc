#include "kernels/cpu/cpu_kernels.h"

namespace ampc {

void RegisterControlFlowKernels(KernelRegistry& registry) {}

}  // namespace ampc
