#include "kernels/cpu/cpu_kernels.h"

namespace ampc {

void RegisterReduceKernels(KernelRegistry& registry) {}

}  // namespace ampc
