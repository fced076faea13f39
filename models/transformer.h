// The bundled transformer encoder: token + positional embedding, pre-LN encoder layers
// (multi-head self-attention, GELU MLP), mean pooling over the sequence and a linear classifier.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>

#include "absl/status/statusor.h"

namespace ampc::models {

struct TransformerOptions {
  int64_t vocab = 1000;
  int64_t seq = 32;
  int64_t hidden = 64;
  int64_t heads = 4;  // must divide hidden
  int64_t layers = 2;
  int64_t ffn = 0;  // 0: 4 * hidden
  int64_t classes = 10;
  uint32_t seed = 0;
};

// Inputs `tokens` int64[N,seq] and `label` int64[N]; outputs `logits` float[N,classes] and `loss`
// (the mean SoftmaxCrossEntropyLoss). Written as PyTorch exports at opset 17: linear layers on 3-D
// values are MatMul with weights [in, out] + Add, initialised U(-1/sqrt(in), 1/sqrt(in)); GELU is
// the exact erf form; embeddings have unit variance (U(-sqrt 3, sqrt 3)); LayerNorms start at
// scale 1, bias 0. IR version 8. The same options give the same model, byte for byte; options
// that give no valid model are an InvalidArgument error.
absl::StatusOr<onnx::ModelProto> BuildTransformer(const TransformerOptions& options = {});

}  // namespace ampc::models
