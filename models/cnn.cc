#include "models/cnn.h"

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "models/model_builder.h"

namespace ampc::models {
namespace {

absl::Status Validate(const CnnOptions& options) {
  if (options.channels.size() < 2) {
    return absl::InvalidArgumentError("the CNN needs input channels and at least one conv block");
  }
  for (int64_t c : options.channels) {
    if (c <= 0) return absl::InvalidArgumentError("CNN channel counts must be positive");
  }
  const size_t blocks = options.channels.size() - 1;
  if (blocks >= 62 || (options.image_size >> blocks) < 1) {
    return absl::InvalidArgumentError("the image is too small for that many pooling blocks");
  }
  if (options.hidden <= 0 || options.classes <= 0) {
    return absl::InvalidArgumentError("CNN hidden and classes must be positive");
  }
  return absl::OkStatus();
}

// `/blockK/...`: Conv(3x3, pad 1) - BatchNormalization - Relu - MaxPool(2x2); returns its output.
std::string AddConvBlock(onnx::GraphProto* graph, const std::string& block, const std::string& x,
                         int64_t in, int64_t out, std::mt19937& rng) {
  const std::string conv = block + ".conv", bn = block + ".bn";
  const float bound = 1.0f / std::sqrt(static_cast<float>(in * 3 * 3));
  AddUniformInitializer(graph, conv + ".weight", {out, in, 3, 3}, bound, rng);
  AddUniformInitializer(graph, conv + ".bias", {out}, bound, rng);
  onnx::NodeProto* node = AddNode(graph, "Conv", {x, conv + ".weight", conv + ".bias"},
                                  {conv + ".out"}, "/" + block + "/conv/Conv");
  AddIntsAttribute(node, "kernel_shape", {3, 3});
  AddIntsAttribute(node, "pads", {1, 1, 1, 1});
  AddIntsAttribute(node, "strides", {1, 1});

  AddFilledInitializer(graph, bn + ".weight", {out}, 1.0f);
  AddFilledInitializer(graph, bn + ".bias", {out}, 0.0f);
  AddFilledInitializer(graph, bn + ".running_mean", {out}, 0.0f);
  AddFilledInitializer(graph, bn + ".running_var", {out}, 1.0f);
  node = AddNode(
      graph, "BatchNormalization",
      {conv + ".out", bn + ".weight", bn + ".bias", bn + ".running_mean", bn + ".running_var"},
      {bn + ".out"}, "/" + block + "/bn/BatchNormalization");
  AddFloatAttribute(node, "epsilon", 1e-5f);
  AddFloatAttribute(node, "momentum", 0.9f);  // ONNX's momentum is 1 - PyTorch's (0.1)

  AddNode(graph, "Relu", {bn + ".out"}, {block + ".relu"}, "/" + block + "/Relu");
  node = AddNode(graph, "MaxPool", {block + ".relu"}, {block + ".out"}, "/" + block + "/MaxPool");
  AddIntsAttribute(node, "kernel_shape", {2, 2});
  AddIntsAttribute(node, "strides", {2, 2});
  return block + ".out";
}

}  // namespace

absl::StatusOr<onnx::ModelProto> BuildCnn(const CnnOptions& options) {
  if (absl::Status valid = Validate(options); !valid.ok()) return valid;
  onnx::ModelProto model = NewModel("fashion_mnist_cnn");
  onnx::GraphProto* graph = model.mutable_graph();
  const std::vector<int64_t>& channels = options.channels;
  std::mt19937 rng(options.seed);
  AddTensorValue(graph->add_input(), "image", onnx::TensorProto::FLOAT,
                 {-1, channels.front(), options.image_size, options.image_size});
  AddTensorValue(graph->add_input(), "label", onnx::TensorProto::INT64, {-1});
  std::string x = "image";
  int64_t size = options.image_size;
  for (size_t i = 0; i + 1 < channels.size(); ++i) {
    x = AddConvBlock(graph, "block" + std::to_string(i + 1), x, channels[i], channels[i + 1], rng);
    size /= 2;
  }
  onnx::NodeProto* flatten = AddNode(graph, "Flatten", {x}, {"flat"}, "/Flatten");
  AddIntAttribute(flatten, "axis", 1);
  AddLinearGemm(graph, "fc1", "flat", "fc1.out", channels.back() * size * size, options.hidden,
                rng);
  AddNode(graph, "Relu", {"fc1.out"}, {"fc1.relu"}, "/fc1/Relu");
  AddLinearGemm(graph, "fc2", "fc1.relu", "logits", options.hidden, options.classes, rng);
  AddCrossEntropyLoss(graph, "logits", "label", "loss");
  AddTensorValue(graph->add_output(), "logits", onnx::TensorProto::FLOAT, {-1, options.classes});
  AddTensorValue(graph->add_output(), "loss", onnx::TensorProto::FLOAT, {});
  return model;
}

}  // namespace ampc::models
