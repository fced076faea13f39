#include "passes/verify.h"

#include <onnx/checker.h>

#include "absl/strings/str_cat.h"
#include "passes/graph/onnx_status.h"
#include "passes/infer_types.h"
#include "passes/opset/training_ops.h"
#include "passes/verify_changes.h"

namespace ampc {

absl::StatusOr<PassResult> Verify::Run(ModelContext& context) {
  const std::string where = absl::StrCat(context.file, " (ampc output)");
  RegisterAmpcSchemas();  // the checker checks ai.ampc nodes against their schemas
  absl::Status status;
  bool decided = false;
  if (!full_ && context.inferred_types != nullptr && CanVerifyChanges(context.model)) {
    absl::StatusOr<bool> verified = VerifyChanges(context.model, *context.inferred_types, where);
    status = verified.status();
    decided = !verified.ok() || *verified;
  }
  if (!decided) {
    status = CatchOnnx(absl::StrCat(where, ": ONNX checker"),
                       [&] { onnx::checker::check_model(context.model); });
    // In place: the output already carries every type, so inference adds nothing it keeps.
    if (status.ok()) status = InferTypesKeepingIo(context.model, where);
  }
  if (status.ok()) return false;
  return absl::InternalError(
      absl::StrCat(status.message(), " -- this is an ampc bug; please report it with the input"));
}

}  // namespace ampc
