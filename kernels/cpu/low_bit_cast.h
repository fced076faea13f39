// Cast and CastLike where the input or the target is a low-bit type (low_bit.h): every other
// runtime type converts to and from them through float.
#pragma once

#include "absl/status/status.h"
#include "kernels/cpu/low_bit.h"
#include "runtime/core/kernel.h"

namespace ampc {

// `input` converted to `to` into output 0; one of the two types is low-bit.
absl::Status CastLowBit(KernelContext& context, const Tensor& input, DType to,
                        const LowBitRounding& rounding);

}  // namespace ampc
