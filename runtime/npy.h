// NumPy .npy files (format versions 1-3, C order, little endian) to and from host tensors.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "runtime/core/tensor.h"

namespace ampc {

// Errors name the file: bad magic, unsupported dtype descr, Fortran order, short data.
absl::StatusOr<Tensor> ReadNpy(const std::string& path);

// The bytes of a version 1.0 .npy file. bfloat16 has no NumPy dtype: it is widened (exactly) to
// float32.
std::string EncodeNpy(const Tensor& host_tensor);

}  // namespace ampc
