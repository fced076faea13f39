// Compile-time conversion of a float constant between FP32, FP16 and BF16. The span core,
// ConvertFloats (kernels/numerics/convert_floats.h), is what a caller streaming a tensor in chunks
// uses; ConversionStats is its.
#pragma once

#include <onnx/onnx_pb.h>

#include "kernels/numerics/convert_floats.h"

namespace ampc {

// `tensor` (FLOAT, FLOAT16 or BFLOAT16) as `to`, rounding to nearest even; 0, NaN and ±inf are kept
// exactly. The result holds raw_data and the same dims; its name is left to the caller. Tensors of
// 1 MiB and more are converted on two threads.
onnx::TensorProto ConvertConstant(const onnx::TensorProto& tensor, int to, bool clamp,
                                  ConversionStats& stats);

}  // namespace ampc
