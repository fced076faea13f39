// The optimizer of the training step (docs/training-design.md, "The step", 6.): one ai.ampc.SGD or
// ai.ampc.Adam node per parameter, with its group's hyper-parameters and learning rate.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "passes/training/param_groups.h"
#include "passes/training/step_writer.h"

namespace ampc {

// ai.ampc.SGD has a momentum buffer exactly when momentum != 0, and IR 8 gives the op one
// model-local function: one step cannot mix SGD with momentum and without.
absl::Status CheckOneSgdForm(const std::vector<ParamGroup>& groups);

// Updates each of `params` (its group in `groups`) with its unscaled gradient in `unscaled`, at
// ampc.lr times the group's lr_scale, unless `skip`.
void EmitOptimizers(StepWriter& w, const std::vector<ParamGroup>& groups,
                    const std::vector<std::string>& params,
                    const std::vector<std::string>& unscaled, const std::string& skip);

}  // namespace ampc
