// Runs one ONNX graph (a model's main graph or an If/Loop body) on a backend: kernels are chosen
// once, at creation; each run frees every value after its last use, so the backend reuses that
// memory for later values (the memory plan is liveness-based).
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/core/kernel.h"
#include "runtime/core/kernel_registry.h"
#include "runtime/core/node_profiler.h"

namespace ampc {

// The element type of every value a graph can see: its own (from shape inference) and those of
// the graphs around it.
using TypeMap = absl::flat_hash_map<std::string, DType>;

struct ExecutorEnv {
  const KernelRegistry& registry;
  Backend& backend;
  std::map<std::string, int> opsets;  // domain -> version ("" for ai.onnx)
};

class GraphExecutor {
 public:
  // `outer` holds the types of values of enclosing graphs (empty for a main graph).
  static absl::StatusOr<std::unique_ptr<GraphExecutor>> Create(const onnx::GraphProto& graph,
                                                               const ExecutorEnv& env,
                                                               const TypeMap& outer);
  ~GraphExecutor();

  // Graph inputs in order, without initializers of the same name (they are defaults).
  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<DType>& input_types() const { return input_types_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  // Values of enclosing graphs this graph (or its subgraphs) reads, in the order Run takes them.
  const std::vector<std::string>& free_variables() const { return free_variables_; }

  // Runs the graph. `inputs` follow input_names() (an empty tensor for an input that has an
  // initializer means "use the initializer"); `outer` follows free_variables().
  // `destinations`, empty or following output_names(), holds where the caller wants outputs
  // (null for none): the node producing one writes into it when its kernel allocates that output
  // with the same type and size (a view or a constant does not). Nothing the graph reads may
  // share a destination's memory.
  absl::StatusOr<std::vector<Tensor>> Run(std::span<const Tensor> inputs,
                                          std::span<Tensor* const> outer,
                                          std::span<Tensor* const> destinations = {}) const;

  // Calls `profiler` around each node of this graph from now on (null: none). Not owned.
  void set_profiler(NodeProfiler* profiler) { profiler_ = profiler; }

 private:
  struct Step;
  GraphExecutor() = default;
  absl::Status Build(const onnx::GraphProto& graph, const ExecutorEnv& env, const TypeMap& outer);
  absl::Status AddNode(const onnx::NodeProto& node, const ExecutorEnv& env, const TypeMap& types);
  absl::Status AddConstant(const std::string& name, const Tensor& host, Backend& backend);
  // A value's copy in the other memory (host or device), made at most once per run.
  using Mirrors = absl::node_hash_map<int, Tensor>;
  // Points a step's inputs at tensors in the memory its kernel reads them from (device backends
  // only): a host value a device kernel reads is uploaded once and stays on the device.
  absl::Status PlaceInputs(const Step& step, std::vector<Tensor>& values, Mirrors& mirrors,
                           std::vector<Tensor*>& inputs) const;
  int SlotOf(const std::string& name);
  bool PlaceOnHost(const Step& step, std::vector<Tensor>& values,
                   std::vector<Tensor*>& inputs) const;
  static absl::Status Compute(OpKernel& kernel, const KernelInfo& info, KernelContext& context);
  static absl::Status StoreOutputs(const Step& step, std::vector<Tensor>& outputs,
                                   std::vector<Tensor>& values);

  // Run's work, between the backend's BeginRun and EndRun (its values are gone by EndRun).
  absl::StatusOr<std::vector<Tensor>> RunSteps(std::span<const Tensor> inputs,
                                               std::span<Tensor* const> outer,
                                               std::span<Tensor* const> destinations) const;
  // Names the graph and the shapes it runs with, for the backend's memory plans.
  uint64_t RunKey(std::span<const Tensor> inputs, std::span<Tensor* const> outer) const;

  NodeProfiler* profiler_ = nullptr;
  Backend* backend_ = nullptr;
  std::vector<std::string> input_names_;
  std::vector<DType> input_types_;
  std::vector<int> input_slots_;
  std::vector<std::string> output_names_;
  std::vector<int> output_slots_;
  std::vector<std::string> free_variables_;
  std::vector<int> free_slots_;
  std::vector<std::pair<int, Tensor>> constants_;  // initializers and Constant nodes' values
  // Host copies of small integer constants (shapes, axes), for kernels that read them on the host.
  absl::flat_hash_map<int, Tensor> host_constants_;
  bool device_ = false;  // the backend's memory is not host memory
  std::vector<std::unique_ptr<Step>> steps_;
  absl::flat_hash_map<std::string, int> slots_;
  int num_slots_ = 0;
};

// The element types shape inference found for every value of the graph (inputs, initializers,
// value_info, outputs), added to `types`.
void CollectTypes(const onnx::GraphProto& graph, TypeMap& types);

// The names a graph reads that it does not define (its free variables), subgraphs included, in
// first-use order.
std::vector<std::string> FreeVariables(const onnx::GraphProto& graph);

}  // namespace ampc
