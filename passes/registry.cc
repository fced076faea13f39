#include "passes/registry.h"

#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/autocast.h"
#include "passes/fold_casts.h"
#include "passes/infer_types.h"
#include "passes/insert_casts.h"
#include "passes/training/dropout_mode.h"
#include "passes/training/lift_dropout.h"
#include "passes/training/loss_op.h"
#include "passes/training/split_sequences.h"
#include "passes/training/training_step.h"
#include "passes/training/untie.h"
#include "passes/upgrade_opset.h"
#include "passes/verify.h"
#include "passes/verify_input.h"

namespace ampc {
namespace {

struct PassEntry {
  absl::string_view name;
  std::function<std::unique_ptr<Pass>(const PassOptions&)> create;
};

const std::vector<PassEntry>& Entries() {
  static const auto* entries = new std::vector<PassEntry>{
      {"verify-input", [](const PassOptions&) { return std::make_unique<VerifyInput>(); }},
      {"upgrade-opset",
       [](const PassOptions& o) {
         return std::make_unique<UpgradeOpset>(o.target_opset, o.training.enabled);
       }},
      {"infer-types", [](const PassOptions&) { return std::make_unique<InferTypes>(); }},
      {"untie", [](const PassOptions& o) { return std::make_unique<Untie>(o.training.untie); }},
      {"split-sequences", [](const PassOptions&) { return std::make_unique<SplitSequences>(); }},
      {"lift-dropout", [](const PassOptions&) { return std::make_unique<LiftDropout>(); }},
      {"loss-op",
       [](const PassOptions& o) { return std::make_unique<LossOp>(o.training.loss_op); }},
      {"dropout-mode",
       [](const PassOptions& o) {
         return std::make_unique<DropoutMode>(o.training.dropout, o.training.dropout_ratio);
       }},
      {"training-step",
       [](const PassOptions& o) {
         return std::make_unique<TrainingStep>(o.training, o.autocast.low_dtype);
       }},
      {"dropout-step",
       [](const PassOptions& o) { return std::make_unique<DropoutStep>(o.training.dropout); }},
      {"autocast",
       [](const PassOptions& o) {
         return std::make_unique<Autocast>(o.autocast, o.training.enabled);
       }},
      {"insert-casts",
       [](const PassOptions& o) { return std::make_unique<InsertCasts>(o.training.enabled); }},
      {"fold-casts",
       [](const PassOptions& o) { return std::make_unique<FoldCasts>(o.training.enabled); }},
      {"verify",
       [](const PassOptions& options) { return std::make_unique<Verify>(options.verify_full); }},
  };
  return *entries;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Pass>> CreatePass(absl::string_view name,
                                                 const PassOptions& options) {
  for (const PassEntry& entry : Entries()) {
    if (entry.name == name) return entry.create(options);
  }
  return absl::NotFoundError(
      absl::StrCat("unknown pass '", name, "'; known passes: ", absl::StrJoin(PassNames(), ", ")));
}

std::vector<std::string> PassNames() {
  std::vector<std::string> names;
  for (const PassEntry& entry : Entries()) names.emplace_back(entry.name);
  return names;
}

}  // namespace ampc
