#include "passes/upgrade_opset.h"

#include <onnx/version_converter/convert.h>

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "passes/float_support.h"
#include "passes/graph/onnx_status.h"

namespace ampc {
namespace {

// The model's default-domain opset, or 0 when it imports none.
int DefaultOpset(const onnx::ModelProto& model) {
  const OpsetVersions opsets = OpsetsOf(model);
  auto it = opsets.find("");
  return it == opsets.end() ? 0 : it->second;
}

// Why the model cannot be converted safely, or "".
std::string WhyNotConvertible(const onnx::ModelProto& model, int opset) {
  if (opset < kOldestConvertedOpset) {
    return absl::StrCat("ampc converts from opset ", kOldestConvertedOpset,
                        " on (below it ONNX's version converter changes what some ops compute)");
  }
  if (model.functions_size() > 0) return "the converter cannot follow model-local functions";
  return "";
}

// The opset asked for, or 0 when the model stays as it is.
int TargetOpset(int target_opset, bool training, int opset) {
  if (target_opset > 0) return target_opset;
  if (training && opset < kTrainingMinimumOpset) return kTrainingMinimumOpset;
  return 0;
}

}  // namespace

int64_t MinimumIrVersion(int64_t opset) {
  // (first opset, its IR version), from the ONNX releases' version table.
  static constexpr std::array<std::pair<int64_t, int64_t>, 11> kFirstIr = {{{28, 14},
                                                                            {25, 13},
                                                                            {24, 12},
                                                                            {23, 11},
                                                                            {21, 10},
                                                                            {19, 9},
                                                                            {15, 8},
                                                                            {12, 7},
                                                                            {11, 6},
                                                                            {10, 5},
                                                                            {9, 4}}};
  for (const auto& [first_opset, ir] : kFirstIr) {
    if (opset >= first_opset) return ir;
  }
  return 3;
}

absl::StatusOr<PassResult> UpgradeOpset::Run(ModelContext& context) {
  const int opset = DefaultOpset(context.model);
  const int target = TargetOpset(target_opset_, training_, opset);
  if (training_ && target > 0 && target < kTrainingMinimumOpset) {
    return absl::InvalidArgumentError(absl::StrCat(context.file, ": --target-opset ", target,
                                                   " is below opset ", kTrainingMinimumOpset,
                                                   ", the least --train compiles for"));
  }
  if (opset == 0 || target == 0 || target == opset) return false;
  const std::string asked =
      target_opset_ > 0 ? absl::StrCat("--target-opset ", target)
                        : absl::StrCat("--train needs opset ", target,
                                       " (the training step's functions are written against it)");
  if (target < opset) {
    // --train never asks for less than the model has; only --target-opset can.
    return absl::InvalidArgumentError(
        absl::StrCat(context.file, ": ", asked, " is below the model's opset ", opset,
                     "; ampc only upgrades (re-export the model at opset ", target, " instead)"));
  }
  std::string why = WhyNotConvertible(context.model, opset);
  onnx::ModelProto converted;
  if (why.empty()) {
    const absl::Status status = CatchOnnx("ONNX's version converter", [&] {
      converted = onnx::version_conversion::ConvertVersion(context.model, target);
    });
    why = std::string(status.message());
  }
  if (!why.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(context.file, ": ", asked,
                                                   " and this model imports opset ", opset, "; ",
                                                   why, "; re-export it with opset ", target));
  }
  context.model = std::move(converted);
  context.model.set_ir_version(std::max(context.model.ir_version(), MinimumIrVersion(target)));
  if (target_opset_ == 0) {
    context.Warn(absl::StrCat("--train: converted opset ", opset, " to ", target,
                              " with ONNX's version converter (the training step's functions are "
                              "written against it)"));
  }
  return true;
}

}  // namespace ampc
