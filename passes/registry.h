// Every pass by name. The order is compiler/pipeline.h's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "passes/pass.h"
#include "passes/precision_plan.h"
#include "passes/training/training_options.h"

namespace ampc {

// The options of every pass, as parsed from the command line; each pass is constructed with its
// part.
struct PassOptions {
  AutocastOptions autocast;
  TrainingOptions training;
  int target_opset = 0;      // --target-opset; 0: the model's own
  bool verify_full = false;  // --verify=full: verify runs check_model and strict inference whole
};

// NotFound naming the pass and listing the known ones.
absl::StatusOr<std::unique_ptr<Pass>> CreatePass(absl::string_view name,
                                                 const PassOptions& options);
std::vector<std::string> PassNames();
}  // namespace ampc
