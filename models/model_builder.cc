#include "models/model_builder.h"

#include <cmath>
#include <cstring>

namespace ampc::models {
namespace {

onnx::TensorProto* AddInitializer(onnx::GraphProto* graph, const std::string& name, int data_type,
                                  const std::vector<int64_t>& dims) {
  onnx::TensorProto* tensor = graph->add_initializer();
  tensor->set_name(name);
  tensor->set_data_type(data_type);
  for (int64_t dim : dims) tensor->add_dims(dim);
  return tensor;
}

int64_t ElementCount(const std::vector<int64_t>& dims) {
  int64_t count = 1;
  for (int64_t dim : dims) count *= dim;
  return count;
}

template <typename T>
void SetRawData(onnx::TensorProto* tensor, const std::vector<T>& values) {
  std::string raw(values.size() * sizeof(T), '\0');
  std::memcpy(raw.data(), values.data(), raw.size());
  tensor->set_raw_data(std::move(raw));
}

onnx::AttributeProto* AddAttribute(onnx::NodeProto* node, const std::string& name,
                                   onnx::AttributeProto::AttributeType type) {
  onnx::AttributeProto* attribute = node->add_attribute();
  attribute->set_name(name);
  attribute->set_type(type);
  return attribute;
}

}  // namespace

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
  std::vector<float> values(ElementCount(dims));
  // Built from the raw 32-bit draws (not std::uniform_real_distribution, whose algorithm is
  // implementation-defined), so every standard library gives the same weights.
  for (float& v : values) v = (static_cast<float>(rng() >> 8) * 0x1p-24f * 2.0f - 1.0f) * bound;
  SetRawData(AddInitializer(graph, name, onnx::TensorProto::FLOAT, dims), values);
}

void AddFilledInitializer(onnx::GraphProto* graph, const std::string& name,
                          const std::vector<int64_t>& dims, float value) {
  SetRawData(AddInitializer(graph, name, onnx::TensorProto::FLOAT, dims),
             std::vector<float>(ElementCount(dims), value));
}

void AddInt64Initializer(onnx::GraphProto* graph, const std::string& name,
                         const std::vector<int64_t>& values) {
  const std::vector<int64_t> dims = {static_cast<int64_t>(values.size())};
  SetRawData(AddInitializer(graph, name, onnx::TensorProto::INT64, dims), values);
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

void AddScalarConstant(onnx::GraphProto* graph, const std::string& name, float value) {
  onnx::NodeProto* node = AddNode(graph, "Constant", {}, {name}, "/" + name + "/Constant");
  onnx::TensorProto* tensor =
      AddAttribute(node, "value", onnx::AttributeProto::TENSOR)->mutable_t();
  tensor->set_data_type(onnx::TensorProto::FLOAT);
  tensor->add_float_data(value);
}

void AddIntAttribute(onnx::NodeProto* node, const std::string& name, int64_t value) {
  AddAttribute(node, name, onnx::AttributeProto::INT)->set_i(value);
}

void AddIntsAttribute(onnx::NodeProto* node, const std::string& name,
                      const std::vector<int64_t>& values) {
  onnx::AttributeProto* attribute = AddAttribute(node, name, onnx::AttributeProto::INTS);
  for (int64_t value : values) attribute->add_ints(value);
}

void AddFloatAttribute(onnx::NodeProto* node, const std::string& name, float value) {
  AddAttribute(node, name, onnx::AttributeProto::FLOAT)->set_f(value);
}

void AddLinearGemm(onnx::GraphProto* graph, const std::string& name, const std::string& x,
                   const std::string& y, int64_t in, int64_t out, std::mt19937& rng) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in));
  AddUniformInitializer(graph, name + ".weight", {out, in}, bound, rng);
  AddUniformInitializer(graph, name + ".bias", {out}, bound, rng);
  onnx::NodeProto* gemm =
      AddNode(graph, "Gemm", {x, name + ".weight", name + ".bias"}, {y}, "/" + name + "/Gemm");
  AddIntAttribute(gemm, "transB", 1);
}

void AddCrossEntropyLoss(onnx::GraphProto* graph, const std::string& logits,
                         const std::string& label, const std::string& loss) {
  onnx::NodeProto* node =
      AddNode(graph, "SoftmaxCrossEntropyLoss", {logits, label}, {loss}, "/loss");
  AddAttribute(node, "reduction", onnx::AttributeProto::STRING)->set_s("mean");
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
