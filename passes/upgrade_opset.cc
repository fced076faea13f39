#include "passes/upgrade_opset.h"

#include <onnx/version_converter/convert.h>

#include "absl/strings/str_cat.h"
#include "passes/onnx_status.h"

namespace ampc {
namespace {

// The model's default-domain opset, or 0 when it imports none.
int DefaultOpset(const onnx::ModelProto& model) {
  for (const onnx::OperatorSetIdProto& opset : model.opset_import()) {
    if (opset.domain().empty() || opset.domain() == "ai.onnx") {
      return static_cast<int>(opset.version());
    }
  }
  return 0;
}

}  // namespace

absl::StatusOr<bool> UpgradeOpset::Run(ModelContext& context) {
  const int opset = DefaultOpset(context.model);
  if (!context.training.enabled || opset == 0 || opset >= kTrainingMinimumOpset) return false;
  onnx::ModelProto converted;
  const absl::Status status = CatchOnnx("ONNX's version converter", [&] {
    converted = onnx::version_conversion::ConvertVersion(context.model, kTrainingMinimumOpset);
  });
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        context.file, ": --train needs opset ", kTrainingMinimumOpset,
        " (the training step's functions are written against it) and this model imports opset ",
        opset, "; ", status.message(), "; re-export it with opset ", kTrainingMinimumOpset,
        " or later"));
  }
  context.model = std::move(converted);
  context.Warn(absl::StrCat(context.file, ": warning: --train: converted opset ", opset, " to ",
                            kTrainingMinimumOpset,
                            " with ONNX's version converter (the training step's functions are "
                            "written against it)"));
  return true;
}

}  // namespace ampc
