// The autocast flags (--dtype, --low-io, --block-op, --block-node, --lower-node, --policy,
// --clamp) as AutocastOptions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/precision_plan.h"

namespace ampc {

// Errors are UsageError()s, except a bad --policy file (InvalidArgument, naming the file).
absl::StatusOr<AutocastOptions> AutocastOptionsFromFlags();

// --dtype=fp32: no autocast (the FP32 baseline).
bool Fp32Baseline();

}  // namespace ampc
