// ConvertConstant (passes/graph/convert_constant.h) for a deferred tensor (deferred_data.h): its
// data is read, converted and written to the sink a chunk at a time.
#pragma once

#include <onnx/onnx_pb.h>

#include "absl/status/statusor.h"
#include "passes/graph/convert_constant.h"

namespace ampc {

// `tensor` (deferred, FLOAT, FLOAT16 or BFLOAT16) as `to`, with ConvertConstant's rounding,
// clamping and counts. The result is deferred in the sink, or holds raw_data when no sink is set.
absl::StatusOr<onnx::TensorProto> ConvertDeferred(const onnx::TensorProto& tensor, int to,
                                                  bool clamp, ConversionStats& stats);

}  // namespace ampc
