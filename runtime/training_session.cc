#include "runtime/training_session.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <exception>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "passes/graph/function_calls.h"
#include "passes/graph/status_macros.h"
#include "passes/opset/training_ops.h"
#include "passes/training/training_state.h"
#include "runtime/core/tensor_proto.h"
#include "runtime/learning_rate.h"
#include "runtime/optimizer_fusion.h"

namespace ampc {
namespace {

onnx::ValueInfoProto ValueInfoOf(const std::string& name, const Tensor& tensor) {
  onnx::ValueInfoProto value;
  value.set_name(name);
  auto* type = value.mutable_type()->mutable_tensor_type();
  type->set_elem_type(static_cast<int>(tensor.dtype()));
  auto* shape = type->mutable_shape();
  for (int64_t d : tensor.shape()) shape->add_dim()->set_dim_value(d);
  return value;
}

// Shape inference of `graph` as a graph of `model` (its opsets and functions), where the values
// in `outer` it reads but does not define are visible with their types. Returns the graph with
// the inferred value_info.
absl::StatusOr<onnx::GraphProto> InferGraph(
    const onnx::ModelProto& model, const onnx::GraphProto& graph,
    const absl::flat_hash_map<std::string, onnx::ValueInfoProto>& outer) {
  onnx::ModelProto scratch;
  scratch.set_ir_version(model.ir_version());
  *scratch.mutable_opset_import() = model.opset_import();
  *scratch.mutable_functions() = model.functions();
  *scratch.mutable_graph() = graph;
  const int declared_inputs = graph.input_size();
  for (const std::string& name : FreeVariables(graph)) {
    auto it = outer.find(name);
    if (it != outer.end()) *scratch.mutable_graph()->add_input() = it->second;
  }
  try {
    onnx::ShapeInferenceOptions options{/*check_type=*/false, /*error_mode=*/0,
                                        /*enable_data_propagation=*/false};
    onnx::shape_inference::InferShapes(scratch, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("graph '", graph.name(), "': shape inference failed: ", e.what()));
  }
  onnx::GraphProto* inferred = scratch.mutable_graph();
  inferred->mutable_input()->DeleteSubrange(declared_inputs,
                                            inferred->input_size() - declared_inputs);
  return std::move(*inferred);
}

// A value read back as a scalar: its tensor and its name (for errors).
struct NamedScalar {
  const Tensor* tensor;
  std::string name;
};

// Why `tensor` cannot be read as a scalar (loss, scale and counters are), or OK.
absl::Status CheckScalar(const Tensor& tensor, const std::string& name) {
  if (tensor.size() < 1) return absl::InvalidArgumentError(absl::StrCat("'", name, "' is empty"));
  if (!Dispatch<AMPC_ALL_TYPES>(tensor.dtype(), []<typename T>() {})) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is ", tensor.TypeString(), ", not a number"));
  }
  return absl::OkStatus();
}

// The first element of each value as a double, copied to the host with one wait.
absl::StatusOr<std::vector<double>> ScalarValues(Backend& backend,
                                                 const std::vector<NamedScalar>& values) {
  std::vector<Tensor> hosts;
  std::vector<const Tensor*> sources;
  std::vector<void*> targets;
  for (const NamedScalar& v : values) {
    AMPC_RETURN_IF_ERROR(CheckScalar(*v.tensor, v.name));
    hosts.push_back(Tensor::Host(v.tensor->dtype(), v.tensor->shape()));
    sources.push_back(v.tensor);
    targets.push_back(hosts.back().raw());
  }
  AMPC_RETURN_IF_ERROR(backend.CopyAllToHost(sources, targets));
  std::vector<double> scalars;
  for (const Tensor& host : hosts) {
    Dispatch<AMPC_ALL_TYPES>(host.dtype(), [&]<typename T>() {
      scalars.push_back(static_cast<double>(Compute<T>::Load(host.data<T>()[0])));
    });
  }
  return scalars;
}

}  // namespace

TrainingSession::~TrainingSession() = default;

