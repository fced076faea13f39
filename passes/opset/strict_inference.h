// ONNX's shape and type inference in its strict form, over ampc's schemas: what the infer-types
// pass (passes/infer_types.h) runs, and what autodiff checks a function body with.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "absl/status/status.h"

namespace ampc {

// Runs strict inference (type checks on, node errors fatal) on `model` in place. Errors are
// InvalidArgument "<file>: type inference: <what>".
absl::Status InferTypesStrict(onnx::ModelProto& model, const std::string& file);

}  // namespace ampc
