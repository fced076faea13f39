#include "passes/training/gradients.h"

#include <re2/re2.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/autodiff/autodiff.h"
#include "passes/opset/standard_op_versions.h"
#include "passes/training/folded_constants.h"
#include "passes/training/training_state.h"

namespace ampc {
namespace {

// Scalar (rank-0) float initializers are trained like any other, but exporters store literal
// constants that way too (a scale, GELU's 0.5): name them, with the --freeze that keeps them.
std::string ScalarParametersWarning(const GraphIndex& index,
                                    const std::vector<std::string>& params) {
  std::vector<std::string> scalars;
  for (const std::string& p : params) {
    const onnx::TensorProto* init = index.Initializer(p);
    if (init != nullptr && init->dims_size() == 0) scalars.push_back(p);
  }
  if (scalars.empty()) return "";
  std::vector<std::string> quoted;
  for (const std::string& name : scalars) quoted.push_back(RE2::QuoteMeta(name));
  return absl::StrCat(
      "training ", scalars.size(), " scalar initializer", scalars.size() == 1 ? "" : "s",
      " as parameter", scalars.size() == 1 ? "" : "s", " (", absl::StrJoin(scalars, ", "),
      "); if they are constants, keep them fixed with --freeze='", absl::StrJoin(quoted, "|"), "'");
}

// Moves the parameters the exporter folded from its constants out of `params` (they stay fixed)
// and says which, once.
std::string KeepFoldedConstants(const GraphIndex& index, std::vector<std::string>& params) {
  const absl::flat_hash_set<std::string> folded = FoldedConstants(index.graph());
  std::vector<std::string> fixed, trained;
  for (std::string& p : params) (folded.contains(p) ? fixed : trained).push_back(std::move(p));
  params = std::move(trained);
  if (fixed.empty()) return "";
  return absl::StrCat(fixed.size(), " initializer", fixed.size() == 1 ? "" : "s",
                      " the exporter folded from constants ", fixed.size() == 1 ? "is" : "are",
                      " kept fixed: ", absl::StrJoin(fixed, ", "));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> StepParameters(const GraphIndex& forward,
                                                        const TrainingOptions& options,
                                                        std::vector<std::string>& warnings) {
  absl::StatusOr<std::vector<std::string>> params =
      TrainableParameters(forward, options.loss, options.freeze);
  if (!params.ok()) return params.status();
  if (std::string note = KeepFoldedConstants(forward, *params); !note.empty()) {
    warnings.push_back(std::move(note));
  }
  if (params->empty()) return absl::InvalidArgumentError("no trainable parameters reach the loss");
  if (std::string warning = ScalarParametersWarning(forward, *params); !warning.empty()) {
    warnings.push_back(std::move(warning));
  }
  return params;
}

void StateMaxPoolIndices(onnx::GraphProto& graph, NameAllocator& names) {
  for (onnx::NodeProto& node : *graph.mutable_node()) {
    if (IsAmpcVersion(node) && node.op_type() == "MaxPool" && node.output_size() == 1) {
      node.add_output(names.Fresh(absl::StrCat(node.output(0), ".indices")));
    }
  }
}

absl::StatusOr<std::vector<std::string>> EmitBackward(StepWriter& w, onnx::GraphProto& step,
                                                      const GraphIndex& forward,
                                                      const TrainingOptions& options,
                                                      const std::vector<std::string>& params) {
  const std::string seed =
      options.accumulate == 1
          ? std::string(kScale)
          : w.Op("Div", {kScale, w.Float(static_cast<float>(options.accumulate))}, "ampc.seed");
  return AppendGradients(step, forward, {options.loss, seed, params}, w.names());
}

std::vector<std::string> ForwardStateUpdates(StepWriter& w, onnx::GraphProto& step,
                                             const GraphIndex& forward) {
  std::vector<std::string> updated;
  for (int i = 0; i < forward.graph().node_size(); ++i) {
    onnx::NodeProto& node = *step.mutable_node(i);
    if (node.op_type() != "BatchNormalization" || node.output_size() < 3) continue;
    for (int slot = 1; slot <= 2; ++slot) {
      const std::string& state = node.input(slot + 2);
      if (node.output(slot).empty() || forward.Initializer(state) == nullptr) continue;
      w.names().Reserve(NextName(state));
      if (forward.Source(node.output(slot)) == nullptr) {  // added by the autodiff: unread
        node.set_output(slot, NextName(state));
      } else {
        w.Node("Identity", {node.output(slot)}, {NextName(state)});
      }
      updated.push_back(state);
    }
  }
  return updated;
}

Window EmitAccumulation(StepWriter& w, int64_t accumulate, const std::vector<std::string>& params,
                        const std::vector<std::string>& grads, const std::string& loss_bad) {
  if (accumulate == 1) return {"", loss_bad, grads};
  Window window;
  const std::string micro = w.Op("Add", {kMicroStep, w.Int(1)}, "ampc.micro_step_plus_one");
  window.end = w.Op("Equal", {micro, w.Int(accumulate)}, "ampc.window_end");
  window.loss_bad = w.Op("Or", {kWindowLossBad, loss_bad}, "ampc.window_loss_bad_now");
  const std::string zero = w.Float(0.0f);
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string acc = AccumulatorName(params[i]);
    window.grads.push_back(w.Op("Add", {acc, grads[i]}, acc + ".sum"));
    w.Node("Where", {window.end, zero, window.grads.back()}, {NextName(acc)});
  }
  w.Node("Where", {window.end, w.Int(0), micro}, {NextName(kMicroStep)});
  const std::string open = w.Op("Not", {window.end}, "ampc.window_open");
  w.Node("And", {open, window.loss_bad}, {NextName(kWindowLossBad)});
  return window;
}

}  // namespace ampc
