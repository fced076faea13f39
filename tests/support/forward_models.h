// Forward models without a loss, for `--loss-op` (docs/training.md): the bundled MLP with its
// SoftmaxCrossEntropyLoss node, `label` input and `loss` output removed, `logits` its only output.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "models/mlp.h"

namespace ampc::testing {

inline onnx::ModelProto MlpWithoutLoss(const models::MlpOptions& options = {}) {
  onnx::ModelProto model = models::BuildMlp(options);
  onnx::GraphProto& graph = *model.mutable_graph();
  auto drop = [](auto& list, auto is_loss) {
    for (int i = list.size() - 1; i >= 0; --i) {
      if (is_loss(list.Get(i))) list.DeleteSubrange(i, 1);
    }
  };
  drop(*graph.mutable_node(),
       [](const onnx::NodeProto& n) { return n.op_type() == "SoftmaxCrossEntropyLoss"; });
  drop(*graph.mutable_input(), [](const onnx::ValueInfoProto& v) { return v.name() == "label"; });
  drop(*graph.mutable_output(), [](const onnx::ValueInfoProto& v) { return v.name() == "loss"; });
  return model;
}

}  // namespace ampc::testing
