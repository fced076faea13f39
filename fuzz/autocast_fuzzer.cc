// The default pipeline (`ampc IN -o OUT` minus the save), in one of the four modes the corpus
// checks use: fp16 or bf16, keep-io or --low-io, chosen by the input's size. An output the
// default verify (what changed) accepts must pass the full check too: a disagreement aborts.
#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "compiler/pipeline.h"
#include "fuzz/fuzz_model.h"
#include "passes/autocast_policy.h"
#include "passes/precision_plan.h"
#include "passes/verify.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<onnx::ModelProto> model = ampc::LoadFuzzModel(data, size);
  if (!model) return 0;
  ampc::AutocastOptions options;
  options.low_dtype = size % 2 == 0 ? onnx::TensorProto::FLOAT16 : onnx::TensorProto::BFLOAT16;
  options.policy = ampc::AutocastPolicy::Defaults(options.low_dtype);
  options.low_io = size % 4 >= 2;
  if (!ampc::CompileWithDefaults(*model, "fuzz.onnx", options).ok()) return 0;
  ampc::ModelContext context(*model, "fuzz.onnx");
  const absl::StatusOr<ampc::PassResult> full = ampc::Verify(/*full=*/true).Run(context);
  if (!full.ok()) {
    std::fprintf(stderr, "verify of the changes passed, the full check failed: %s\n",
                 std::string(full.status().message()).c_str());
    std::abort();
  }
  return 0;
}
