// Every pass by name, and the default pipeline. The caller names the order.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "passes/pass.h"

namespace ampc {

// NotFound naming the pass and listing the known ones.
absl::StatusOr<std::unique_ptr<Pass>> CreatePass(absl::string_view name);
std::vector<std::string> PassNames();
// What `ampc IN -o OUT` runs when --passes is not given.
std::vector<std::string> DefaultPipeline();

// Runs the default pipeline on `model` with `options` (what `ampc --dtype ... [--low-io]` does,
// minus loading and saving); `file` names the model in errors.
absl::Status CompileWithDefaults(onnx::ModelProto& model, const std::string& file,
                                 const AutocastOptions& options);

}  // namespace ampc
