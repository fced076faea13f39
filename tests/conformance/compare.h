// Comparing a runtime tensor with an expected one, as numpy.testing.assert_allclose does.
#pragma once

#include "absl/status/status.h"
#include "runtime/core/tensor.h"

namespace ampc {

struct Tolerance {
  double rtol;
  double atol;
};

// ONNX's backend tests (onnx/backend/test/runner): rtol 1e-3, atol 1e-7.
inline constexpr Tolerance kOnnxBackendTolerance{1e-3, 1e-7};

// OK when dtypes and shapes are equal and every element satisfies
// |actual - expected| <= atol + rtol * |expected| (NaN matches NaN); integers and bools must be
// equal. Otherwise InvalidArgument naming the first differing element and how many differ.
absl::Status Compare(const Tensor& expected, const Tensor& actual, const Tolerance& tolerance);

}  // namespace ampc
