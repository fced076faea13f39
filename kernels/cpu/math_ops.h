// The math family (math_kernels.cc): the parts of Cast every backend's kernel shares, so each
// backend accepts the same nodes with the same messages.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/kernel.h"

namespace ampc::math_ops {

// Cast's target type: attribute 'to' (a type name in opset 1, the enum value later), checked to
// be a supported runtime type; opset 19's attribute 'saturate' is not supported.
absl::StatusOr<DType> CastTarget(const KernelInfo& info);

// A backend's conversion of `input` to element type `to` into output 0.
using CastFunction = absl::Status (*)(KernelContext& context, const Tensor& input, DType to);

// Cast, its target type read once when the session is created.
class CastKernel final : public OpKernel {
 public:
  CastKernel(DType to, CastFunction cast) : to_(to), cast_(cast) {}
  absl::Status Compute(KernelContext& context) override {
    return cast_(context, context.in(0), to_);
  }

 private:
  DType to_;
  CastFunction cast_;
};

}  // namespace ampc::math_ops
