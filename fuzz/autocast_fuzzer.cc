// The default pipeline (`ampc IN -o OUT` minus the save), in one of the four modes the corpus
// checks use: fp16 or bf16, keep-io or --low-io, chosen by the input's size.
#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <optional>

#include "compiler/pipeline.h"
#include "fuzz/fuzz_model.h"
#include "passes/autocast_policy.h"
#include "passes/precision_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<onnx::ModelProto> model = ampc::LoadFuzzModel(data, size);
  if (!model) return 0;
  ampc::AutocastOptions options;
  options.low_dtype = size % 2 == 0 ? onnx::TensorProto::FLOAT16 : onnx::TensorProto::BFLOAT16;
  options.policy = ampc::AutocastPolicy::Defaults(options.low_dtype);
  options.low_io = size % 4 >= 2;
  (void)ampc::CompileWithDefaults(*model, "fuzz.onnx", options);
  return 0;
}
