#include "passes/training/optimizer.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "passes/opset/training_ops.h"
#include "passes/training/training_state.h"

namespace ampc {
namespace {

using onnx::MakeAttribute;

// One optimizer node updating `p` with the unscaled gradient `u` at learning rate `lr`.
void EmitOptimizer(StepWriter& w, const ParamGroup& o, const std::string& p, const std::string& u,
                   const std::string& lr, const std::string& skip, const std::string& first,
                   const std::string& step_after) {
  std::vector<std::string> outputs = {NextName(p)};
  const std::vector<std::string> moments = MomentNames(o, p);
  for (const std::string& moment : moments) outputs.push_back(NextName(moment));
  if (UsesAdam(o)) {
    w.Node("Adam", {skip, lr, step_after, p, u, moments[0], moments[1]}, outputs,
           {MakeAttribute("beta1", o.beta1), MakeAttribute("beta2", o.beta2),
            MakeAttribute("epsilon", o.epsilon), MakeAttribute("weight_decay", WeightDecay(o)),
            MakeAttribute("decoupled", int64_t{o.optimizer == TrainingOptions::Optimizer::kAdamW})},
           kAmpcDomain);
    return;
  }
  std::vector<std::string> inputs = {skip, lr, first, p, u};
  const bool momentum = o.optimizer == TrainingOptions::Optimizer::kMomentum && o.momentum != 0;
  if (momentum) {
    inputs.push_back(moments[0]);
  } else {
    outputs.resize(1);
  }
  w.Node("SGD", inputs, outputs,
         {MakeAttribute("momentum", momentum ? o.momentum : 0.0f),
          MakeAttribute("dampening", o.dampening), MakeAttribute("nesterov", int64_t{o.nesterov}),
          MakeAttribute("weight_decay", WeightDecay(o))},
         kAmpcDomain);
}

// The learning rate of each parameter: ampc.lr, or one Mul(ampc.lr, lr_scale) per distinct
// lr_scale other than 1, which the parameters of that scale share.
std::vector<std::string> GroupRates(StepWriter& w, const std::vector<ParamGroup>& groups) {
  std::vector<std::string> lrs;
  std::map<float, std::string> scaled;
  for (const ParamGroup& group : groups) {
    if (group.lr_scale == 1.0f) {
      lrs.push_back(kLrInput);
      continue;
    }
    auto [at, added] = scaled.try_emplace(group.lr_scale);
    if (added) at->second = w.Op("Mul", {kLrInput, w.Float(group.lr_scale)}, "ampc.lr.scaled");
    lrs.push_back(at->second);
  }
  return lrs;
}

}  // namespace

absl::Status CheckOneSgdForm(const std::vector<ParamGroup>& groups) {
  const ParamGroup* with = nullptr;
  const ParamGroup* without = nullptr;
  for (const ParamGroup& group : groups) {
    if (UsesAdam(group)) continue;
    const bool buffer =
        group.optimizer == TrainingOptions::Optimizer::kMomentum && group.momentum != 0;
    (buffer ? with : without) = &group;
  }
  if (with == nullptr || without == nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      with->where, ": SGD with momentum, and ", without->where,
      ": SGD without (sgd, or momentum 0): one training step cannot mix them (one ONNX function "
      "serves every ai.ampc.SGD node); give both momentum > 0, or one of them adam or adamw"));
}

void EmitOptimizers(StepWriter& w, const std::vector<ParamGroup>& groups,
                    const std::vector<std::string>& params,
                    const std::vector<std::string>& unscaled, const std::string& skip) {
  // SGD initialises its buffer on the first step; Adam's bias correction counts this one.
  const std::string first = w.Op("Equal", {kStep, w.Int(0)}, "ampc.first");
  const std::string step_after = w.Op("Add", {kStep, w.Int(1)}, "ampc.step_after");
  const std::vector<std::string> lrs = GroupRates(w, groups);
  for (size_t i = 0; i < params.size(); ++i) {
    EmitOptimizer(w, groups[i], params[i], unscaled[i], lrs[i], skip, first, step_after);
  }
}

}  // namespace ampc
