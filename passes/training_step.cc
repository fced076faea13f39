#include "passes/training_step.h"

#include <onnx/defs/attr_proto_util.h>
#include <re2/re2.h>

#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/ampc_grad_ops.h"
#include "passes/ampc_ops.h"
#include "passes/autodiff.h"
#include "passes/bf16_ops.h"
#include "passes/float_support.h"
#include "passes/name_allocator.h"
#include "passes/param_groups.h"
#include "passes/training_state.h"

namespace ampc {
namespace {

using onnx::MakeAttribute;
using Attributes = std::vector<onnx::AttributeProto>;
constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kInt64 = onnx::TensorProto::INT64;
constexpr int kBool = onnx::TensorProto::BOOL;

// Appends the nodes of the step after the forward copy.
class StepWriter {
 public:
  StepWriter(onnx::GraphProto& graph, NameAllocator& names) : graph_(graph), names_(names) {}

  void Node(const std::string& op, const std::vector<std::string>& inputs,
            const std::vector<std::string>& outputs, Attributes attributes = {},
            const std::string& domain = "") {
    onnx::NodeProto& node = *graph_.add_node();
    node.set_name(names_.Fresh(absl::StrCat("/ampc/", op)));
    node.set_op_type(op);
    if (!domain.empty()) node.set_domain(domain);
    for (const std::string& input : inputs) node.add_input(input);
    for (const std::string& output : outputs) node.add_output(output);
    for (onnx::AttributeProto& attribute : attributes) *node.add_attribute() = std::move(attribute);
  }
  // A one-output node whose output is named after `hint`.
  std::string Op(const std::string& op, const std::vector<std::string>& inputs,
                 const std::string& hint, Attributes attributes = {}) {
    std::string out = names_.Fresh(hint);
    Node(op, inputs, {out}, std::move(attributes));
    return out;
  }
  std::string Int(int64_t value) {
    return Op("Constant", {}, "ampc.const", {MakeAttribute("value_int", value)});
  }
  std::string Float(float value) {
    return Op("Constant", {}, "ampc.const", {MakeAttribute("value_float", value)});
  }

