// A model-local FunctionProto for an ai.ampc op, from its body in ONNX text.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ampc {

struct FunctionText {
  std::vector<std::string> inputs, outputs, attributes;
  std::string nodes;  // one node per line, ONNX text syntax
};

// The function `op` of domain ai.ampc (which it also imports: libonnx's function expansion looks
// the op up there) over default-domain opset `onnx_opset`. A body that does not parse is an
// InternalError: it is ampc's own text.
absl::StatusOr<onnx::FunctionProto> ParseAmpcFunction(const std::string& op,
                                                      const FunctionText& body, int onnx_opset);

}  // namespace ampc
