// training-step: builds training_info[0] of a `--train` compilation (docs/training-design.md,
// "The compiled file" and "The step"): the initialization of the optimizer and scaler state, the
// algorithm (forward copy, loss check, backward seeded with the loss scale, CheckFinite,
// UpdateScale, UnscaleClip, one optimizer node per parameter, counters) and update_binding.
// `graph` stays the inference graph. This file assembles the step from its parts: loss_check.h,
// gradients.h, training_state.h, optimizer.h and loss_scaling.h.
#pragma once

#include <string>
#include <vector>

#include "passes/pass.h"
#include "passes/training/training_options.h"

namespace ampc {

class TrainingStep : public Pass {
 public:
  // `options`: --train and its flags (nothing is built unless `options.enabled`); `low_dtype`:
  // autocast's low dtype (FLOAT with --dtype=fp32).
  TrainingStep(TrainingOptions options, int low_dtype)
      : options_(std::move(options)), low_dtype_(low_dtype) {}
  absl::string_view Name() const override { return "training-step"; }
  // The loss is context.loss when loss-op set it, else options.loss.
  absl::StatusOr<PassResult> Run(ModelContext& context) override;

 private:
  const TrainingOptions options_;
  const int low_dtype_;
};

// Builds training_info[0] of `model` (typed by infer-types) for `options`. `low_dtype` (FP16 or
// BF16) picks the default loss scaling. Warnings (one line each) go to `warnings`.
absl::Status AssembleTrainingStep(onnx::ModelProto& model, const TrainingOptions& options,
                                  int low_dtype, std::vector<std::string>& warnings);

}  // namespace ampc
