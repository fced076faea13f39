// Visiting every TensorProto of a model, with where it sits (for messages).
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace ampc {

struct TensorSite {
  const onnx::NodeProto* node = nullptr;  // set for attribute tensors
  const std::string* attribute = nullptr;
};

// `tensor 'w'`, `attribute 'value' of node 'c' (Constant)`, or both joined by ` in `.
std::string DescribeTensor(const onnx::TensorProto& tensor, const TensorSite& site);

using TensorFn = absl::FunctionRef<absl::Status(onnx::TensorProto&, const TensorSite&)>;

// Calls `fn` on the tensors of the graph, its subgraphs, tensor and sparse tensor attributes,
// sparse initializers, functions and training_info; stops at the first error. Absent optional
// fields are not created.
absl::Status VisitTensors(onnx::ModelProto& model, TensorFn fn);

}  // namespace ampc
