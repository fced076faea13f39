// The resource limits of `ampc run` and `ampc train` (--max-tensor-bytes, --max-memory,
// --max-loop-iterations), read from the command line; docs/errors.md states the defaults.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/core/backend.h"

namespace ampc {

// "4096", "512M", "16G" (powers of 1024: K, M, G, T); a usage error naming `flag` otherwise.
absl::StatusOr<uint64_t> ParseByteSize(const std::string& text, const std::string& flag);

// The limits the flags give (--max-memory=auto is max_memory_bytes 0: see RunLimits).
absl::StatusOr<RunLimits> RunLimitsFromFlags();

}  // namespace ampc
