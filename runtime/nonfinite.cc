#include "runtime/nonfinite.h"

#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cmath>

#include "passes/graph/onnx_status.h"
#include "passes/graph/status_macros.h"
#include "passes/opset/training_ops.h"
#include "runtime/session.h"

namespace ampc {
namespace {

bool IsFloatType(int elem_type) {
  return elem_type == onnx::TensorProto::FLOAT || elem_type == onnx::TensorProto::FLOAT16 ||
         elem_type == onnx::TensorProto::BFLOAT16 || elem_type == onnx::TensorProto::DOUBLE;
}

// Clears value_info and output shapes in `graph` and its subgraphs (output element types stay:
// the session checks those).
void ForgetDeclarations(onnx::GraphProto& graph) {
  graph.clear_value_info();
  for (onnx::ValueInfoProto& output : *graph.mutable_output()) {
    if (output.type().has_tensor_type())
      output.mutable_type()->mutable_tensor_type()->clear_shape();
  }
  for (onnx::NodeProto& node : *graph.mutable_node()) {
    for (onnx::AttributeProto& attribute : *node.mutable_attribute()) {
      if (attribute.has_g()) ForgetDeclarations(*attribute.mutable_g());
      for (onnx::GraphProto& sub : *attribute.mutable_graphs()) ForgetDeclarations(sub);
    }
  }
}

}  // namespace

absl::StatusOr<NonFiniteCount> CountNonFinite(const Tensor& tensor) {
  NonFiniteCount count;
  if (!IsFloatType(static_cast<int>(tensor.dtype()))) return count;
  AMPC_ASSIGN_OR_RETURN(Tensor host, ToHost(tensor));
  Dispatch<AMPC_FLOAT_TYPES>(host.dtype(), [&]<typename T>() {
    const T* data = host.data<T>();
    for (int64_t i = 0; i < host.size(); ++i) {
      const double x = static_cast<double>(Compute<T>::Load(data[i]));
      count.nan += std::isnan(x);
      count.inf += std::isinf(x);
    }
  });
  return count;
}

void KeepFloatValues(onnx::GraphProto& graph) {
  absl::flat_hash_map<std::string, const onnx::ValueInfoProto*> typed;
  for (const onnx::ValueInfoProto& value : graph.value_info()) typed[value.name()] = &value;
  absl::flat_hash_set<std::string> outputs;
  for (const onnx::ValueInfoProto& value : graph.output()) outputs.insert(value.name());
  std::vector<onnx::ValueInfoProto> kept;
  for (const onnx::NodeProto& node : graph.node()) {
    for (const std::string& output : node.output()) {
      auto it = typed.find(output);
      if (it == typed.end() || !outputs.insert(output).second) continue;
      const onnx::TypeProto& type = it->second->type();
      if (type.has_tensor_type() && IsFloatType(type.tensor_type().elem_type())) {
        kept.push_back(*it->second);
      }
    }
  }
  for (onnx::ValueInfoProto& value : kept) *graph.add_output() = std::move(value);
}

absl::StatusOr<FirstNonFinite> FirstNonFiniteValue(const onnx::GraphProto& kept,
                                                   std::span<const Tensor> values,
                                                   absl::flat_hash_set<std::string>* nonfinite) {
  absl::flat_hash_map<std::string, size_t> bad;  // value name -> index in `values`
  std::vector<NonFiniteCount> counts(values.size());
  for (size_t i = 0; i < values.size() && i < static_cast<size_t>(kept.output_size()); ++i) {
    AMPC_ASSIGN_OR_RETURN(counts[i], CountNonFinite(values[i]));
    if (counts[i].total() == 0) continue;
    bad.emplace(kept.output(static_cast<int>(i)).name(), i);
    if (nonfinite != nullptr) nonfinite->insert(kept.output(static_cast<int>(i)).name());
  }
  FirstNonFinite first;
  for (const onnx::NodeProto& node : kept.node()) {
    if (!first.value.empty()) {
      if (std::find(node.input().begin(), node.input().end(), first.value) != node.input().end()) {
        first.readers.push_back(node.name());
      }
      continue;
    }
    for (const std::string& output : node.output()) {
      auto it = bad.find(output);
      if (it == bad.end() || !first.value.empty()) continue;
      const Tensor& value = values[it->second];
      first = FirstNonFinite{
          output, node.name(), node.op_type(), value.dtype(), counts[it->second], value.size(), {}};
    }
  }
  return first;
}

absl::StatusOr<FirstNonFinite> FindFirstNonFinite(onnx::ModelProto model,
                                                  std::span<const Tensor> inputs,
                                                  const KernelRegistry& registry,
                                                  Backend& backend) {
  RegisterAmpcSchemas();
  // Types from the nodes alone: a stale or contradicting declaration must not hide a value.
  ForgetDeclarations(*model.mutable_graph());
  AMPC_RETURN_IF_ERROR(CatchOnnx("ONNX's type inference, which keeping every value needs", [&] {
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance());
  }));
  KeepFloatValues(*model.mutable_graph());
  onnx::GraphProto kept;  // the node order and the outputs, without the weights
  *kept.mutable_node() = model.graph().node();
  *kept.mutable_output() = model.graph().output();
  AMPC_ASSIGN_OR_RETURN(std::unique_ptr<Session> session,
                        Session::Create(std::move(model), registry, backend));
  AMPC_ASSIGN_OR_RETURN(std::vector<Tensor> values, session->Run(inputs));
  return FirstNonFiniteValue(kept, values);
}

}  // namespace ampc
