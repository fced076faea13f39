#include "passes/training/param_groups.h"

#include <re2/re2.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace ampc {

ParamGroup DefaultGroup(const TrainingOptions& options) {
  ParamGroup group;
  group.where = "the command line";
  group.optimizer = options.optimizer;
  group.weight_decay = options.weight_decay;
  group.momentum = options.momentum;
  group.dampening = options.dampening;
  group.nesterov = options.nesterov;
  group.beta1 = options.beta1;
  group.beta2 = options.beta2;
  group.epsilon = options.epsilon;
  return group;
}

absl::StatusOr<std::vector<ParamGroup>> ResolveParamGroups(const TrainingOptions& options,
                                                           const std::vector<std::string>& params) {
  std::vector<std::unique_ptr<RE2>> regexes;
  for (const ParamGroup& group : options.groups) {
    regexes.push_back(std::make_unique<RE2>(group.params, RE2::Quiet));
    if (!regexes.back()->ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(group.where, ".params '", group.params, "': ", regexes.back()->error()));
    }
  }
  std::vector<int> taken(options.groups.size(), 0);
  std::vector<int> matched(options.groups.size(), 0);
  std::vector<ParamGroup> resolved;
  const ParamGroup fallback = DefaultGroup(options);
  for (const std::string& p : params) {
    int owner = -1;
    for (size_t g = 0; g < regexes.size(); ++g) {
      if (!RE2::FullMatch(p, *regexes[g])) continue;
      ++matched[g];
      if (owner < 0) owner = static_cast<int>(g);
    }
    if (owner >= 0) ++taken[owner];
    resolved.push_back(owner < 0 ? fallback : options.groups[owner]);
  }
  for (size_t g = 0; g < options.groups.size(); ++g) {
    if (taken[g] > 0) continue;
    const ParamGroup& group = options.groups[g];
    return absl::InvalidArgumentError(absl::StrCat(
        group.where, ".params '", group.params, "' ",
        matched[g] == 0 ? "matches no trainable parameter"
                        : "matches only parameters that earlier groups take (the first match "
                          "wins)"));
  }
  return resolved;
}

bool UsesAdam(const ParamGroup& group) {
  return group.optimizer == TrainingOptions::Optimizer::kAdam ||
         group.optimizer == TrainingOptions::Optimizer::kAdamW;
}

float WeightDecay(const ParamGroup& group) {
  if (group.weight_decay >= 0) return group.weight_decay;
  return group.optimizer == TrainingOptions::Optimizer::kAdamW ? 0.01f : 0.0f;
}

}  // namespace ampc
