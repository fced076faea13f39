// The runtime's Session creation, as `ampc run` reaches it: load, the tensor checks, then shape
// inference and a kernel for every node. Running is left out: a legal model may ask for any
// amount of memory or time (ConstantOfShape, Loop), which is not a bug.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/fuzz_model.h"
#include "kernels/cpu/cpu_kernels.h"
#include "passes/verify_tensors.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/session.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<onnx::ModelProto> model = ampc::LoadFuzzModel(data, size);
  if (!model) return 0;
  std::vector<std::string> warnings;
  if (!ampc::VerifyTensors(*model, warnings).ok()) return 0;
  static ampc::CpuBackend* backend = new ampc::CpuBackend(1);
  (void)ampc::Session::Create(std::move(*model), ampc::DefaultRegistry(), *backend);
  return 0;
}
