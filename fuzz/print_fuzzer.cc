// The text printer on a loaded, unverified model, as `ampc print` runs it.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "compiler/printer.h"
#include "fuzz/fuzz_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<onnx::ModelProto> model = ampc::LoadFuzzModel(data, size);
  if (!model) return 0;
  const std::string text = ampc::PrintModel(*model);
  (void)text;
  return 0;
}