absl::StatusOr<std::unique_ptr<TrainingSession>> TrainingSession::Create(
    onnx::ModelProto model, const KernelRegistry& registry, Backend& backend) {
  RegisterAmpcSchemas();  // shape inference of the algorithm meets ai.ampc ops
  std::unique_ptr<TrainingSession> session(new TrainingSession(backend));
  AMPC_RETURN_IF_ERROR(session->Init(std::move(model), registry));
  return session;
}

absl::Status TrainingSession::Init(onnx::ModelProto model, const KernelRegistry& registry) {
  if (model.training_info_size() == 0) {
    return absl::InvalidArgumentError(
        "the model has no training_info (compile it with ampc --train)");
  }
  AMPC_RETURN_IF_ERROR(CheckFunctionExpansion(model));  // inference would expand forever
  const onnx::TrainingInfoProto& info = model.training_info(0);
  if (!info.has_initialization()) {
    return absl::InvalidArgumentError("training_info[0] has no initialization graph");
  }
  if (!info.has_algorithm() || info.algorithm().node_size() == 0) {
    return absl::InvalidArgumentError("training_info[0] has no algorithm graph");
  }
  if (info.update_binding_size() == 0) {
    return absl::InvalidArgumentError("training_info[0] has no update_binding");
  }
  ExecutorEnv env{registry, backend_, {}};
  for (const onnx::OperatorSetIdProto& opset : model.opset_import()) {
    env.opsets[opset.domain() == "ai.onnx" ? "" : opset.domain()] =
        static_cast<int>(opset.version());
  }
  registry_ = &registry;
  opsets_ = env.opsets;
  // The state vector never grows after this, so executors may keep pointers into it.
  state_.reserve(model.graph().initializer_size() + info.initialization().output_size());
  for (const onnx::TensorProto& init : model.graph().initializer()) {
    AMPC_ASSIGN_OR_RETURN(Tensor host, TensorFromProto(init));
    AMPC_ASSIGN_OR_RETURN(Tensor tensor, OnBackend(host, backend_));
    state_index_[init.name()] = static_cast<int>(state_.size());
    state_names_.push_back(init.name());
    state_.push_back(std::move(tensor));
  }
  num_parameters_ = static_cast<int>(state_.size());
  AMPC_RETURN_IF_ERROR(RunInitialization(model, env));
  AMPC_RETURN_IF_ERROR(BuildAlgorithm(model, env));
  AMPC_RETURN_IF_ERROR(BuildEvaluation(model, env));
  spare_.resize(state_.size());
  saved_form_ = std::move(model);
  saved_form_.mutable_graph()->clear_initializer();
  saved_form_.mutable_training_info(0)->mutable_initialization()->clear_node();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor*>> TrainingSession::OuterValues(const GraphExecutor& executor,
                                                                  const std::string& graph_name) {
  std::vector<Tensor*> outer;
  for (const std::string& name : executor.free_variables()) {
    auto it = state_index_.find(name);
    if (it == state_index_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(graph_name, " reads '", name,
                       "', which is neither a graph initializer nor an initialization output"));
    }
    outer.push_back(&state_[it->second]);
  }
  return outer;
}

absl::Status TrainingSession::RunInitialization(const onnx::ModelProto& model,
                                                const ExecutorEnv& env) {
  absl::flat_hash_map<std::string, onnx::ValueInfoProto> outer;
  TypeMap outer_types;
  for (int i = 0; i < num_parameters_; ++i) {
    outer[state_names_[i]] = ValueInfoOf(state_names_[i], state_[i]);
    outer_types[state_names_[i]] = state_[i].dtype();
  }
  AMPC_ASSIGN_OR_RETURN(onnx::GraphProto graph,
                        InferGraph(model, model.training_info(0).initialization(), outer));
  if (graph.input_size() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the initialization graph has an input ('", graph.input(0).name(), "')"));
  }
  AMPC_ASSIGN_OR_RETURN(std::unique_ptr<GraphExecutor> executor,
                        GraphExecutor::Create(graph, env, outer_types));
  AMPC_ASSIGN_OR_RETURN(std::vector<Tensor*> reads,
                        OuterValues(*executor, "the initialization graph"));
  AMPC_ASSIGN_OR_RETURN(std::vector<Tensor> values, executor->Run({}, reads));
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string& name = executor->output_names()[i];
    if (!state_index_.try_emplace(name, static_cast<int>(state_.size())).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("initialization output '", name, "' has the name of a graph initializer"));
    }
    state_names_.push_back(name);
    // On the backend, even a value the host computed (integer shape arithmetic, a constant).
    AMPC_ASSIGN_OR_RETURN(Tensor value, InHostMemory(values[i]) && backend_.name() != "cpu"
                                            ? OnBackend(values[i], backend_)
                                            : values[i]);
    state_.push_back(std::move(value));
  }
  return absl::OkStatus();
}

