// `ampc run MODEL --input NAME=FILE ... [--output-dir DIR] [--device cpu|cuda|auto]`: runs a
// model on the runtime and prints or writes its outputs.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ampc {

// A usage error when --threads is negative (run and train share the flag).
absl::Status CheckThreadsFlag();

// The most CPU threads --threads may ask for: more than any machine ampc runs on has cores.
inline constexpr int kMaxThreads = 1024;

// `args` are the positionals ("run", MODEL); `inputs` the NAME=FILE values of --input.
absl::Status RunModelCommand(const std::vector<std::string>& args,
                             const std::vector<std::string>& inputs);

}  // namespace ampc
