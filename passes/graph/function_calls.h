// Model-local functions (ModelProto.functions) that call themselves, directly or through others,
// or that expand to too many nodes. ONNX's checker and type inference expand function bodies
// recursively: a cycle would never return, and 30 functions each calling the next twice expand
// to 2^30 nodes from a 2 KB file. Such a model is refused before either runs.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>

#include "absl/status/status.h"

namespace ampc {

// The most nodes a model may have with every function call expanded (subgraphs included).
inline constexpr uint64_t kMaxExpandedNodes = 10'000'000;

// InvalidArgument "function 'D.F' calls itself (D.F -> D.G -> D.F)" for the first cycle found;
// "function 'D.F' expands to more than N nodes ..." for the first function (callees first) or
// the graph whose expansion exceeds kMaxExpandedNodes. Linear in the model's size.
absl::Status CheckFunctionExpansion(const onnx::ModelProto& model);

}  // namespace ampc
