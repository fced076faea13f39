// TrainingSession::FindNonFinite: one step rerun with every floating-point value kept, to name
// where inf or NaN first appear when a run stops after too many skipped steps.
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "runtime/status_macros.h"
#include "runtime/training_session.h"

namespace ampc {
namespace {

bool IsFloatType(int elem_type) {
  return elem_type == onnx::TensorProto::FLOAT || elem_type == onnx::TensorProto::FLOAT16 ||
         elem_type == onnx::TensorProto::BFLOAT16 || elem_type == onnx::TensorProto::DOUBLE;
}

absl::StatusOr<bool> AllFinite(const Tensor& tensor) {
  AMPC_ASSIGN_OR_RETURN(Tensor host, ToHost(tensor));
  bool finite = true;
  Dispatch<AMPC_FLOAT_TYPES>(host.dtype(), [&]<typename T>() {
    const T* data = host.data<T>();
    for (int64_t i = 0; i < host.size() && finite; ++i) {
      finite = std::isfinite(static_cast<double>(Compute<T>::Load(data[i])));
    }
  });
  return finite;
}

// The algorithm with every floating-point node output as a graph output (after its own).
onnx::GraphProto KeepFloatValues(const onnx::GraphProto& algorithm) {
  onnx::GraphProto graph = algorithm;
  absl::flat_hash_set<std::string> outputs;
  for (const onnx::ValueInfoProto& value : algorithm.output()) outputs.insert(value.name());
  for (const onnx::ValueInfoProto& value : algorithm.value_info()) {
    if (outputs.contains(value.name()) || !value.type().has_tensor_type() ||
        !IsFloatType(value.type().tensor_type().elem_type())) {
      continue;
    }
    *graph.add_output() = value;
  }
  return graph;
}

// The parameter each checked gradient updates: UnscaleClip's input i + 1 becomes its output i,
// which an optimizer node (input 4) applies to a parameter (input 3).
absl::flat_hash_map<std::string, std::string> ParameterOfGradient(const onnx::GraphProto& graph) {
  absl::flat_hash_map<std::string, std::string> parameter_of_unscaled;
  for (const onnx::NodeProto& node : graph.node()) {
    if (node.domain() == "ai.ampc" && node.input_size() > 4 &&
        (node.op_type() == "SGD" || node.op_type() == "Adam")) {
      parameter_of_unscaled[node.input(4)] = node.input(3);
    }
  }
  absl::flat_hash_map<std::string, std::string> parameter_of_gradient;
  for (const onnx::NodeProto& node : graph.node()) {
    if (node.domain() != "ai.ampc" || node.op_type() != "UnscaleClip") continue;
    for (int i = 1; i < node.input_size() && i - 1 < node.output_size(); ++i) {
      auto it = parameter_of_unscaled.find(node.output(i - 1));
      if (it != parameter_of_unscaled.end()) parameter_of_gradient[node.input(i)] = it->second;
    }
  }
  return parameter_of_gradient;
}

}  // namespace

absl::StatusOr<NonFiniteReport> TrainingSession::FindNonFinite(const NamedTensors& inputs,
                                                               float lr) {
  const onnx::GraphProto graph = KeepFloatValues(algorithm_graph_);
  TypeMap outer_types;
  for (size_t i = 0; i < state_.size(); ++i) outer_types[state_names_[i]] = state_[i].dtype();
  const ExecutorEnv env{*registry_, backend_, opsets_};
  AMPC_ASSIGN_OR_RETURN(std::unique_ptr<GraphExecutor> executor,
                        GraphExecutor::Create(graph, env, outer_types));
  AMPC_ASSIGN_OR_RETURN(std::vector<Tensor*> outer, OuterValues(*executor, "the algorithm"));
  Tensor rate = Tensor::Host(DType::kFloat, {});
  *rate.data<float>() = lr;
  AMPC_ASSIGN_OR_RETURN(std::vector<Tensor> feeds, AlgorithmFeeds(inputs, rate));
  AMPC_ASSIGN_OR_RETURN(std::vector<Tensor> values, executor->Run(feeds, outer));

  absl::flat_hash_set<std::string> nonfinite;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!IsFloatType(static_cast<int>(values[i].dtype()))) continue;
    AMPC_ASSIGN_OR_RETURN(bool finite, AllFinite(values[i]));
    if (!finite) nonfinite.insert(graph.output(static_cast<int>(i)).name());
  }
  NonFiniteReport report;
  for (const onnx::NodeProto& node : graph.node()) {
    for (const std::string& output : node.output()) {
      if (!report.first_value.empty() || !nonfinite.contains(output)) continue;
      report.first_value = output;
      report.first_node = node.name();
      report.first_op = node.op_type();
    }
  }
  const absl::flat_hash_map<std::string, std::string> parameter = ParameterOfGradient(graph);
  for (const onnx::NodeProto& node : graph.node()) {
    if (node.domain() != "ai.ampc" || node.op_type() != "UnscaleClip") continue;
    for (int i = 1; i < node.input_size(); ++i) {
      auto it = parameter.find(node.input(i));
      if (nonfinite.contains(node.input(i)) && it != parameter.end()) {
        report.parameters.push_back(it->second);
      }
    }
  }
  return report;
}

}  // namespace ampc
