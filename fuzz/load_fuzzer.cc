// Model loading and verify-input: what every command runs first on a file from a stranger.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "fuzz/fuzz_model.h"
#include "passes/pass.h"
#include "passes/verify_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<onnx::ModelProto> model = ampc::LoadFuzzModel(data, size);
  if (!model) return 0;
  ampc::ModelContext context(*model, "fuzz.onnx");
  ampc::VerifyInput verify;
  (void)verify.Run(context);
  return 0;
}
