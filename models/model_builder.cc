#include "models/model_builder.h"

#include <cstring>

namespace ampc::models {

void AddTensorValue(onnx::ValueInfoProto* value, const std::string& name, int elem_type,
                    const std::vector<int64_t>& dims) {
  value->set_name(name);
  onnx::TypeProto_Tensor* tensor = value->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(elem_type);
  onnx::TensorShapeProto* shape = tensor->mutable_shape();
  for (int64_t dim : dims) {
    if (dim < 0) {
      shape->add_dim()->set_dim_param("N");
    } else {
      shape->add_dim()->set_dim_value(dim);
    }
  }
}

void AddUniformInitializer(onnx::GraphProto* graph, const std::string& name,
                           const std::vector<int64_t>& dims, float bound, std::mt19937& rng) {
  onnx::TensorProto* tensor = graph->add_initializer();
  tensor->set_name(name);
  tensor->set_data_type(onnx::TensorProto::FLOAT);
  int64_t count = 1;
  for (int64_t dim : dims) {
    tensor->add_dims(dim);
    count *= dim;
  }
  std::vector<float> values(count);
  // Built from the raw 32-bit draws (not std::uniform_real_distribution, whose algorithm is
  // implementation-defined), so every standard library gives the same weights.
  for (float& v : values) v = (static_cast<float>(rng() >> 8) * 0x1p-24f * 2.0f - 1.0f) * bound;
  std::string raw(values.size() * sizeof(float), '\0');
  std::memcpy(raw.data(), values.data(), raw.size());
  tensor->set_raw_data(std::move(raw));
}

onnx::NodeProto* AddNode(onnx::GraphProto* graph, const std::string& op,
                         const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, const std::string& name) {
  onnx::NodeProto* node = graph->add_node();
  node->set_op_type(op);
  node->set_name(name);
  for (const std::string& input : inputs) node->add_input(input);
  for (const std::string& output : outputs) node->add_output(output);
  return node;
}

onnx::ModelProto NewModel(const std::string& graph_name) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("ampc");
  model.set_producer_version(AMPC_VERSION);
  onnx::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  model.mutable_graph()->set_name(graph_name);
  return model;
}

}  // namespace ampc::models
