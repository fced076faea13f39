// Runs named passes on a model with --train options, in memory, for tests of the training passes.
#pragma once

#include <onnx/onnx_pb.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/autocast_policy.h"
#include "passes/registry.h"

namespace ampc::testing {

// Runs `passes` in order with `training` (enabled set here), autocasting to `low_dtype` where
// the passes include autocast (none given: the default options); returns the messages of the
// warnings they reported.
inline absl::StatusOr<std::vector<std::string>> CompileForTraining(
    onnx::ModelProto& model, const std::vector<std::string>& passes, TrainingOptions training,
    int low_dtype = onnx::TensorProto::UNDEFINED) {
  PassOptions options;
  if (low_dtype != onnx::TensorProto::UNDEFINED) {
    options.autocast.low_dtype = low_dtype;
    options.autocast.policy = AutocastPolicy::Defaults(low_dtype);
  }
  training.enabled = true;
  options.training = std::move(training);
  ModelContext context(model, "model");
  for (const std::string& name : passes) {
    absl::StatusOr<std::unique_ptr<Pass>> pass = CreatePass(name, options);
    if (!pass.ok()) return pass.status();
    absl::StatusOr<PassResult> changed = RunPass(**pass, context);
    if (!changed.ok()) return changed.status();
  }
  std::vector<std::string> warnings;
  for (const Diagnostic& diagnostic : context.diagnostics) warnings.push_back(diagnostic.message);
  return warnings;
}

}  // namespace ampc::testing