absl::Status TrainingSession::BuildAlgorithm(const onnx::ModelProto& model,
                                             const ExecutorEnv& env) {
  absl::flat_hash_map<std::string, onnx::ValueInfoProto> outer;
  TypeMap outer_types;
  for (size_t i = 0; i < state_.size(); ++i) {
    outer[state_names_[i]] = ValueInfoOf(state_names_[i], state_[i]);
    outer_types[state_names_[i]] = state_[i].dtype();
  }
  const onnx::TrainingInfoProto& info = model.training_info(0);
  AMPC_ASSIGN_OR_RETURN(algorithm_graph_, InferGraph(model, info.algorithm(), outer));
  executed_algorithm_ = algorithm_graph_;
  FuseOptimizers(executed_algorithm_);        // one multi-tensor update, not one node per parameter
  FuseCheckUnscaleClip(executed_algorithm_);  // one pass over the gradients, not two
  auto step = state_index_.find(kStep);
  if (step != state_index_.end() && state_[step->second].dtype() == DType::kInt64 &&
      state_[step->second].size() == 1) {
    InsertLearningRateNode(executed_algorithm_);  // a schedule needs no read-back of ampc.step
  }
  const onnx::GraphProto& graph = executed_algorithm_;
  AMPC_ASSIGN_OR_RETURN(algorithm_, GraphExecutor::Create(graph, env, outer_types));
  AMPC_ASSIGN_OR_RETURN(algorithm_outer_, OuterValues(*algorithm_, "the algorithm"));
  for (const onnx::ValueInfoProto& input : graph.input()) {
    algorithm_inputs_.push_back(SpecOf(input));
    if (input.name() != kLrInput && input.name() != kScheduleInput) {
      data_inputs_.push_back(SpecOf(input));
    }
  }
  AMPC_ASSIGN_OR_RETURN(const absl::flat_hash_set<std::string> bound, BindUpdates(info));
  return FindStepOutputs(bound);
}

absl::StatusOr<absl::flat_hash_set<std::string>> TrainingSession::BindUpdates(
    const onnx::TrainingInfoProto& info) {
  absl::flat_hash_map<std::string, int> output_index;
  const std::vector<std::string>& outputs = algorithm_->output_names();
  for (size_t i = 0; i < outputs.size(); ++i) output_index[outputs[i]] = static_cast<int>(i);
  absl::flat_hash_set<std::string> bound;
  for (const onnx::StringStringEntryProto& binding : info.update_binding()) {
    auto state = state_index_.find(binding.key());
    if (state == state_index_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("update_binding '", binding.key(), "' <- '", binding.value(), "': '",
                       binding.key(), "' is not a graph initializer or initialization output"));
    }
    auto output = output_index.find(binding.value());
    if (output == output_index.end()) {
      return absl::InvalidArgumentError(absl::StrCat("update_binding '", binding.key(), "' <- '",
                                                     binding.value(), "': '", binding.value(),
                                                     "' is not an output of the algorithm"));
    }
    bindings_.emplace_back(state->second, output->second);
    bound.insert(binding.value());
  }
  return bound;
}

absl::Status TrainingSession::FindStepOutputs(const absl::flat_hash_set<std::string>& bound) {
  const std::vector<std::string>& outputs = algorithm_->output_names();
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i] == kApplied) {
      applied_.index = static_cast<int>(i);
    } else if (outputs[i] == kGradNorm) {
      norm_.index = static_cast<int>(i);
    } else if (outputs[i] == kLrInput) {
      lr_.index = static_cast<int>(i);
    } else if (loss_.index < 0 && !bound.contains(outputs[i])) {
      loss_.index = static_cast<int>(i);
      loss_name_ = outputs[i];
    }
  }
  if (loss_.index < 0) {
    return absl::InvalidArgumentError(
        "the algorithm has no loss output (an output that is not in update_binding)");
  }
  return absl::OkStatus();
}

