// TrainingSession::FindNonFinite: one step rerun with every floating-point value kept, to name
// where inf or NaN first appear when a run stops after too many skipped steps.
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "passes/graph/status_macros.h"
#include "runtime/nonfinite.h"
#include "runtime/training_session.h"

namespace ampc {
namespace {

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
  onnx::GraphProto graph = algorithm_graph_;
  KeepFloatValues(graph);
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
  AMPC_ASSIGN_OR_RETURN(FirstNonFinite first, FirstNonFiniteValue(graph, values, &nonfinite));
  NonFiniteReport report{first.value, first.node, first.op, {}};
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
