// The bundled Fashion-MNIST MLP: 784-256-128-10 with ReLU, and a cross-entropy loss.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <vector>

namespace ampc::models {

struct MlpOptions {
  std::vector<int64_t> layers = {784, 256, 128, 10};
  uint32_t seed = 0;
};

// Inputs `image` float[N,784] and `label` int64[N]; outputs `logits` float[N,10] and `loss` (the
// mean SoftmaxCrossEntropyLoss). Linear layers are Gemm(transB=1) with weights [out, in], as
// PyTorch exports nn.Linear, initialised like PyTorch: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
// Opset 17, IR version 8. The same options give the same model, byte for byte.
onnx::ModelProto BuildMlp(const MlpOptions& options = {});

}  // namespace ampc::models
