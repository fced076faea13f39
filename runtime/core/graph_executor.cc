#include "runtime/core/graph_executor.h"

#include <algorithm>
#include <exception>
#include <new>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "passes/opset/standard_op_versions.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/core/tensor_proto.h"

namespace ampc {

struct GraphExecutor::Step {
  std::unique_ptr<KernelInfo> info;
  std::unique_ptr<OpKernel> kernel;
  std::vector<int> inputs;           // slot per input; -1 for an omitted optional input
  std::vector<int> implicit_inputs;  // slots of info->implicit_inputs
  std::vector<int> outputs;          // slot per output; -1 for an omitted optional output
  std::vector<int> release;          // slots whose last use is this step
  InputMemory memory;                // where the kernel reads its inputs
  // On a device backend, for a node with only integer or bool outputs (shape arithmetic): the
  // CPU kernel, run instead when every input is small and in host memory.
  std::unique_ptr<KernelInfo> host_info;
  std::unique_ptr<OpKernel> host_kernel;
};

namespace {

void CollectNames(const onnx::GraphProto& graph, absl::flat_hash_set<std::string>& defined,
                  absl::flat_hash_set<std::string>& seen, std::vector<std::string>& free) {
  for (const auto& input : graph.input()) defined.insert(input.name());
  for (const auto& init : graph.initializer()) defined.insert(init.name());
  auto use = [&](const std::string& name) {
    if (!name.empty() && !defined.contains(name) && seen.insert(name).second) free.push_back(name);
  };
  for (const onnx::NodeProto& node : graph.node()) {
    for (const std::string& input : node.input()) use(input);
    for (const onnx::AttributeProto& attribute : node.attribute()) {
      std::vector<const onnx::GraphProto*> subgraphs;
      if (attribute.has_g()) subgraphs.push_back(&attribute.g());
      for (const auto& g : attribute.graphs()) subgraphs.push_back(&g);
      for (const onnx::GraphProto* subgraph : subgraphs) {
        for (const std::string& name : FreeVariables(*subgraph)) use(name);
      }
    }
    for (const std::string& output : node.output()) defined.insert(output);
  }
  for (const auto& output : graph.output()) use(output.name());
}

constexpr int64_t kHostMirrorElements = 1024;

bool IsConstantNode(const onnx::NodeProto& node) {
  return node.op_type() == "Constant" && (node.domain().empty() || node.domain() == "ai.onnx");
}

bool IntegerOrBool(DType type) {
  return type == DType::kInt64 || type == DType::kInt32 || type == DType::kBool;
}

// The host's backend for shape arithmetic next to a device backend: one thread, made on first use.
Backend& HostBackend() {
  static CpuBackend* host = new CpuBackend(1);
  return *host;
}

DType ElemType(const onnx::TypeProto& type) {
  return type.has_tensor_type() ? static_cast<DType>(type.tensor_type().elem_type())
                                : DType::kUndefined;
}

}  // namespace

std::vector<std::string> FreeVariables(const onnx::GraphProto& graph) {
  absl::flat_hash_set<std::string> defined, seen;
  std::vector<std::string> free;
  CollectNames(graph, defined, seen, free);
  return free;
}

void CollectTypes(const onnx::GraphProto& graph, TypeMap& types) {
  auto add = [&](const onnx::ValueInfoProto& value) {
    const DType type = ElemType(value.type());
    if (type != DType::kUndefined) types[value.name()] = type;
  };
  for (const auto& value : graph.input()) add(value);
  for (const auto& value : graph.value_info()) add(value);
  for (const auto& value : graph.output()) add(value);
  for (const auto& init : graph.initializer()) {
    types[init.name()] = static_cast<DType>(init.data_type());
  }
}

GraphExecutor::~GraphExecutor() = default;

absl::StatusOr<std::unique_ptr<GraphExecutor>> GraphExecutor::Create(const onnx::GraphProto& graph,
                                                                     const ExecutorEnv& env,
                                                                     const TypeMap& outer) {
  std::unique_ptr<GraphExecutor> executor(new GraphExecutor());
  if (absl::Status status = executor->Build(graph, env, outer); !status.ok()) return status;
  return executor;
}

int GraphExecutor::SlotOf(const std::string& name) {
  auto [it, inserted] = slots_.try_emplace(name, num_slots_);
  if (inserted) ++num_slots_;
  return it->second;
}

absl::Status GraphExecutor::Build(const onnx::GraphProto& graph, const ExecutorEnv& env,
                                  const TypeMap& outer) {
  TypeMap types = outer;
  CollectTypes(graph, types);
  device_ = env.backend.name() != "cpu";
  backend_ = &env.backend;
  for (const onnx::TensorProto& init : graph.initializer()) {
    absl::StatusOr<Tensor> host = TensorFromProto(init);
    if (!host.ok()) return host.status();
    if (absl::Status s = AddConstant(init.name(), *host, env.backend); !s.ok()) return s;
  }
  for (const onnx::ValueInfoProto& input : graph.input()) {
    const DType type = ElemType(input.type());
    if (!input.type().has_tensor_type()) {
      return absl::UnimplementedError(
          absl::StrCat("graph input '", input.name(), "': only tensor inputs are supported"));
    }
    input_names_.push_back(input.name());
    input_types_.push_back(type);
    input_slots_.push_back(SlotOf(input.name()));
  }
  free_variables_ = FreeVariables(graph);
  for (const std::string& name : free_variables_) free_slots_.push_back(SlotOf(name));
  for (const onnx::NodeProto& node : graph.node()) {
    absl::Status status;
    if (IsConstantNode(node) && node.output_size() == 1) {
      absl::StatusOr<Tensor> host = ConstantNodeValue(node);
      status = host.ok() ? AddConstant(node.output(0), *host, env.backend) : host.status();
    } else {
      status = AddNode(node, env, types);
    }
    if (!status.ok()) return status;
  }
  for (const onnx::ValueInfoProto& output : graph.output()) {
    auto it = slots_.find(output.name());
    if (it == slots_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph output '", output.name(), "' is not produced by any node"));
    }
    output_names_.push_back(output.name());
    output_slots_.push_back(it->second);
  }
  // Liveness: a value is freed right after the last step that reads it, unless it is an output,
  // an initializer, a graph input (owned by the caller) or a value of an enclosing graph.
  std::vector<int> last_use(num_slots_, -1);
  for (size_t i = 0; i < steps_.size(); ++i) {
    for (int slot : steps_[i]->inputs)
      if (slot >= 0) last_use[slot] = static_cast<int>(i);
    for (int slot : steps_[i]->implicit_inputs) last_use[slot] = static_cast<int>(i);
    for (int slot : steps_[i]->outputs) {
      if (slot >= 0 && last_use[slot] < static_cast<int>(i)) last_use[slot] = static_cast<int>(i);
    }
  }
  std::vector<bool> keep(num_slots_, false);
  for (int slot : output_slots_) keep[slot] = true;
  for (const auto& [slot, tensor] : constants_) keep[slot] = true;
  for (int slot : free_slots_) keep[slot] = true;
  for (int slot = 0; slot < num_slots_; ++slot) {
    if (!keep[slot] && last_use[slot] >= 0) steps_[last_use[slot]]->release.push_back(slot);
  }
  return absl::OkStatus();
}

// A constant lives on the backend from creation on; a Constant node runs no kernel.
absl::Status GraphExecutor::AddConstant(const std::string& name, const Tensor& host,
                                        Backend& backend) {
  // Always the backend's own copy, so that its memory counters include the weights.
  absl::StatusOr<Tensor> tensor = backend.NewTensor(host.dtype(), host.shape());
  if (!tensor.ok()) return tensor.status();
  if (absl::Status s = backend.CopyFromHost(host.raw(), *tensor); !s.ok()) return s;
  const int slot = SlotOf(name);
  constants_.emplace_back(slot, *std::move(tensor));
  const bool integer = host.dtype() == DType::kInt64 || host.dtype() == DType::kInt32;
  if (device_ && integer && host.size() <= kHostMirrorElements) host_constants_[slot] = host;
  return absl::OkStatus();
}

absl::Status GraphExecutor::AddNode(const onnx::NodeProto& node, const ExecutorEnv& env,
                                    const TypeMap& types) {
  auto step = std::make_unique<Step>();
  const std::string& domain = node.domain() == "ai.onnx" ? std::string() : node.domain();
  auto opset = env.opsets.find(domain);
  std::vector<DType> input_types, output_types;
  for (const std::string& input : node.input()) {
    if (input.empty()) {
      step->inputs.push_back(-1);
      input_types.push_back(DType::kUndefined);
      continue;
    }
    auto slot = slots_.find(input);
    if (slot == slots_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(NodeLabel(node), ": input '", input, "' is not defined before the node"));
    }
    step->inputs.push_back(slot->second);
    auto type = types.find(input);
    input_types.push_back(type == types.end() ? DType::kUndefined : type->second);
  }
  for (const std::string& output : node.output()) {
    auto type = types.find(output);
    output_types.push_back(type == types.end() ? DType::kUndefined : type->second);
  }
  onnx::GraphProto wrapper;  // the node's subgraphs' free variables are its implicit inputs
  *wrapper.add_node() = node;
  wrapper.mutable_node(0)->clear_input();
  std::vector<std::string> implicit = FreeVariables(wrapper);
  for (const std::string& name : implicit) {
    auto slot = slots_.find(name);
    if (slot == slots_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(NodeLabel(node), ": its subgraph reads '",
                                                     name, "', which is not defined before it"));
    }
    step->implicit_inputs.push_back(slot->second);
  }
  // An ai.ampc version is the standard op of that opset (its attributes mean what they mean
  // there: MaxPool's ceil_mode and dilations, for instance).
  const int version = IsAmpcVersion(node)         ? kAmpcVersionStandardOpset
                      : opset == env.opsets.end() ? 0
                                                  : opset->second;
  step->info.reset(new KernelInfo{node, version, std::move(input_types), std::move(output_types),
                                  env.backend, std::move(implicit), nullptr});
  // `types` outlives kernel creation, the only time subgraphs are built.
  step->info->build_subgraph = [&env, &types](const onnx::GraphProto& g) {
    return GraphExecutor::Create(g, env, types);
  };
  absl::StatusOr<std::unique_ptr<OpKernel>> kernel =
      env.registry.Create(*step->info, &step->memory);
  if (!kernel.ok()) return kernel.status();
  step->kernel = *std::move(kernel);
  step->info->build_subgraph = nullptr;  // only valid during creation
  const auto& outs = step->info->output_types;
  const bool has_subgraph = std::any_of(node.attribute().begin(), node.attribute().end(),
                                        [](const auto& a) { return a.has_g() || a.graphs_size(); });
  if (device_ && !has_subgraph && !outs.empty() &&
      std::all_of(outs.begin(), outs.end(), IntegerOrBool)) {
    auto host = std::make_unique<KernelInfo>(KernelInfo{
        node, step->info->opset, step->info->input_types, outs, HostBackend(), {}, nullptr});
    absl::StatusOr<std::unique_ptr<OpKernel>> kernel = env.registry.Create(*host, nullptr);
    if (kernel.ok()) {
      step->host_info = std::move(host);
      step->host_kernel = *std::move(kernel);
    }
  }
  for (const std::string& output : node.output()) {
    step->outputs.push_back(output.empty() ? -1 : SlotOf(output));
  }
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

