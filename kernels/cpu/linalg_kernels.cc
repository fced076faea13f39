#include "kernels/cpu/cpu_kernels.h"

namespace ampc {

void RegisterLinalgKernels(KernelRegistry& registry) {}

}  // namespace ampc
