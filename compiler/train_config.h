// --train-config FILE.json (docs/training.md, "--train-config"): parameter groups, the LR
// schedule and the loss scaler's settings, applied on top of the --train flags.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "passes/training/training_options.h"

namespace ampc {

// The --train-config flag's value ("" when not given).
std::string TrainConfigPath();

// Applies the file at `path` to `options`, which already hold the command line's flags (a group
// takes what it leaves out from them). Every mistake is one UsageError line "PATH: JSON.path:
// what is wrong", and then `options` are unchanged.
absl::Status ApplyTrainConfig(const std::string& path, TrainingOptions& options);

}  // namespace ampc
