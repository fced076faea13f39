// DefaultRegistry (declared in kernels/cpu/cpu_kernels.h): every backend built into this binary.
// A library of its own so that the CUDA kernels may use the CPU family's host-side helpers.
#include "kernels/cpu/cpu_kernels.h"
#include "passes/opset/standard_op_versions.h"
#include "passes/opset/training_ops.h"

#ifdef AMPC_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace ampc {

const KernelRegistry& DefaultRegistry() {
  static const KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    RegisterCpuKernels(*r);
#ifdef AMPC_HAVE_CUDA
    RegisterCudaKernels(*r);
#endif
    for (const std::string& op : AmpcVersionOps()) r->Alias(kAmpcDomain, "", op);
    return r;
  }();
  return *registry;
}

}  // namespace ampc
