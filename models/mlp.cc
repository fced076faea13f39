#include "models/mlp.h"

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
    const bool last = i + 2 == layers.size();
    const std::string y = last ? "logits" : fc + ".out";
    AddLinearGemm(graph, fc, x, y, layers[i], layers[i + 1], rng);
    if (last) break;
    x = fc + ".relu";
    AddNode(graph, "Relu", {y}, {x}, "/" + fc + "/Relu");
  }
  AddCrossEntropyLoss(graph, "logits", "label", "loss");
  AddTensorValue(graph->add_output(), "logits", onnx::TensorProto::FLOAT, {-1, layers.back()});
  AddTensorValue(graph->add_output(), "loss", onnx::TensorProto::FLOAT, {});
  return model;
}

}  // namespace ampc::models
