#include "passes/training_state.h"

#include <onnx/defs/attr_proto_util.h>

#include "absl/strings/str_cat.h"

namespace ampc {

std::string NextName(const std::string& state) { return absl::StrCat(state, ".ampc.next"); }

absl::flat_hash_set<std::string> TrainingReads(const onnx::ModelProto& model) {
  absl::flat_hash_set<std::string> names;
  for (const onnx::TrainingInfoProto& training : model.training_info()) {
    for (const auto& binding : training.update_binding()) names.insert(binding.key());
    for (const onnx::NodeProto& node : training.algorithm().node()) {
      names.insert(node.input().begin(), node.input().end());
    }
  }
  return names;
}

absl::flat_hash_set<std::string> MasterWeights(const onnx::ModelProto& model,
                                               bool training_step_follows) {
  absl::flat_hash_set<std::string> names = TrainingReads(model);
  if (!training_step_follows) return names;
  for (const onnx::TensorProto& tensor : model.graph().initializer()) {
    if (tensor.data_type() == onnx::TensorProto::FLOAT) names.insert(tensor.name());
  }
  return names;
}

onnx::ValueInfoProto TensorValue(const std::string& name, int elem_type,
                                 const std::vector<int64_t>& dims) {
  onnx::ValueInfoProto value;
  value.set_name(name);
  onnx::TypeProto_Tensor& tensor = *value.mutable_type()->mutable_tensor_type();
  tensor.set_elem_type(elem_type);
  onnx::TensorShapeProto& shape = *tensor.mutable_shape();
  for (int64_t dim : dims) shape.add_dim()->set_dim_value(dim);
  return value;
}

namespace {

onnx::TensorProto Scalar(int elem_type, double value, bool one_element) {
  onnx::TensorProto tensor;
  tensor.set_data_type(elem_type);
  if (one_element) tensor.add_dims(1);
  if (elem_type == onnx::TensorProto::FLOAT) tensor.add_float_data(static_cast<float>(value));
  if (elem_type == onnx::TensorProto::INT64) tensor.add_int64_data(static_cast<int64_t>(value));
  if (elem_type == onnx::TensorProto::BOOL) tensor.add_int32_data(value != 0);
  return tensor;
}

}  // namespace

onnx::GraphProto BuildInitialization(const std::vector<StateItem>& items) {
  onnx::GraphProto graph;
  graph.set_name("ampc_initialization");
  for (const StateItem& item : items) {
    onnx::NodeProto& node = *graph.add_node();
    node.set_name(absl::StrCat(item.name, "/init"));
    node.add_output(item.name);
    if (item.dims.empty()) {
      node.set_op_type("Constant");
      *node.add_attribute() =
          onnx::MakeAttribute("value", Scalar(item.elem_type, item.value, false));
    } else {
      const std::string shape = absl::StrCat(item.name, ".shape");
      onnx::NodeProto& dims = *graph.add_node();
      dims.set_name(absl::StrCat(item.name, "/shape"));
      dims.set_op_type("Constant");
      dims.add_output(shape);
      *dims.add_attribute() = onnx::MakeAttribute("value_ints", item.dims);
      // The shape must exist before the fill: swap the two nodes into order.
      graph.mutable_node()->SwapElements(graph.node_size() - 1, graph.node_size() - 2);
      node.set_op_type("ConstantOfShape");
      node.add_input(shape);
      *node.add_attribute() =
          onnx::MakeAttribute("value", Scalar(item.elem_type, item.value, true));
    }
    *graph.add_output() = TensorValue(item.name, item.elem_type, item.dims);
  }
  return graph;
}

}  // namespace ampc
