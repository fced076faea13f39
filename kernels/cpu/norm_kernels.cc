#include "kernels/cpu/cpu_kernels.h"

namespace ampc {

void RegisterNormKernels(KernelRegistry& registry) {}

}  // namespace ampc
