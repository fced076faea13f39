// External-data resolution: a model and the data file `w.bin` beside it. The first two bytes
// give the model's share of the rest (little-endian); the remainder is w.bin.
#include <cstddef>
#include <cstdint>

#include "compiler/model_io.h"
#include "fuzz/fuzz_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || size > ampc::kMaxFuzzInputBytes) return 0;
  const size_t model_size = std::min<size_t>(size - 2, data[0] | size_t{data[1]} << 8);
  ampc::WriteFuzzFile("w.bin", data + 2 + model_size, size - 2 - model_size);
  const std::string path = ampc::WriteFuzzFile("model.onnx", data + 2, model_size);
  (void)ampc::LoadModel(path);
  return 0;
}
