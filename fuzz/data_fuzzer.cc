// The training data readers of `ampc train --data`: IDX images and labels (raw or gzip) and
// .npy / .pb datasets. The first byte picks the reader; the rest is split at the second byte's
// fraction into the images file and the labels file.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_model.h"
#include "runtime/data_readers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || size > ampc::kMaxFuzzInputBytes) return 0;
  const int reader = data[0] % 4;
  const size_t rest = size - 2, split = rest * data[1] / 255;
  const uint8_t* body = data + 2;
  static const char* const kExt[] = {"idx", "idx", "npy", "pb"};
  const std::string images =
      ampc::WriteFuzzFile(std::string("images.") + kExt[reader], body, split);
  const std::string labels =
      ampc::WriteFuzzFile(std::string("labels.") + kExt[reader], body + split, rest - split);
  switch (reader) {
    case 0:
      (void)ampc::ReadIdxImages(images);
      break;
    case 1:
      (void)ampc::ReadIdxDataset(images, labels);
      break;
    case 2:
      if (auto d = ampc::ReadNpyDataset(images, labels); d.ok())
        (void)ampc::CheckLabels(*d, 10, labels);
      break;
    default:
      (void)ampc::ReadPbDataset(images, labels);
  }
  return 0;
}
