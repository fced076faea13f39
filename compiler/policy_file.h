// --policy FILE.json: per-op category changes on top of the default tables (docs/autocast.md).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "passes/autocast_policy.h"

namespace ampc {

// Applies the file's entries to `policy`; every entry's source names the file. Errors are
// InvalidArgument naming the file and the bad entry.
absl::Status ApplyPolicyFile(const std::string& path, AutocastPolicy& policy);

// "OpType" for the default domain, "domain.OpType" otherwise; in a domain the ONNX library
// knows, the op must exist (a typo would otherwise change nothing, silently). The error says why
// without naming where the key came from.
absl::Status CheckOpKey(const std::string& key);

}  // namespace ampc
