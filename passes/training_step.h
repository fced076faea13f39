// training-step: builds training_info[0] of a `--train` compilation (docs/training-design.md,
// "The compiled file" and "The step"): the initialization of the optimizer and scaler state, the
// algorithm (forward copy, loss check, backward seeded with the loss scale, CheckFinite,
// UpdateScale, UnscaleClip, one optimizer node per parameter, counters) and update_binding.
// `graph` stays the inference graph; the algorithm runs in FP32 for now.
#pragma once

#include <string>
#include <vector>

#include "passes/pass.h"

namespace ampc {

class TrainingStep : public Pass {
 public:
  absl::string_view Name() const override { return "training-step"; }
  // Does nothing unless context.training.enabled.
  absl::StatusOr<bool> Run(ModelContext& context) override;
};

// Builds training_info[0] of `model` (typed by infer-types) for `options`. `low_dtype` (FP16 or
// BF16) picks the default loss scaling. Warnings (one line each) go to `warnings`.
absl::Status AssembleTrainingStep(onnx::ModelProto& model, const TrainingOptions& options,
                                  int low_dtype, std::vector<std::string>& warnings);

}  // namespace ampc
