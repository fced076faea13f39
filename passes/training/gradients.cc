#include "passes/training/gradients.h"

#include <re2/re2.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/autodiff/autodiff.h"
#include "passes/graph/status_macros.h"
#include "passes/graph/tensor_data.h"
#include "passes/graph/topo_sort.h"
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

namespace {

float MomentumOf(const onnx::NodeProto& node) {
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.name() == "momentum") return a.f();
  }
  return 0.9f;
}

// A float32 value `value` as `type`.
std::string Typed(StepWriter& w, const std::string& value, int type) {
  if (type == onnx::TensorProto::FLOAT) return value;
  return w.Op("Cast", {value}, value + ".typed", {onnx::MakeAttribute("to", int64_t{type})});
}

// ONNX's BatchNormalization in training mode outputs input_var * m + var * (1 - m), var the
// population variance of the n = Size(X) / C values of a channel; PyTorch's running variance takes
// the unbiased var * n / (n - 1). The node gets zeros as input_var (Y does not read it in training
// mode), so its output 2 is the batch term (1 - m) var alone, written to `term`; `next` is
// input_var * m + term * n / max(n - 1, 1). No node that writes reads the state itself:
// onnxruntime writes output 2 into the buffer of input 4. Where the forward reads output 2, it
// gets the value ONNX gives it, input_var * m + term, under its name.
void UnbiasedRunningVariance(StepWriter& w, onnx::NodeProto& node, bool read,
                             const std::string& next, int type) {
  const std::string state = node.input(4);
  const std::string output = node.output(2);
  const std::string term = w.names().Fresh(state + ".batch_term");
  onnx::TensorProto zero;
  zero.set_data_type(type);
  zero.add_dims(1);
  zero.set_raw_data(std::string(ElementSize(type).value_or(4), '\0'));
  node.set_input(4, w.Op("ConstantOfShape", {w.Op("Shape", {state}, state + ".shape")},
                         state + ".zeros", {onnx::MakeAttribute("value", zero)}));
  node.set_output(2, term);
  const std::string kept =
      w.Op("Mul", {state, Typed(w, w.Float(MomentumOf(node)), type)}, state + ".kept");
  const std::string count = w.Op("Div",
                                 {w.Op("Size", {node.input(0)}, state + ".size"),
                                  w.Op("Size", {node.input(3)}, state + ".channels")},
                                 state + ".count");
  const std::string n = w.Op("Cast", {count}, state + ".n",
                             {onnx::MakeAttribute("to", int64_t{onnx::TensorProto::FLOAT})});
  const std::string one = w.Float(1.0f);
  const std::string dof =
      w.Op("Max", {w.Op("Sub", {n, one}, state + ".n_minus_1"), one}, state + ".dof");
  const std::string bessel = Typed(w, w.Op("Div", {n, dof}, state + ".bessel"), type);
  w.Node("Add", {kept, w.Op("Mul", {term, bessel}, state + ".unbiased_term")}, {next});
  if (read) w.Node("Add", {kept, term}, {output});
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ForwardStateUpdates(StepWriter& w, onnx::GraphProto& step,
                                                             const GraphIndex& forward) {
  std::vector<std::string> updated;
  bool reorder = false;  // a forward node reads a value appended after the backward
  for (int i = 0; i < forward.graph().node_size(); ++i) {
    onnx::NodeProto& node = *step.mutable_node(i);
    if (node.op_type() != "BatchNormalization" || node.output_size() < 3) continue;
    for (int slot = 1; slot <= 2; ++slot) {
      const std::string state = node.input(slot + 2);  // a copy: slot 2 changes the input
      if (node.output(slot).empty() || forward.Initializer(state) == nullptr) continue;
      const std::string next = NextName(state);
      w.names().Reserve(next);
      const bool unread = forward.Source(node.output(slot)) == nullptr;  // added by the autodiff
      if (slot == 2) {
        UnbiasedRunningVariance(w, node, !unread, next, forward.Initializer(state)->data_type());
        reorder = true;
      } else if (unread) {
        node.set_output(slot, next);
      } else {
        w.Node("Identity", {node.output(slot)}, {next});
      }
      updated.push_back(state);
    }
  }
  if (reorder) AMPC_RETURN_IF_ERROR(TopologicalSort(step).status());
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
