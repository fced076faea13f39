// The flags of `ampc MODEL -o OUT --train` (docs/training.md, "What `--train` builds") as
// TrainingOptions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/training/training_options.h"

namespace ampc {

// Errors are UsageError()s naming the flag. `enabled` is false without --train; the other
// training flags are then an error, so that a forgotten --train does not go unnoticed.
absl::StatusOr<TrainingOptions> TrainingOptionsFromFlags();

// --train and --loss-op, for the pipeline (compiler/pipeline.h), which places the passes they need.
bool TrainFlagGiven();
bool LossOpFlagGiven();

}  // namespace ampc
