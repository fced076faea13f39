#include "models/mlp.h"

#include <cmath>
#include <random>
#include <string>

#include "models/model_builder.h"

namespace ampc::models {

onnx::ModelProto BuildMlp(const MlpOptions& options) {
  onnx::ModelProto model = NewModel("fashion_mnist_mlp");
  onnx::GraphProto* graph = model.mutable_graph();
  const std::vector<int64_t>& layers = options.layers;
  std::mt19937 rng(options.seed);
  AddTensorValue(graph->add_input(), "image", onnx::TensorProto::FLOAT, {-1, layers.front()});
  AddTensorValue(graph->add_input(), "label", onnx::TensorProto::INT64, {-1});
  std::string x = "image";
  for (size_t i = 0; i + 1 < layers.size(); ++i) {
    const std::string fc = "fc" + std::to_string(i + 1);
    const float bound = 1.0f / std::sqrt(static_cast<float>(layers[i]));
    AddUniformInitializer(graph, fc + ".weight", {layers[i + 1], layers[i]}, bound, rng);
    AddUniformInitializer(graph, fc + ".bias", {layers[i + 1]}, bound, rng);
    const bool last = i + 2 == layers.size();
    const std::string y = last ? "logits" : fc + ".out";
    onnx::NodeProto* gemm =
        AddNode(graph, "Gemm", {x, fc + ".weight", fc + ".bias"}, {y}, "/" + fc + "/Gemm");
    onnx::AttributeProto* trans_b = gemm->add_attribute();
    trans_b->set_name("transB");
    trans_b->set_type(onnx::AttributeProto::INT);
    trans_b->set_i(1);
    if (last) break;
    x = fc + ".relu";
    AddNode(graph, "Relu", {y}, {x}, "/" + fc + "/Relu");
  }
  onnx::NodeProto* loss =
      AddNode(graph, "SoftmaxCrossEntropyLoss", {"logits", "label"}, {"loss"}, "/loss");
  onnx::AttributeProto* reduction = loss->add_attribute();
  reduction->set_name("reduction");
  reduction->set_type(onnx::AttributeProto::STRING);
  reduction->set_s("mean");
  AddTensorValue(graph->add_output(), "logits", onnx::TensorProto::FLOAT, {-1, layers.back()});
  AddTensorValue(graph->add_output(), "loss", onnx::TensorProto::FLOAT, {});
  return model;
}

}  // namespace ampc::models
