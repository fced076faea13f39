// Compile-time conversion of a float constant between FP32, FP16 and BF16.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>

namespace ampc {

struct ConversionStats {
  int64_t clamped = 0;          // finite values beyond ±65504 clamped (FP16 with clamp)
  int64_t overflowed = 0;       // finite values that became ±inf
  int64_t flushed_to_zero = 0;  // non-zero values that became zero
};

// `tensor` (FLOAT, FLOAT16 or BFLOAT16) as `to`, rounding to nearest even; 0, NaN and ±inf are kept
// exactly. The result holds raw_data and the same dims; its name is left to the caller.
onnx::TensorProto ConvertConstant(const onnx::TensorProto& tensor, int to, bool clamp,
                                  ConversionStats& stats);

}  // namespace ampc
