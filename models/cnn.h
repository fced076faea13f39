// The bundled Fashion-MNIST CNN: 2x[Conv3x3-BatchNorm-Relu-MaxPool2x2], then 2 linear layers.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace ampc::models {

struct CnnOptions {
  // Input channels, then the output channels of each conv block.
  std::vector<int64_t> channels = {1, 16, 32};
  int64_t image_size = 28;  // square images; each block halves it (MaxPool floors)
  int64_t hidden = 128;
  int64_t classes = 10;
  uint32_t seed = 0;
};

// Inputs `image` float[N,C,S,S] and `label` int64[N]; outputs `logits` float[N,classes] and
// `loss` (the mean SoftmaxCrossEntropyLoss). Conv and Gemm weights are initialised like PyTorch's
// nn.Conv2d / nn.Linear, U(-1/sqrt(fan_in), 1/sqrt(fan_in)); BatchNormalization is in inference
// form with scale 1, bias 0, running mean 0 and variance 1 (the trainer updates the running
// statistics as state, docs/training.md). Opset 17, IR version 8. The same options give the same
// model, byte for byte; options that give no valid model are an InvalidArgument error.
absl::StatusOr<onnx::ModelProto> BuildCnn(const CnnOptions& options = {});

}  // namespace ampc::models
