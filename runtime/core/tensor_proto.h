// Conversions between onnx::TensorProto (initializers, Constant attributes, .pb test data) and
// host tensors.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "absl/status/statusor.h"
#include "runtime/core/tensor.h"

namespace ampc {

// The tensor's data in host memory; data in an external file must have been loaded already.
// Errors name the tensor.
absl::StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& proto);

// A serialized TensorProto file (`.pb`, as ONNX's test data and `ampc run` outputs). Errors name
// the file: cannot open, not a TensorProto (a cut or corrupt file), data that does not fill the
// shape.
absl::StatusOr<Tensor> ReadTensorProtoFile(const std::string& path);

// The value of a Constant node (value, value_float(s) or value_int(s)); errors name the node.
absl::StatusOr<Tensor> ConstantNodeValue(const onnx::NodeProto& node);

// A TensorProto with raw_data (the tensor must be in host memory).
onnx::TensorProto TensorToProto(const Tensor& tensor, const std::string& name);

}  // namespace ampc
