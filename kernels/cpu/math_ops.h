// The math family (math_kernels.cc): the parts of Cast every backend's kernel shares, so each
// backend accepts the same nodes with the same messages.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cpu/low_bit.h"
#include "runtime/core/kernel.h"

namespace ampc::math_ops {

// Cast's target type: attribute 'to' (a type name in opset 1, the enum value later), checked to
// be a supported runtime type.
absl::StatusOr<DType> CastTarget(const KernelInfo& info);

// Cast-19's and CastLike-19's 'saturate' (FP8 only) and their round_mode of opset 24 (E8M0
// only); InvalidArgument for an unknown round_mode.
absl::StatusOr<LowBitRounding> CastRounding(const KernelInfo& info);

// A backend's conversion of `input` to element type `to` into output 0.
using CastFunction = absl::Status (*)(KernelContext& context, const Tensor& input, DType to,
                                      const LowBitRounding& rounding);

// Cast, its target type and rounding read once when the session is created.
class CastKernel final : public OpKernel {
 public:
  CastKernel(DType to, LowBitRounding rounding, CastFunction cast)
      : to_(to), rounding_(rounding), cast_(cast) {}
  absl::Status Compute(KernelContext& context) override {
    return cast_(context, context.in(0), to_, rounding_);
  }

 private:
  DType to_;
  LowBitRounding rounding_;
  CastFunction cast_;
};

}  // namespace ampc::math_ops
