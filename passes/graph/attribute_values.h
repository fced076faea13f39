// Attribute values that mean nothing below a minimum (a stride, dilation, kernel size, group count
// or block size under 1). ONNX 1.12's checker does not look at them and its inference uses some
// unchecked: a Conv with strides [0, 2] made it divide by zero and kill the process with SIGFPE
// (found by fuzz/session_fuzzer.cc), and a Conv with group 0 compiled without a word. Such
// models are refused before any inference runs.
#pragma once

#include <onnx/onnx_pb.h>

#include "absl/status/status.h"

namespace ampc {

// InvalidArgument "node 'c' (Conv): attribute 'strides' holds 0; it must be at least 1" for the
// first such value in the main graph, its subgraphs or a model-local function.
absl::Status CheckAttributeValues(const onnx::ModelProto& model);

}  // namespace ampc
