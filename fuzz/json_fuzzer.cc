// The JSON files a compile reads: --policy and --train-config. The first byte picks which.
#include <cstddef>
#include <cstdint>

#include "compiler/policy_file.h"
#include "compiler/train_config.h"
#include "fuzz/fuzz_model.h"
#include "passes/autocast_policy.h"
#include "passes/training/training_options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > ampc::kMaxFuzzInputBytes) return 0;
  const std::string path = ampc::WriteFuzzFile("settings.json", data + 1, size - 1);
  if (data[0] % 2 == 0) {
    ampc::AutocastPolicy policy = ampc::AutocastPolicy::Defaults(onnx::TensorProto::FLOAT16);
    (void)ampc::ApplyPolicyFile(path, policy);
  } else {
    ampc::TrainingOptions options;
    (void)ampc::ApplyTrainConfig(path, options);
  }
  return 0;
}
