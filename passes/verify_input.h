// verify-input: the gate every input model passes before any other pass runs.
#pragma once

#include <onnx/checker.h>

#include "passes/pass.h"

namespace ampc {

// Checks, in order: ir_version and opset versions this ampc (ONNX 1.12) understands, a graph is
// present, every tensor's data fills its dims (NaN/infinite values are warned about), no
// model-local function calls itself, no value is produced twice, no input dangles, no cycle; sorts
// an unsorted acyclic graph (with a warning); then ONNX's checker. Every error is one line naming
// the file and node/value.
// The first check alone: ir_version and the opsets are ones this ampc reads (errors start with
// `file`). `ampc run` and `ampc train`, which do not compile, check this much.
absl::Status CheckVersions(const onnx::ModelProto& model, const std::string& file);

// The graph declares at least one output (as ONNX Runtime requires); errors start with `file`.
absl::Status CheckHasOutputs(const onnx::ModelProto& model, const std::string& file);

// training_info: at most one entry (what ampc trains), its graphs pass ONNX's checker in the
// scope ONNX gives them, and update_binding pairs initializers with algorithm outputs.
// Errors name the graph; the caller adds the file.
absl::Status CheckTrainingInfo(const onnx::ModelProto& model);

// The checker context ONNX's check_model uses for `model` (its IR version and opset imports).
onnx::checker::CheckerContext CheckerFor(const onnx::ModelProto& model);

class VerifyInput : public Pass {
 public:
  absl::string_view Name() const override { return "verify-input"; }
  absl::StatusOr<PassResult> Run(ModelContext& context) override;
};

}  // namespace ampc
