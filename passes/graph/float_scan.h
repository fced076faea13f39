// One pass over a float tensor's values for what the checks before a conversion read:
// verify-input's NaN and infinity counts and autocast's largest finite |x|. The scan of a deferred
// tensor (deferred_data.h) is kept, so a compile reads its large weights once for both.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>

namespace ampc {

struct FloatScan {
  int64_t nan = 0;
  int64_t inf = 0;
  float max_finite_abs = 0;  // FLOAT tensors only; 0 for the other types
};

// The counts for FLOAT, DOUBLE, FLOAT16 and BFLOAT16 tensors (nothing counted for other types),
// whichever field or file holds the data. A deferred tensor whose data cannot be read counts
// what was read: the conversion or the save reports the error.
FloatScan ScanFloats(const onnx::TensorProto& tensor);

}  // namespace ampc