// A kernel that throws (std::bad_alloc from a scratch buffer, a library error) becomes a Status
// naming the node instead of ending the process.
absl::Status GraphExecutor::Compute(OpKernel& kernel, const KernelInfo& info,
                                    KernelContext& context) {
  try {
    return kernel.Compute(context);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat(info.label(), ": out of memory for its scratch buffers"));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(info.label(), ": ", e.what()));
  }
}

// Points the inputs at host tensors (host mirrors of constants) when every one is small and in
// host memory or mirrored there: then the step's host kernel runs, and nothing waits for the
// device. False (inputs untouched) otherwise.
bool GraphExecutor::PlaceOnHost(const Step& step, std::vector<Tensor>& values,
                                std::vector<Tensor*>& inputs) const {
  if (step.host_kernel == nullptr) return false;
  std::vector<Tensor*> host(inputs.size(), nullptr);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const int slot = step.inputs[k];
    if (slot < 0) continue;
    const Tensor& value = values[slot];
    if (InHostMemory(value) && value.size() <= kHostMirrorElements) {
      host[k] = &values[slot];
    } else if (auto mirror = host_constants_.find(slot); mirror != host_constants_.end()) {
      host[k] = const_cast<Tensor*>(&mirror->second);
    } else {
      return false;
    }
  }
  inputs = std::move(host);
  return true;
}

