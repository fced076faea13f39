// The CLI's exit codes and how a Status maps to them.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ampc {

enum ExitCode : int {
  kExitOk = 0,
  kExitInvalidModel = 1,  // the input model is missing, unreadable or invalid; a compile error
  kExitUsage = 2,         // bad command line
  kExitIo = 3,            // the output could not be written
};

// UsageError()s come from the command line; Unavailable from writing the output;
// everything else concerns the model.
ExitCode ExitCodeFor(const absl::Status& status);

// A command-line error: maps to kExitUsage.
absl::Status UsageError(absl::string_view message);

}  // namespace ampc