absl::Status TrainingSession::BuildEvaluation(const onnx::ModelProto& model,
                                              const ExecutorEnv& env) {
  // The inference graph reads the parameters as values of an enclosing scope (the state)
  // instead of as its own initializers, so it always sees the current ones without a rebuild.
  AMPC_ASSIGN_OR_RETURN(inference_graph_, InferGraph(model, model.graph(), {}));
  onnx::GraphProto& graph = inference_graph_;
  graph.clear_initializer();
  TypeMap outer_types;
  for (size_t i = 0; i < state_.size(); ++i) outer_types[state_names_[i]] = state_[i].dtype();
  onnx::GraphProto inputs_only;  // graph inputs that name a parameter are its defaults: drop them
  for (const onnx::ValueInfoProto& input : graph.input()) {
    if (!state_index_.contains(input.name())) *inputs_only.add_input() = input;
  }
  graph.mutable_input()->Swap(inputs_only.mutable_input());
  AMPC_ASSIGN_OR_RETURN(inference_, GraphExecutor::Create(graph, env, outer_types));
  AMPC_ASSIGN_OR_RETURN(inference_outer_, OuterValues(*inference_, "the inference graph"));
  for (const onnx::ValueInfoProto& input : graph.input()) eval_inputs_.push_back(SpecOf(input));
  for (const onnx::ValueInfoProto& output : graph.output()) {
    eval_outputs_.push_back(SpecOf(output));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> TrainingSession::Feed(const ValueSpec& spec, const Tensor& tensor) const {
  AMPC_RETURN_IF_ERROR(CheckInput(spec, tensor));
  if (InHostMemory(tensor)) return tensor;  // the executor uploads it where a kernel needs it
  return OnBackend(tensor, backend_);
}

absl::StatusOr<std::vector<Tensor>> TrainingSession::AlgorithmFeeds(const NamedTensors& inputs,
                                                                    const Tensor& rate) const {
  std::vector<Tensor> feeds;
  for (const ValueSpec& spec : algorithm_inputs_) {
    if (spec.name == kLrInput || spec.name == kScheduleInput) {
      // FindNonFinite's graph, the model's, takes the float scalar where the executed one takes
      // words; a declared rate of rank 1 (unrewritten) takes it as [1].
      feeds.push_back(spec.name == kLrInput ? rate.Reshaped(Shape(spec.dims.size(), 1)) : rate);
      continue;
    }
    auto it = inputs.find(spec.name);
    if (it == inputs.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("algorithm input '", spec.name, "' is missing"));
    }
    AMPC_ASSIGN_OR_RETURN(Tensor fed, Feed(spec, it->second));
    feeds.push_back(std::move(fed));
  }
  return feeds;
}

absl::StatusOr<Tensor> TrainingSession::RateFeed(const ScheduledRate& rate) const {
  if (lr_.index >= 0) {  // the LearningRate node evaluates the schedule on the backend
    Tensor words = Tensor::Host(DType::kDouble, {kRateWords});
    EncodeLearningRate(rate.schedule, rate.base, words.data<double>());
    return words;
  }
  double lr = rate.base;
  if (rate.schedule.type != LrSchedule::Type::kConstant) {
    AMPC_ASSIGN_OR_RETURN(const StepResult now, Counters());
    lr = ScheduledLearningRate(rate.schedule, rate.base, now.step);
  }
  Tensor value = Tensor::Host(DType::kFloat, {});
  *value.data<float>() = static_cast<float>(lr);
  return value;
}

absl::Status TrainingSession::Run(const NamedTensors& inputs, const ScheduledRate& rate) {
  AMPC_ASSIGN_OR_RETURN(const Tensor fed_rate, RateFeed(rate));
  AMPC_ASSIGN_OR_RETURN(std::vector<Tensor> feeds, AlgorithmFeeds(inputs, fed_rate));
  bool replayed = false;
  if (capture_.on && !profiling_) {
    AMPC_ASSIGN_OR_RETURN(replayed, RunCaptured(feeds));
  }
  if (!replayed) {
    capture_.graphs.clear();  // an eager step may move the state out of the graphs' buffers
    AMPC_RETURN_IF_ERROR(RunEager(feeds));
  }
  if (lr_.index < 0) lr_.last = fed_rate;
  return keep_losses_ ? KeepLoss(replayed) : absl::OkStatus();
}

absl::Status TrainingSession::Run(const NamedTensors& inputs, float lr) {
  return Run(inputs, ScheduledRate{lr, {}});
}

absl::Status TrainingSession::KeepLoss(bool replayed) {
  if (!replayed) {  // an eager step's loss is a tensor of its own
    kept_losses_.push_back(loss_.last);
    return absl::OkStatus();
  }
  AMPC_ASSIGN_OR_RETURN(Tensor copy, backend_.NewTensor(loss_.last.dtype(), loss_.last.shape()));
  AMPC_RETURN_IF_ERROR(backend_.Copy(loss_.last, copy));  // the next replay overwrites it
  kept_losses_.push_back(std::move(copy));
  return absl::OkStatus();
}

void TrainingSession::set_keep_losses(bool keep) {
  keep_losses_ = keep;
  kept_losses_.clear();
}

absl::StatusOr<TakenSteps> TrainingSession::TakeSteps() {
  if (loss_.last.empty()) return absl::FailedPreconditionError("no training step has run");
  TakenSteps taken;
  AMPC_ASSIGN_OR_RETURN(taken.last, ReadBack(true, kept_losses_, &taken.losses));
  kept_losses_.clear();
  return taken;
}

absl::Status TrainingSession::RunEager(std::span<const Tensor> feeds) {
  AMPC_ASSIGN_OR_RETURN(std::vector<Tensor> outputs,
                        algorithm_->Run(feeds, algorithm_outer_, Destinations()));
  for (const auto& [state, output] : bindings_) {
    const Tensor& next = outputs[output];
    if (next.dtype() != state_[state].dtype() || next.shape() != state_[state].shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "update_binding '", state_names_[state], "' <- '", algorithm_->output_names()[output],
          "': ", state_[state].TypeString(), " cannot take ", next.TypeString()));
    }
  }
  AMPC_RETURN_IF_ERROR(CheckScalar(outputs[loss_.index], loss_name_));
  Advance(outputs);
  return absl::OkStatus();
}

