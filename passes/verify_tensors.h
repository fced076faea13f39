// The tensors a model holds, checked before anything reads them: initializers and tensor
// attributes (Constant's value, ...) in the graph, its subgraphs, functions and training_info.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ampc {

// Errors (InvalidArgument, one line naming the tensor): an undefined or unknown data type, a
// negative dim, dims whose size overflows, data that does not fill the dims exactly (a model
// declaring 10^12 elements but holding 16 bytes is refused before anything is allocated).
// NaN and infinite float values are legal ONNX and only warned about: one line per tensor (at
// most kMaxNonFiniteWarnings, then a count), appended to `warnings`.
absl::Status VerifyTensors(const onnx::ModelProto& model, std::vector<std::string>& warnings);

inline constexpr int kMaxNonFiniteWarnings = 10;

}  // namespace ampc
