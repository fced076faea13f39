#include "compiler/exit_codes.h"

#include <string>

namespace ampc {
namespace {
constexpr char kUsagePayload[] = "ampc/usage";
}  // namespace

absl::Status UsageError(absl::string_view message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kUsagePayload, absl::Cord("1"));
  return status;
}

ExitCode ExitCodeFor(const absl::Status& status) {
  if (status.ok()) return kExitOk;
  if (status.GetPayload(kUsagePayload).has_value()) return kExitUsage;
  if (status.code() == absl::StatusCode::kUnavailable) return kExitIo;
  return kExitInvalidModel;
}

}  // namespace ampc
