// Parameter groups of --train: which optimizer, with which hyper-parameters, updates each
// trainable parameter (docs/training.md, "--train-config"). The groups of TrainingOptions are
// tried in order and the first whose regex fully matches the parameter's name takes it; a
// parameter no group matches belongs to the default group, the command line's flags.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/training/training_options.h"

namespace ampc {

using ParamGroup = TrainingOptions::Group;

// The default group: --optimizer, --weight-decay, --momentum, --nesterov and the defaults.
ParamGroup DefaultGroup(const TrainingOptions& options);

// The group of each of `params`, in order. A group that takes no parameter is an error naming it
// (a regex that matches nothing would otherwise leave, say, weight decay on the biases silently).
absl::StatusOr<std::vector<ParamGroup>> ResolveParamGroups(const TrainingOptions& options,
                                                           const std::vector<std::string>& params);

bool UsesAdam(const ParamGroup& group);
// The weight decay the group applies: its own, else 0.01 for AdamW and 0 for the others.
float WeightDecay(const ParamGroup& group);

}  // namespace ampc
