// Every pass by name, and the default pipeline. The caller names the order.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "passes/pass.h"

namespace ampc {

// NotFound naming the pass and listing the known ones.
absl::StatusOr<std::unique_ptr<Pass>> CreatePass(absl::string_view name);
std::vector<std::string> PassNames();
// What `ampc IN -o OUT` runs when --passes is not given.
std::vector<std::string> DefaultPipeline();

}  // namespace ampc
