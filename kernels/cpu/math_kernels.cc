#include "kernels/cpu/cpu_kernels.h"

namespace ampc {

void RegisterMathKernels(KernelRegistry& registry) {}

}  // namespace ampc