void TrainingSession::Advance(std::vector<Tensor>& outputs) {
  for (StepOutput* kept : {&loss_, &applied_, &norm_, &lr_}) {
    kept->last = kept->index >= 0 ? outputs[kept->index] : Tensor();
  }
  for (auto& [state, output] : bindings_) {
    spare_[state] = std::exchange(state_[state], std::move(outputs[output]));
  }
}

std::vector<Tensor*> TrainingSession::Destinations() {
  std::vector<Tensor*> destinations(algorithm_->output_names().size(), nullptr);
  for (const auto& [state, output] : bindings_) {
    // Only a buffer nothing else holds: not a view of a value the step reads.
    Tensor& spare = spare_[state];
    if (!spare.empty() && spare.buffer().use_count() == 1) destinations[output] = &spare;
  }
  return destinations;
}

void TrainingSession::set_profiler(NodeProfiler* profiler) {
  algorithm_->set_profiler(profiler);
  profiling_ = profiler != nullptr;
}

absl::StatusOr<StepResult> TrainingSession::Step(const NamedTensors& inputs,
                                                 const ScheduledRate& rate) {
  AMPC_RETURN_IF_ERROR(Run(inputs, rate));
  return LastStep();
}

absl::StatusOr<StepResult> TrainingSession::Step(const NamedTensors& inputs, float lr) {
  return Step(inputs, ScheduledRate{lr, {}});
}

absl::StatusOr<StepResult> TrainingSession::LastStep() const {
  if (loss_.last.empty()) return absl::FailedPreconditionError("no training step has run");
  return ReadBack(true, {}, nullptr);
}

absl::StatusOr<StepResult> TrainingSession::Counters() const {
  return ReadBack(false, {}, nullptr);
}

