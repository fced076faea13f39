#include "compiler/run_limits.h"

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "compiler/exit_codes.h"

ABSL_FLAG(std::string, max_tensor_bytes, "16G",
          "ampc run/train: the largest tensor a node may make (K, M, G, T: powers of 1024).");
ABSL_FLAG(std::string, max_memory, "auto",
          "ampc run/train: tensor memory in use at once, at most (auto: on the CPU this "
          "machine's memory or its cgroup's limit; on a GPU what its allocator has).");
ABSL_FLAG(int64_t, max_loop_iterations, int64_t{1} << 24,
          "ampc run/train: iterations one Loop node may run each time it runs.");

namespace ampc {

absl::StatusOr<uint64_t> ParseByteSize(const std::string& text, const std::string& flag) {
  std::string digits = text;
  int shift = 0;
  if (!digits.empty()) {
    const char unit = absl::ascii_toupper(digits.back());
    const int units[] = {10, 20, 30, 40};
    const char names[] = {'K', 'M', 'G', 'T'};
    for (int i = 0; i < 4; ++i) {
      if (unit == names[i]) shift = units[i];
    }
    if (shift > 0) digits.pop_back();
  }
  uint64_t value = 0;
  if (!absl::SimpleAtoi(digits, &value) || value == 0 || value > (UINT64_MAX >> shift)) {
    return UsageError(absl::StrCat("--", flag, "=", text,
                                   ": expected a size of at least 1 byte, such as 4096, 512M "
                                   "or 16G"));
  }
  return value << shift;
}

absl::StatusOr<RunLimits> RunLimitsFromFlags() {
  RunLimits limits;
  absl::StatusOr<uint64_t> tensor =
      ParseByteSize(absl::GetFlag(FLAGS_max_tensor_bytes), "max-tensor-bytes");
  if (!tensor.ok()) return tensor.status();
  limits.max_tensor_bytes = *tensor;
  const std::string memory = absl::GetFlag(FLAGS_max_memory);
  if (memory != "auto") {
    absl::StatusOr<uint64_t> bytes = ParseByteSize(memory, "max-memory");
    if (!bytes.ok()) return bytes.status();
    limits.max_memory_bytes = *bytes;
  }
  limits.max_loop_iterations = absl::GetFlag(FLAGS_max_loop_iterations);
  if (limits.max_loop_iterations < 1) {
    return UsageError(absl::StrCat("--max-loop-iterations=", limits.max_loop_iterations,
                                   ": expected at least 1"));
  }
  return limits;
}

}  // namespace ampc