 private:
  onnx::GraphProto& graph_;
  NameAllocator& names_;
};

struct Scaling {
  bool dynamic;
  float init_scale;
};

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

// The optimizer's state items of parameter `p`.
std::vector<std::string> MomentNames(const ParamGroup& o, const std::string& p) {
  if (UsesAdam(o)) return {p + ".ampc.m", p + ".ampc.v"};
  if (o.optimizer == TrainingOptions::Optimizer::kMomentum) return {p + ".ampc.momentum"};
  return {};
}

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

// The names the check, the scale update and the unscale read in one step: with --accumulate
// K > 1 the window's sums, its loss flag and whether this micro-batch ends it.
struct Window {
  std::string end;  // empty when every step ends a window (K = 1)
  std::string loss_bad;
  std::vector<std::string> grads;
};

std::string AccumulatorName(const std::string& p) { return p + ".ampc.acc"; }

// Adds each gradient into its accumulator and counts the micro-batch; the accumulators, the
// count and the loss flag start again after the window's last micro-batch.
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

// 4. The scale update (loss-scaling.md), taking effect at a window's end only.
void EmitScaleUpdate(StepWriter& w, NameAllocator& names, const TrainingOptions& options,
                     const Scaling& scaling, const Window& window, const std::string& found) {
  const std::vector<std::string> state = {kScale, kGrowthTracker, kHysteresisLeft};
  std::vector<std::string> updated;
  for (const std::string& item : state) {
    updated.push_back(window.end.empty() ? NextName(item) : names.Fresh(item + ".updated"));
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

// 7. The counters: a window that ends with a non-finite gradient or loss is one skipped step.
void EmitCounters(StepWriter& w, const Window& window, const std::string& failed) {
  auto at_end = [&](const std::string& flag, const std::string& hint) {
    return window.end.empty() ? flag : w.Op("And", {window.end, flag}, hint);
  };
  auto count = [&](const std::string& flag, const std::string& hint) {
    return w.Op("Cast", {flag}, hint, {MakeAttribute("to", int64_t{kInt64})});
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

// The learning rate of each parameter: ampc.lr, or one Mul(ampc.lr, lr_scale) per distinct
// lr_scale other than 1, which the parameters of that scale share.
std::vector<std::string> GroupLearningRates(StepWriter& w, const std::vector<ParamGroup>& groups) {
  std::vector<std::string> lrs;
  std::map<float, std::string> scaled;
  for (const ParamGroup& group : groups) {
    if (group.lr_scale == 1.0f) {
      lrs.push_back(kLearningRate);
      continue;
    }
    auto [at, added] = scaled.try_emplace(group.lr_scale);
    if (added) at->second = w.Op("Mul", {kLearningRate, w.Float(group.lr_scale)}, "ampc.lr.scaled");
    lrs.push_back(at->second);
  }
  return lrs;
}

// What ampc train reads from the model's metadata: ampc.lr always, ampc.lr_schedule and
// ampc.max_consecutive_skips when --train-config set them, ampc.accumulate when K > 1.
void RecordTrainerSettings(onnx::ModelProto& model, const TrainingOptions& options) {
  auto record = [&](const std::string& key, const std::string& value) {
    onnx::StringStringEntryProto& entry = *model.add_metadata_props();
    entry.set_key(key);
    entry.set_value(value);
  };
  record(kLearningRate, absl::StrCat(options.lr));
  if (!options.lr_schedule.empty()) record("ampc.lr_schedule", options.lr_schedule);
  if (options.max_consecutive_skips > 0) {
    record("ampc.max_consecutive_skips", absl::StrCat(options.max_consecutive_skips));
  }
  if (options.accumulate > 1) record(kAccumulateKey, absl::StrCat(options.accumulate));
}

// Initializers of the forward that the step's forward copy updates: the running statistics of a
// BatchNormalization the autodiff put in training mode (its outputs 1 and 2). Each new value is
// named `<state>.ampc.next`. Returns the initializers, in node order.
std::vector<std::string> ForwardStateUpdates(onnx::GraphProto& step, const GraphIndex& forward,
                                             NameAllocator& names, StepWriter& w) {
  std::vector<std::string> updated;
  for (int i = 0; i < forward.graph().node_size(); ++i) {
    onnx::NodeProto& node = *step.mutable_node(i);
    if (node.op_type() != "BatchNormalization" || node.output_size() < 3) continue;
    for (int slot = 1; slot <= 2; ++slot) {
      const std::string& state = node.input(slot + 2);
      if (node.output(slot).empty() || forward.Initializer(state) == nullptr) continue;
      names.Reserve(NextName(state));
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

absl::Status CheckLoss(const GraphIndex& index, const std::string& loss) {
  const onnx::TypeProto* type = index.Type(loss);
  if (index.Source(loss) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--loss=", loss, ": no such value in the graph"));
  }
  if (type == nullptr || !type->has_tensor_type() || type->tensor_type().elem_type() != kFloat) {
    return absl::InvalidArgumentError(absl::StrCat("--loss=", loss, ": the loss must be FP32"));
  }
  // The step's flags and counters take the loss's shape: it must be rank 0, not [1].
  const auto& shape = type->tensor_type().shape();
  if (!type->tensor_type().has_shape() || shape.dim_size() != 0) {
    std::vector<std::string> dims;
    for (const auto& dim : shape.dim()) {
      dims.push_back(dim.has_dim_value() ? absl::StrCat(dim.dim_value()) : "?");
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "--loss=", loss, ": the loss must be a scalar (rank 0), not ",
        type->tensor_type().has_shape() ? absl::StrCat("[", absl::StrJoin(dims, ", "), "]")
                                        : "of unknown shape",
        "; reduce it (ReduceMean) or Reshape it to []"));
  }
  return absl::OkStatus();
}

// ai.ampc.SGD has a momentum buffer exactly when momentum != 0, and IR 8 gives the op one
// model-local function: one step cannot mix SGD with momentum and without.
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

// Model-local functions for the ai.ampc ops of `algorithm` that have a body (a warning for each
// that has none yet). Some bodies follow what a node states (auto_pad, a loss's reduction): every
// node of an op must get the first one's body, since IR 8 allows one function per op name. With
// BF16 convolutions the convolution gradients' bodies compute in FP32 (GradientFunctionBody).
absl::Status AddFunctions(onnx::ModelProto& model, const onnx::GraphProto& algorithm, int low_dtype,
                          std::vector<std::string>& warnings) {
  // BF16 convolutions: compiled for BF16, or ai.ampc versions already in the input.
  bool bf16 = low_dtype == onnx::TensorProto::BFLOAT16;
  for (const onnx::NodeProto& node : algorithm.node()) bf16 = bf16 || IsAmpcVersion(node);
  absl::flat_hash_map<std::string, std::pair<std::string, std::string>> done;  // name, body
  // The bodies import the model's opset (upgrade-opset made it 17 or more): the checker wants a
  // function's imports compatible with the model's.
  const int opset = CastOpset(OpsetsOf(model));
  for (const onnx::NodeProto& node : algorithm.node()) {
    // The ai.ampc versions of forward ops got theirs from insert-casts.
    if (node.domain() != kAmpcDomain || IsAmpcVersion(node)) continue;
    absl::StatusOr<onnx::FunctionProto> body =
        AmpcFunctionBody(node.op_type(), node.input_size(), node.output_size(), opset);
    if (absl::IsNotFound(body.status())) body = GradientFunctionBody(node, opset, bf16);
    if (absl::IsNotFound(body.status())) {
      if (done.emplace(node.op_type(), std::make_pair(node.name(), "")).second)
        warnings.push_back(absl::StrCat("ai.ampc.", node.op_type(), " has no function body yet"));
      continue;
    }
    if (!body.ok()) return body.status();
    const std::string serialized = body->SerializeAsString();
    auto [it, first] = done.emplace(node.op_type(), std::make_pair(node.name(), serialized));
    if (first) {
      *model.add_functions() = *std::move(body);
    } else if (it->second.second != serialized) {
      return absl::InvalidArgumentError(
          absl::StrCat("node '", node.name(), "' (ai.ampc.", node.op_type(),
                       ") needs another function body "
                       "than node '",
                       it->second.first,
                       "' (different auto_pad or reduction?); one "
                       "model-local function serves every node of an op"));
    }
  }
  return absl::OkStatus();
}

// The step's MaxPoolGrad reads a MaxPool's indices: an ai.ampc.MaxPool states them in the model
// too, so the model and the step call its one model-local function with one arity.
void StateMaxPoolIndices(onnx::GraphProto& graph, NameAllocator& names) {
  for (onnx::NodeProto& node : *graph.mutable_node()) {
    if (IsAmpcVersion(node) && node.op_type() == "MaxPool" && node.output_size() == 1) {
      node.add_output(names.Fresh(absl::StrCat(node.output(0), ".indices")));
    }
  }
}

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

}  // namespace

absl::Status AssembleTrainingStep(onnx::ModelProto& model, const TrainingOptions& options,
                                  int low_dtype, std::vector<std::string>& warnings) {
  if (model.training_info_size() > 0) {
    return absl::InvalidArgumentError("the model already has training_info");
  }
  const onnx::GraphProto& graph = model.graph();
  absl::StatusOr<std::unique_ptr<GraphIndex>> index = GraphIndex::Build(graph);
  if (!index.ok()) return index.status();
  if (absl::Status s = CheckLoss(**index, options.loss); !s.ok()) return s;
  absl::StatusOr<std::vector<std::string>> params =
      TrainableParameters(**index, options.loss, options.freeze);
  if (!params.ok()) return params.status();
  if (params->empty()) return absl::InvalidArgumentError("no trainable parameters reach the loss");
  if (std::string warning = ScalarParametersWarning(**index, *params); !warning.empty()) {
    warnings.push_back(std::move(warning));
  }
  absl::StatusOr<std::vector<ParamGroup>> groups = ResolveParamGroups(options, *params);
  if (!groups.ok()) return groups.status();
  if (absl::Status s = CheckOneSgdForm(*groups); !s.ok()) return s;

  // State items: the optimizer's moments, then the scaler state and counters.
  const Scaling scaling = ScalingOf(options, low_dtype);
  std::vector<StateItem> state;
  absl::flat_hash_set<std::string> initializers;
  for (const onnx::TensorProto& t : graph.initializer()) initializers.insert(t.name());
  for (size_t i = 0; i < params->size(); ++i) {
    const std::string& p = (*params)[i];
    const onnx::TypeProto* type = (*index)->Type(p);
    std::vector<int64_t> dims;
    for (const auto& dim : type->tensor_type().shape().dim()) dims.push_back(dim.dim_value());
    if (type->tensor_type().elem_type() != kFloat) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", p, "' is not FP32"));
    }
    for (const std::string& moment : MomentNames((*groups)[i], p))
      state.push_back({moment, kFloat, dims});
    if (options.accumulate > 1) state.push_back({AccumulatorName(p), kFloat, dims});
  }
  state.push_back({kScale, kFloat, {}, scaling.init_scale});
  state.push_back({kGrowthTracker, kInt64, {}, 0});
  state.push_back({kHysteresisLeft, kInt64, {}, static_cast<double>(options.hysteresis)});
  for (const char* counter : {kStep, kSkippedSteps, kConsecutiveSkips, kNonfiniteLossSteps}) {
    state.push_back({counter, kInt64, {}, 0});
  }
  if (options.accumulate > 1) {
    state.push_back({kMicroStep, kInt64, {}, 0});
    state.push_back({kWindowLossBad, kBool, {}, 0});
  }
  NameAllocator names(model);
  for (const StateItem& item : state) {
    for (const std::string& name : {item.name, NextName(item.name)}) {
      if (names.Contains(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat("the model already uses the name '", name, "' that training state needs"));
      }
      names.Reserve(name);
    }
  }
  for (const std::string& p : *params) names.Reserve(NextName(p));
  StateMaxPoolIndices(*model.mutable_graph(), names);
  for (const char* name : {kLearningRate, kApplied, kGradNorm}) names.Reserve(name);

  onnx::TrainingInfoProto& info = *model.add_training_info();
  *info.mutable_initialization() = BuildInitialization(state);
  onnx::GraphProto& step = *info.mutable_algorithm();
  step.set_name("ampc_training_step");
  for (const onnx::ValueInfoProto& input : graph.input()) {
    if (!initializers.contains(input.name())) *step.add_input() = input;
  }
  *step.add_input() = TensorValue(kLearningRate, kFloat, {});
  *step.mutable_node() = graph.node();

  // 1. loss check; 2. backward seeded with d(loss * scale / K)/d(loss) = scale / K: the window's
  // sum of gradients is the gradient of its mean loss.
  StepWriter w(step, names);
  const std::string nan = w.Op("IsNaN", {options.loss}, "ampc.loss_nan");
  const std::string inf = w.Op("IsInf", {options.loss}, "ampc.loss_inf");
  const std::string loss_bad = w.Op("Or", {nan, inf}, "ampc.loss_bad");
  const std::string seed =
      options.accumulate == 1
          ? std::string(kScale)
          : w.Op("Div", {kScale, w.Float(static_cast<float>(options.accumulate))}, "ampc.seed");
  absl::StatusOr<std::vector<std::string>> grads =
      AppendGradients(step, **index, {options.loss, seed, *params}, names);
  if (!grads.ok()) return grads.status();

  const std::vector<std::string> forward_state = ForwardStateUpdates(step, **index, names, w);
  const Window window = EmitAccumulation(w, options.accumulate, *params, *grads, loss_bad);

  // 3.-5. finite check, scale update, unscale and clip.
  const std::string found = names.Fresh("ampc.found");
  w.Node("CheckFinite", window.grads, {found}, {}, kAmpcDomain);
  EmitScaleUpdate(w, names, options, scaling, window, found);
  std::vector<std::string> unscaled;
  for (const std::string& p : *params) unscaled.push_back(names.Fresh(p + ".ampc.grad"));
  const std::string norm = names.Fresh("ampc.norm");
  std::vector<std::string> clip_inputs = {kScale};
  clip_inputs.insert(clip_inputs.end(), window.grads.begin(), window.grads.end());
  std::vector<std::string> clip_outputs = unscaled;
  clip_outputs.push_back(norm);
  w.Node("UnscaleClip", clip_inputs, clip_outputs,
         {MakeAttribute("max_norm", options.clip_grad_norm)}, kAmpcDomain);

  // 6. skip (also inside an accumulation window), the optimizer nodes; 7. counters.
  const std::string failed =
      w.Op("Or", {found, window.loss_bad}, window.end.empty() ? "ampc.skip" : "ampc.failed");
  const std::string skip =
      window.end.empty()
          ? failed
          : w.Op("Or", {w.Op("Not", {window.end}, "ampc.mid_window"), failed}, "ampc.skip");
  w.Node("Not", {skip}, {kApplied});
  w.Node("Where", {skip, w.Float(0.0f), norm}, {kGradNorm});
  const std::string first = w.Op("Equal", {kStep, w.Int(0)}, "ampc.first");
  const std::string step_after = w.Op("Add", {kStep, w.Int(1)}, "ampc.step_after");
  const std::vector<std::string> lrs = GroupLearningRates(w, *groups);
  for (size_t i = 0; i < params->size(); ++i) {
    EmitOptimizer(w, (*groups)[i], (*params)[i], unscaled[i], lrs[i], skip, first, step_after);
  }
  EmitCounters(w, window, failed);

  // Outputs and update_binding: parameters, then the state items in initialization order.
  *step.add_output() = TensorValue(options.loss, kFloat, {});
  *step.add_output() = TensorValue(kApplied, kBool, {});
  *step.add_output() = TensorValue(kGradNorm, kFloat, {});
  auto bind = [&](const std::string& name, int elem_type, const std::vector<int64_t>& dims) {
    *step.add_output() = TensorValue(NextName(name), elem_type, dims);
    onnx::StringStringEntryProto& binding = *info.add_update_binding();
    binding.set_key(name);
    binding.set_value(NextName(name));
  };
  for (const std::string& p : *params) {
    std::vector<int64_t> dims;
    for (const auto& dim : (*index)->Type(p)->tensor_type().shape().dim())
      dims.push_back(dim.dim_value());
    bind(p, kFloat, dims);
  }
  for (const std::string& name : forward_state) {
    const onnx::TensorProto& tensor = *(*index)->Initializer(name);
    bind(name, tensor.data_type(), {tensor.dims().begin(), tensor.dims().end()});
  }
  for (const StateItem& item : state) bind(item.name, item.elem_type, item.dims);

  bool has_ampc = false;
  for (const auto& opset : model.opset_import())
    has_ampc = has_ampc || opset.domain() == kAmpcDomain;
  if (!has_ampc) {
    onnx::OperatorSetIdProto& opset = *model.add_opset_import();
    opset.set_domain(kAmpcDomain);
    opset.set_version(kAmpcOpsetVersion);
  }
  RecordTrainerSettings(model, options);
  if (absl::Status s = AddAmpcVersionFunctions(model); !s.ok()) return s;
  return AddFunctions(model, step, low_dtype, warnings);
}

absl::StatusOr<bool> TrainingStep::Run(ModelContext& context) {
  if (!context.training.enabled) return false;
  std::vector<std::string> warnings;
  absl::Status status =
      AssembleTrainingStep(context.model, context.training, context.autocast.low_dtype, warnings);
  for (std::string& warning : warnings)
    context.Warn(absl::StrCat(context.file, ": warning: ", warning));
  if (!status.ok())
    return absl::InvalidArgumentError(absl::StrCat(context.file, ": ", status.message()));
  return true;
}

}  // namespace ampc
