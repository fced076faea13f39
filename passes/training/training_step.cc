#include "passes/training/training_step.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "passes/float_support.h"
#include "passes/graph/graph_index.h"
#include "passes/graph/name_allocator.h"
#include "passes/graph/status_macros.h"
#include "passes/opset/gradient_ops.h"
#include "passes/opset/standard_op_versions.h"
#include "passes/opset/training_ops.h"
#include "passes/training/gradients.h"
#include "passes/training/loss_check.h"
#include "passes/training/loss_scaling.h"
#include "passes/training/optimizer.h"
#include "passes/training/param_groups.h"
#include "passes/training/step_writer.h"
#include "passes/training/training_state.h"

namespace ampc {
namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kBool = onnx::TensorProto::BOOL;

// What the step trains and keeps, decided before any node is written.
struct StepPlan {
  std::vector<std::string> params;
  std::vector<ParamGroup> groups;  // one per parameter
  Scaling scaling;
  std::vector<StateItem> state;  // besides the parameters, in initialization order
};

absl::StatusOr<StepPlan> PlanStep(const GraphIndex& forward, const TrainingOptions& options,
                                  int low_dtype, std::vector<std::string>& warnings) {
  AMPC_RETURN_IF_ERROR(CheckLoss(forward, options.loss));
  StepPlan plan;
  AMPC_ASSIGN_OR_RETURN(plan.params, StepParameters(forward, options, warnings));
  AMPC_ASSIGN_OR_RETURN(plan.groups, ResolveParamGroups(options, plan.params));
  AMPC_RETURN_IF_ERROR(CheckOneSgdForm(plan.groups));
  plan.scaling = ScalingOf(options, low_dtype);
  AMPC_ASSIGN_OR_RETURN(
      plan.state, StepState(forward, plan.params, plan.groups, options, plan.scaling.init_scale));
  return plan;
}

// The algorithm's inputs (the forward's data inputs and ampc.lr) and its forward copy.
void StartAlgorithm(const onnx::GraphProto& graph, onnx::GraphProto& step) {
  absl::flat_hash_set<std::string> initializers;
  for (const onnx::TensorProto& t : graph.initializer()) initializers.insert(t.name());
  step.set_name("ampc_training_step");
  for (const onnx::ValueInfoProto& input : graph.input()) {
    if (!initializers.contains(input.name())) *step.add_input() = input;
  }
  *step.add_input() = TensorValue(kLrInput, kFloat, {});
  *step.mutable_node() = graph.node();
}

// The step's nodes after the forward copy, in the order of docs/training-design.md, "The step".
// Returns the forward state it updates (ForwardStateUpdates).
absl::StatusOr<std::vector<std::string>> EmitStep(onnx::GraphProto& step, const GraphIndex& forward,
                                                  const TrainingOptions& options,
                                                  const StepPlan& plan, NameAllocator& names) {
  StepWriter w(step, names);
  const std::string loss_bad = EmitLossCheck(w, options.loss);
  AMPC_ASSIGN_OR_RETURN(const std::vector<std::string> grads,
                        EmitBackward(w, step, forward, options, plan.params));
  AMPC_ASSIGN_OR_RETURN(std::vector<std::string> forward_state,
                        ForwardStateUpdates(w, step, forward));
  const Window window = EmitAccumulation(w, options.accumulate, plan.params, grads, loss_bad);
  const Unscaled unscaled = EmitCheckAndUnscale(w, options, plan.scaling, window, plan.params);
  const Skip skip = EmitSkip(w, window, unscaled);
  EmitOptimizers(w, plan.groups, plan.params, unscaled.grads, skip.skip);
  EmitCounters(w, window, skip.failed);
  return forward_state;
}

// Outputs and update_binding: the loss, ampc.applied and ampc.grad_norm; then parameters, the
// forward state, and the state items in initialization order.
void BindState(onnx::TrainingInfoProto& info, const GraphIndex& forward,
               const TrainingOptions& options, const StepPlan& plan,
               const std::vector<std::string>& forward_state) {
  onnx::GraphProto& step = *info.mutable_algorithm();
  *step.add_output() = TensorValue(options.loss, kFloat, {});
  *step.add_output() = TensorValue(kApplied, kBool, {});
  *step.add_output() = TensorValue(kGradNorm, kFloat, {});
  auto bind = [&](const std::string& name, int elem_type, const std::vector<int64_t>& dims) {
    *step.add_output() = TensorValue(NextName(name), elem_type, dims);
    onnx::StringStringEntryProto& binding = *info.add_update_binding();
    binding.set_key(name);
    binding.set_value(NextName(name));
  };
  for (const std::string& p : plan.params) bind(p, kFloat, StaticDims(*forward.Type(p)));
  for (const std::string& name : forward_state) {
    const onnx::TensorProto& tensor = *forward.Initializer(name);
    bind(name, tensor.data_type(), {tensor.dims().begin(), tensor.dims().end()});
  }
  for (const StateItem& item : plan.state) bind(item.name, item.elem_type, item.dims);
}

void ImportAmpcOpset(onnx::ModelProto& model) {
  for (const auto& opset : model.opset_import()) {
    if (opset.domain() == kAmpcDomain) return;
  }
  onnx::OperatorSetIdProto& opset = *model.add_opset_import();
  opset.set_domain(kAmpcDomain);
  opset.set_version(kAmpcOpsetVersion);
}

// What ampc train reads from the model's metadata: ampc.lr always, ampc.lr_schedule and
// ampc.max_consecutive_skips when --train-config set them, ampc.accumulate when K > 1.
void RecordTrainerSettings(onnx::ModelProto& model, const TrainingOptions& options) {
  auto record = [&](const std::string& key, const std::string& value) {
    onnx::StringStringEntryProto& entry = *model.add_metadata_props();
    entry.set_key(key);
    entry.set_value(value);
  };
  record(kLrKey, absl::StrCat(options.lr));
  if (!options.lr_schedule.empty()) record(kLrScheduleKey, options.lr_schedule);
  if (options.max_consecutive_skips > 0) {
    record(kMaxConsecutiveSkipsKey, absl::StrCat(options.max_consecutive_skips));
  }
  if (options.accumulate > 1) record(kAccumulateKey, absl::StrCat(options.accumulate));
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

}  // namespace

absl::Status AssembleTrainingStep(onnx::ModelProto& model, const TrainingOptions& options,
                                  int low_dtype, std::vector<std::string>& warnings) {
  if (model.training_info_size() > 0) {
    return absl::InvalidArgumentError("the model already has training_info");
  }
  AMPC_ASSIGN_OR_RETURN(const std::unique_ptr<GraphIndex> forward,
                        GraphIndex::Build(model.graph()));
  AMPC_ASSIGN_OR_RETURN(const StepPlan plan, PlanStep(*forward, options, low_dtype, warnings));
  NameAllocator names(model);
  AMPC_RETURN_IF_ERROR(ReserveStateNames(plan.state, plan.params, names));
  StateMaxPoolIndices(*model.mutable_graph(), names);
  for (const char* name : {kLrInput, kApplied, kGradNorm}) names.Reserve(name);

  onnx::TrainingInfoProto& info = *model.add_training_info();
  *info.mutable_initialization() = BuildInitialization(plan.state);
  StartAlgorithm(model.graph(), *info.mutable_algorithm());
  AMPC_ASSIGN_OR_RETURN(const std::vector<std::string> forward_state,
                        EmitStep(*info.mutable_algorithm(), *forward, options, plan, names));
  BindState(info, *forward, options, plan, forward_state);
  ImportAmpcOpset(model);
  RecordTrainerSettings(model, options);
  AMPC_RETURN_IF_ERROR(AddAmpcVersionFunctions(model));
  return AddFunctions(model, info.algorithm(), low_dtype, warnings);
}

absl::StatusOr<PassResult> TrainingStep::Run(ModelContext& context) {
  if (!options_.enabled) return false;
  TrainingOptions options = options_;
  if (!context.loss.empty()) options.loss = context.loss;
  std::vector<std::string> warnings;
  absl::Status status = AssembleTrainingStep(context.model, options, low_dtype_, warnings);
  for (std::string& warning : warnings) context.Warn(std::move(warning));
  if (!status.ok())
    return absl::InvalidArgumentError(absl::StrCat(context.file, ": ", status.message()));
  return true;
}

}  // namespace ampc