absl::Status GraphExecutor::PlaceInputs(const Step& step, std::vector<Tensor>& values,
                                        Mirrors& mirrors, std::vector<Tensor*>& inputs) const {
  auto listed = [](const std::vector<int>& list, size_t k) {
    return std::find(list.begin(), list.end(), static_cast<int>(k)) != list.end();
  };
  for (size_t k = 0; k < inputs.size(); ++k) {
    const int slot = step.inputs[k];
    if (slot < 0 || listed(step.memory.anywhere, k)) continue;
    if (listed(step.memory.either, k)) {
      auto constant = host_constants_.find(slot);
      if (constant != host_constants_.end()) inputs[k] = const_cast<Tensor*>(&constant->second);
      continue;
    }
    const bool host = listed(step.memory.host, k);
    Tensor& value = values[slot];
    if (host == InHostMemory(value)) continue;
    if (auto constant = host_constants_.find(slot); host && constant != host_constants_.end()) {
      inputs[k] = const_cast<Tensor*>(&constant->second);
      continue;
    }
    // The mirror holds the copy in the memory opposite to values[slot].
    auto [mirror, first] = mirrors.try_emplace(slot);
    if (!first) {
      inputs[k] = &mirror->second;
      continue;
    }
    absl::StatusOr<Tensor> copy = host ? ToHost(value) : OnBackend(value, step.info->backend);
    if (!copy.ok()) {
      return absl::Status(copy.status().code(),
                          absl::StrCat(step.info->label(), ": input '", step.info->node.input(k),
                                       "': ", copy.status().message()));
    }
    if (host) {
      mirror->second = *std::move(copy);
      inputs[k] = &mirror->second;
    } else {
      mirror->second = std::exchange(value, *std::move(copy));
    }
  }
  return absl::OkStatus();
}

