// Model-local functions (ModelProto.functions) that call themselves, directly or through others.
// ONNX's checker and type inference expand function bodies recursively and would never return,
// so such a model is refused before either runs.
#pragma once

#include <onnx/onnx_pb.h>

#include "absl/status/status.h"

namespace ampc {

// InvalidArgument "function 'D.F' calls itself (D.F -> D.G -> D.F)" for the first cycle found.
absl::Status CheckFunctionsDoNotRecurse(const onnx::ModelProto& model);

}  // namespace ampc
