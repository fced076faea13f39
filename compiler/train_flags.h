// The flags of `ampc MODEL -o OUT --train` (spec/training.md, "Compiling a training graph") as
// TrainingOptions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/training_options.h"

namespace ampc {

// Errors are UsageError()s naming the flag. `enabled` is false without --train; the other
// training flags are then an error, so that a forgotten --train does not go unnoticed.
absl::StatusOr<TrainingOptions> TrainingOptionsFromFlags();

// With --train, `passes` with training-step after infer-types (both added after verify-input
// when infer-types is missing: the step needs the forward's types), and with --loss-op the
// loss-op pass just before it (or training-step after a listed loss-op); a list that names
// training-step is kept as it is, as are `passes` without --train.
std::vector<std::string> WithTrainingStep(std::vector<std::string> passes);

}  // namespace ampc
