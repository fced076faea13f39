// The loss of the training step (docs/training-design.md, "The step", 1.): that it is an FP32
// scalar of the forward graph, and the flag that says it is inf or NaN.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "passes/graph/graph_index.h"
#include "passes/training/step_writer.h"

namespace ampc {

// InvalidArgument "--loss=LOSS: ..." unless `loss` is a value of `index` of type FP32 and rank 0.
absl::Status CheckLoss(const GraphIndex& index, const std::string& loss);

// Appends loss_bad = Or(IsNaN(loss), IsInf(loss)) and returns its name.
std::string EmitLossCheck(StepWriter& w, const std::string& loss);

}  // namespace ampc