absl::StatusOr<StepResult> TrainingSession::ReadBack(bool with_last_step,
                                                     std::span<const Tensor> losses,
                                                     std::vector<float>* loss_values) const {
  using Set = void (*)(StepResult&, double);
  // The counters in the state, where the model has them.
  static constexpr std::pair<const char*, Set> kCounters[] = {
      {kScale, [](StepResult& r, double v) { r.scale = static_cast<float>(v); }},
      {kStep, [](StepResult& r, double v) { r.step = static_cast<int64_t>(v); }},
      {kSkippedSteps, [](StepResult& r, double v) { r.skipped_steps = static_cast<int64_t>(v); }},
      {kConsecutiveSkips,
       [](StepResult& r, double v) { r.consecutive_skips = static_cast<int64_t>(v); }},
      {kMicroStep, [](StepResult& r, double v) { r.micro_step = static_cast<int64_t>(v); }},
  };
  std::vector<NamedScalar> values;
  for (const Tensor& loss : losses) values.push_back({&loss, loss_name_});
  std::vector<Set> setters;
  auto add = [&](const Tensor* tensor, std::string name, Set set) {
    values.push_back({tensor, std::move(name)});
    setters.push_back(set);
  };
  if (with_last_step) {
    add(&loss_.last, loss_name_, [](StepResult& r, double v) { r.loss = static_cast<float>(v); });
    if (!applied_.last.empty()) {
      add(&applied_.last, kApplied, [](StepResult& r, double v) { r.applied = v != 0; });
    }
    if (!norm_.last.empty()) {
      add(&norm_.last, kGradNorm,
          [](StepResult& r, double v) { r.grad_norm = static_cast<float>(v); });
    }
    if (!lr_.last.empty()) {
      add(&lr_.last, kLrInput, [](StepResult& r, double v) { r.lr = static_cast<float>(v); });
    }
  }
  for (const auto& [name, set] : kCounters) {
    auto it = state_index_.find(name);
    if (it != state_index_.end()) add(&state_[it->second], name, set);
  }
  AMPC_ASSIGN_OR_RETURN(const std::vector<double> scalars, ScalarValues(backend_, values));
  for (size_t i = 0; i < losses.size(); ++i) loss_values->push_back(static_cast<float>(scalars[i]));
  StepResult result;
  for (size_t i = 0; i < setters.size(); ++i) setters[i](result, scalars[losses.size() + i]);
  return result;
}

absl::StatusOr<std::vector<Tensor>> TrainingSession::Evaluate(const NamedTensors& inputs) const {
  std::vector<Tensor> feeds;
  for (const ValueSpec& spec : eval_inputs_) {
    auto it = inputs.find(spec.name);
    if (it == inputs.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("inference graph input '", spec.name, "' is missing"));
    }
    AMPC_ASSIGN_OR_RETURN(Tensor fed, Feed(spec, it->second));
    feeds.push_back(std::move(fed));
  }
  return inference_->Run(feeds, inference_outer_);
}

absl::StatusOr<Tensor> TrainingSession::State(const std::string& name) const {
  auto it = state_index_.find(name);
  if (it == state_index_.end()) {
    return absl::NotFoundError(absl::StrCat("no state value '", name, "'"));
  }
  return ToHost(state_[it->second]);
}

absl::StatusOr<onnx::ModelProto> TrainingSession::Checkpoint() const {
  onnx::ModelProto model = saved_form_;
  onnx::GraphProto* graph = model.mutable_graph();
  onnx::GraphProto* initialization = model.mutable_training_info(0)->mutable_initialization();
  initialization->clear_initializer();
  initialization->clear_value_info();
  for (size_t i = 0; i < state_.size(); ++i) {
    AMPC_ASSIGN_OR_RETURN(Tensor host, ToHost(state_[i]));
    if (static_cast<int>(i) < num_parameters_) {
      *graph->add_initializer() = TensorToProto(host, state_names_[i]);
      continue;
    }
    onnx::NodeProto* node = initialization->add_node();
    node->set_op_type("Constant");
    node->set_name(absl::StrCat(state_names_[i], "/state"));
    node->add_output(state_names_[i]);
    onnx::AttributeProto* value = node->add_attribute();
    value->set_name("value");
    value->set_type(onnx::AttributeProto::TENSOR);
    *value->mutable_t() = TensorToProto(host, state_names_[i]);
  }
  return model;
}

}  // namespace ampc
