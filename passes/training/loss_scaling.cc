#include "passes/training/loss_scaling.h"

#include "passes/opset/training_ops.h"
#include "passes/training/training_state.h"

namespace ampc {
namespace {

using onnx::MakeAttribute;
constexpr int64_t kInt64 = onnx::TensorProto::INT64;

// 4. The scale update (loss-scaling.md), taking effect at a window's end only.
void EmitScaleUpdate(StepWriter& w, const TrainingOptions& options, const Scaling& scaling,
                     const Window& window, const std::string& found) {
  const std::vector<std::string> state = {kScale, kGrowthTracker, kHysteresisLeft};
  std::vector<std::string> updated;
  for (const std::string& item : state) {
    updated.push_back(window.end.empty() ? NextName(item) : w.names().Fresh(item + ".updated"));
  }
  w.Node(
      "UpdateScale", {kScale, kGrowthTracker, kHysteresisLeft, found, window.loss_bad}, updated,
      {MakeAttribute("growth_factor", options.growth_factor),
       MakeAttribute("backoff_factor", options.backoff_factor),
       MakeAttribute("growth_interval", options.growth_interval),
       MakeAttribute("hysteresis", options.hysteresis),
       MakeAttribute("min_scale", options.min_scale), MakeAttribute("max_scale", options.max_scale),
       MakeAttribute("dynamic", int64_t{scaling.dynamic})},
      kAmpcDomain);
  if (window.end.empty()) return;
  for (size_t i = 0; i < state.size(); ++i) {
    w.Node("Where", {window.end, updated[i], state[i]}, {NextName(state[i])});
  }
}

}  // namespace

Scaling ScalingOf(const TrainingOptions& options, int low_dtype) {
  switch (options.loss_scale) {
    case TrainingOptions::LossScale::kDynamic:
      return {true, options.init_scale};
    case TrainingOptions::LossScale::kStatic:
      return {false, options.init_scale};
    case TrainingOptions::LossScale::kNone:
      return {false, 1.0f};
    case TrainingOptions::LossScale::kDefault:
      break;
  }
  if (low_dtype == onnx::TensorProto::FLOAT16) return {true, options.init_scale};
  return {false, 1.0f};
}

Unscaled EmitCheckAndUnscale(StepWriter& w, const TrainingOptions& options, const Scaling& scaling,
                             const Window& window, const std::vector<std::string>& params) {
  Unscaled unscaled;
  unscaled.found = w.names().Fresh("ampc.found");
  w.Node("CheckFinite", window.grads, {unscaled.found}, {}, kAmpcDomain);
  EmitScaleUpdate(w, options, scaling, window, unscaled.found);
  for (const std::string& p : params) unscaled.grads.push_back(w.names().Fresh(p + ".ampc.grad"));
  unscaled.norm = w.names().Fresh("ampc.norm");
  std::vector<std::string> clip_inputs = {kScale};
  clip_inputs.insert(clip_inputs.end(), window.grads.begin(), window.grads.end());
  std::vector<std::string> clip_outputs = unscaled.grads;
  clip_outputs.push_back(unscaled.norm);
  w.Node("UnscaleClip", clip_inputs, clip_outputs,
         {MakeAttribute("max_norm", options.clip_grad_norm)}, kAmpcDomain);
  return unscaled;
}

Skip EmitSkip(StepWriter& w, const Window& window, const Unscaled& unscaled) {
  Skip skip;
  skip.failed = w.Op("Or", {unscaled.found, window.loss_bad},
                     window.end.empty() ? "ampc.skip" : "ampc.failed");
  skip.skip =
      window.end.empty()
          ? skip.failed
          : w.Op("Or", {w.Op("Not", {window.end}, "ampc.mid_window"), skip.failed}, "ampc.skip");
  w.Node("Not", {skip.skip}, {kApplied});
  w.Node("Where", {skip.skip, w.Float(0.0f), unscaled.norm}, {kGradNorm});
  return skip;
}

void EmitCounters(StepWriter& w, const Window& window, const std::string& failed) {
  auto at_end = [&](const std::string& flag, const std::string& hint) {
    return window.end.empty() ? flag : w.Op("And", {window.end, flag}, hint);
  };
  auto count = [&](const std::string& flag, const std::string& hint) {
    return w.Op("Cast", {flag}, hint, {MakeAttribute("to", kInt64)});
  };
  const std::string skipped = at_end(failed, "ampc.skipped_now");
  const std::string loss_bad = at_end(window.loss_bad, "ampc.loss_bad_now");
  w.Node("Add", {kStep, count(kApplied, "ampc.applied_count")}, {NextName(kStep)});
  w.Node("Add", {kSkippedSteps, count(skipped, "ampc.skip_count")}, {NextName(kSkippedSteps)});
  const std::string more = w.Op("Add", {kConsecutiveSkips, w.Int(1)}, "ampc.consecutive_plus_one");
  const std::string kept =
      window.end.empty()
          ? w.Int(0)
          : w.Op("Where", {window.end, w.Int(0), kConsecutiveSkips}, "ampc.consecutive_kept");
  w.Node("Where", {skipped, more, kept}, {NextName(kConsecutiveSkips)});
  w.Node("Add", {kNonfiniteLossSteps, count(loss_bad, "ampc.loss_bad_count")},
         {NextName(kNonfiniteLossSteps)});
}

}  // namespace ampc
