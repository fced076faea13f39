#include "passes/registry.h"

#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/autocast.h"
#include "passes/fold_casts.h"
#include "passes/infer_types.h"
#include "passes/insert_casts.h"
#include "passes/loss_op.h"
#include "passes/training_step.h"
#include "passes/upgrade_opset.h"
#include "passes/verify.h"
#include "passes/verify_input.h"

namespace ampc {
namespace {

struct PassEntry {
  absl::string_view name;
  std::function<std::unique_ptr<Pass>()> create;
};

const std::vector<PassEntry>& Entries() {
  static const auto* entries = new std::vector<PassEntry>{
      {"verify-input", [] { return std::make_unique<VerifyInput>(); }},
      {"upgrade-opset", [] { return std::make_unique<UpgradeOpset>(); }},
      {"infer-types", [] { return std::make_unique<InferTypes>(); }},
      {"loss-op", [] { return std::make_unique<LossOp>(); }},
      {"training-step", [] { return std::make_unique<TrainingStep>(); }},
      {"autocast", [] { return std::make_unique<Autocast>(); }},
      {"insert-casts", [] { return std::make_unique<InsertCasts>(); }},
      {"fold-casts", [] { return std::make_unique<FoldCasts>(); }},
      {"verify", [] { return std::make_unique<Verify>(); }},
  };
  return *entries;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Pass>> CreatePass(absl::string_view name) {
  for (const PassEntry& entry : Entries()) {
    if (entry.name == name) return entry.create();
  }
  return absl::NotFoundError(
      absl::StrCat("unknown pass '", name, "'; known passes: ", absl::StrJoin(PassNames(), ", ")));
}

std::vector<std::string> PassNames() {
  std::vector<std::string> names;
  for (const PassEntry& entry : Entries()) names.emplace_back(entry.name);
  return names;
}

std::vector<std::string> DefaultPipeline() {
  return {"verify-input", "upgrade-opset", "infer-types", "autocast",
          "insert-casts", "fold-casts",    "verify"};
}

absl::Status CompileWithDefaults(onnx::ModelProto& model, const std::string& file,
                                 const AutocastOptions& options) {
  ModelContext context(model, file);
  context.autocast = options;
  for (const std::string& name : DefaultPipeline()) {
    absl::StatusOr<std::unique_ptr<Pass>> pass = CreatePass(name);
    if (!pass.ok()) return pass.status();
    absl::StatusOr<bool> changed = (*pass)->Run(context);
    if (!changed.ok()) return changed.status();
  }
  return absl::OkStatus();
}

}  // namespace ampc
