// placeholder: being written
#include "compiler/policy_file.h"

namespace ampc {
absl::Status ApplyPolicyFile(const std::string& path, AutocastPolicy& policy) {
  return absl::UnimplementedError(path + ": --policy is not implemented yet");
}
}  // namespace ampc
