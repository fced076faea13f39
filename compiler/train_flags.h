// The flags of `ampc MODEL -o OUT --train` (docs/training.md, "What `--train` builds") as
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

// With --train, `passes` with training-step before verify (or last), after the cast passes: the
// step's forward is the mixed-precision graph. infer-types is added after verify-input when
// missing (the step needs the forward's types); with --loss-op, loss-op and a second infer-types
// follow the first infer-types (a list that names loss-op keeps its order). A list that names
// training-step is kept as it is, as are `passes` without --train.
std::vector<std::string> WithTrainingStep(std::vector<std::string> passes);

}  // namespace ampc
