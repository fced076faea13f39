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

// Why the model cannot be converted safely, or "".
std::string WhyNotConvertible(const onnx::ModelProto& model, int opset) {
  if (opset < kOldestConvertedOpset) {
    return absl::StrCat("ampc converts from opset ", kOldestConvertedOpset,
                        " on (below it ONNX's version converter changes what some ops compute)");
  }
  if (model.functions_size() > 0) return "the converter cannot follow model-local functions";
  for (const onnx::OperatorSetIdProto& import : model.opset_import()) {
    if (!import.domain().empty() && import.domain() != "ai.onnx") {
      return absl::StrCat("the converter cannot follow domain '", import.domain(), "'");
    }
  }
  return "";
}

}  // namespace

absl::StatusOr<bool> UpgradeOpset::Run(ModelContext& context) {
  const int opset = DefaultOpset(context.model);
  if (!context.training.enabled || opset == 0 || opset >= kTrainingMinimumOpset) return false;
  std::string why = WhyNotConvertible(context.model, opset);
  onnx::ModelProto converted;
  if (why.empty()) {
    const absl::Status status = CatchOnnx("ONNX's version converter", [&] {
      converted = onnx::version_conversion::ConvertVersion(context.model, kTrainingMinimumOpset);
    });
    why = std::string(status.message());
  }
  if (!why.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        context.file, ": --train needs opset ", kTrainingMinimumOpset,
        " (the training step's functions are written against it) and this model imports opset ",
        opset, "; ", why, "; re-export it with opset ", kTrainingMinimumOpset));
  }
  context.model = std::move(converted);
  // Opset 17 needs IR version 8 (the converter leaves the model's own).
  if (context.model.ir_version() < 8) context.model.set_ir_version(8);
  context.Warn(absl::StrCat(context.file, ": warning: --train: converted opset ", opset, " to ",
                            kTrainingMinimumOpset,
                            " with ONNX's version converter (the training step's functions are "
                            "written against it)"));
  return true;
}

}  // namespace ampc
