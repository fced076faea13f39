// The .npy and .pb readers of `ampc run --input`: the first byte picks the reader, the rest is
// the file.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_model.h"
#include "runtime/core/tensor_proto.h"
#include "runtime/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > ampc::kMaxFuzzInputBytes) return 0;
  const bool npy = data[0] % 2 == 0;
  const std::string path = ampc::WriteFuzzFile(npy ? "input.npy" : "input.pb", data + 1, size - 1);
  if (npy) {
    (void)ampc::ReadNpy(path);
  } else {
    (void)ampc::ReadTensorProtoFile(path);
  }
  return 0;
}