// The step's outputs into their slots, each checked against its declared type.
absl::Status GraphExecutor::StoreOutputs(const Step& step, std::vector<Tensor>& outputs,
                                         std::vector<Tensor>& values) {
  for (size_t i = 0; i < step.outputs.size(); ++i) {
    if (step.outputs[i] < 0) continue;
    const DType declared = step.info->output_types[i];
    if (!outputs[i].empty() && declared != DType::kUndefined && outputs[i].dtype() != declared) {
      return absl::InternalError(absl::StrCat(
          step.info->label(), ": output '", step.info->node.output(i), "' is ",
          DTypeName(outputs[i].dtype()), ", declared ", DTypeName(declared), " (an ampc bug)"));
    }
    if (outputs[i].empty()) {
      return absl::InternalError(absl::StrCat(
          step.info->label(), ": the kernel did not produce output ", i, " (an ampc bug)"));
    }
    values[step.outputs[i]] = std::move(outputs[i]);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> GraphExecutor::Run(
    std::span<const Tensor> inputs, std::span<Tensor* const> outer,
    std::span<Tensor* const> destinations) const {
  backend_->BeginRun(RunKey(inputs, outer));
  absl::Cleanup end = [this] { backend_->EndRun(); };  // after RunSteps's values are gone
  return RunSteps(inputs, outer, destinations);
}

uint64_t GraphExecutor::RunKey(std::span<const Tensor> inputs,
                               std::span<Tensor* const> outer) const {
  std::vector<int64_t> key = {reinterpret_cast<intptr_t>(this)};
  auto add = [&](const Tensor& t) {
    key.push_back(t.empty() ? -1 : static_cast<int64_t>(t.dtype()));
    key.push_back(static_cast<int64_t>(t.shape().size()));
    key.insert(key.end(), t.shape().begin(), t.shape().end());
  };
  for (const Tensor& input : inputs) add(input);
  for (const Tensor* value : outer) add(*value);
  return absl::HashOf(key);
}

absl::StatusOr<std::vector<Tensor>> GraphExecutor::RunSteps(
    std::span<const Tensor> inputs, std::span<Tensor* const> outer,
    std::span<Tensor* const> destinations) const {
  // The destination of each slot, from the graph outputs that have one.
  absl::flat_hash_map<int, Tensor*> destination_of;
  for (size_t i = 0; i < destinations.size() && i < output_slots_.size(); ++i) {
    if (destinations[i] != nullptr) destination_of.try_emplace(output_slots_[i], destinations[i]);
  }
  std::vector<Tensor*> step_destinations;
  std::vector<Tensor> values(num_slots_);
  for (const auto& [slot, tensor] : constants_) values[slot] = tensor;
  for (size_t i = 0; i < input_slots_.size() && i < inputs.size(); ++i) {
    if (!inputs[i].empty()) values[input_slots_[i]] = inputs[i];
  }
  for (size_t i = 0; i < free_slots_.size(); ++i) values[free_slots_[i]] = *outer[i];
  std::vector<Tensor*> step_inputs, step_implicit;
  std::vector<Tensor> step_outputs;
  Mirrors mirrors;
  for (const std::unique_ptr<Step>& step : steps_) {
    step_inputs.clear();
    for (size_t k = 0; k < step->inputs.size(); ++k) {
      const int slot = step->inputs[k];
      if (slot >= 0 && values[slot].empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            step->info->label(), ": input '", step->info->node.input(k), "' has no value"));
      }
      step_inputs.push_back(slot >= 0 ? &values[slot] : nullptr);
    }
    const bool on_host = device_ && PlaceOnHost(*step, values, step_inputs);
    if (device_ && !on_host) {
      if (absl::Status status = PlaceInputs(*step, values, mirrors, step_inputs); !status.ok()) {
        return status;
      }
    }
    const KernelInfo& info = on_host ? *step->host_info : *step->info;
    step_implicit.clear();
    for (int slot : step->implicit_inputs) step_implicit.push_back(&values[slot]);
    step_outputs.assign(step->outputs.size(), Tensor());
    KernelContext context(info, step_inputs, step_implicit, step_outputs);
    if (!destination_of.empty() && !on_host) {  // destinations are the backend's memory
      step_destinations.clear();
      for (int slot : step->outputs) {
        auto it = destination_of.find(slot);
        step_destinations.push_back(it != destination_of.end() ? it->second : nullptr);
      }
      context.set_destinations(step_destinations);
    }
    if (profiler_ != nullptr) profiler_->Begin(*step->info);
    if (absl::Status status = Compute(on_host ? *step->host_kernel : *step->kernel, info, context);
        !status.ok()) {
      return status;
    }
    if (profiler_ != nullptr) profiler_->End(*step->info);
    if (absl::Status status = StoreOutputs(*step, step_outputs, values); !status.ok()) {
      return status;
    }
    for (int slot : step->release) values[slot] = Tensor();
  }
  std::vector<Tensor> outputs;
  outputs.reserve(output_slots_.size());
  for (int slot : output_slots_) outputs.push_back(values[slot]);
  return outputs;
}

}  // namespace ampc
