// Host tensors for kernel and session tests: built from values, read back as values.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/numerics/half.h"
#include "runtime/core/tensor.h"

namespace ampc::testing {

// A host tensor of `dtype` holding `values` as T, the dtype's storage type (Half, int64_t, ...).
template <typename T>
Tensor Make(DType dtype, Shape shape, const std::vector<T>& values) {
  Tensor t = Tensor::Host(dtype, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.size()) << "values do not fill the shape";
  for (size_t i = 0; i < values.size() && static_cast<int64_t>(i) < t.size(); ++i) {
    t.data<T>()[i] = values[i];
  }
  return t;
}

inline Tensor Floats(Shape shape, const std::vector<float>& values) {
  return Make(DType::kFloat, std::move(shape), values);
}

inline Tensor Int64s(Shape shape, const std::vector<int64_t>& values) {
  return Make(DType::kInt64, std::move(shape), values);
}

// FP16 tensor of `values`, each rounded to nearest even.
inline Tensor Halves(Shape shape, const std::vector<float>& values) {
  std::vector<Half> halves;
  for (float v : values) halves.push_back(Half{FloatToHalf(v)});
  return Make(DType::kFloat16, std::move(shape), halves);
}

// n pseudo-random floats in [lo, hi) from `seed` (a fixed LCG: the same values everywhere).
inline std::vector<float> PseudoFloats(size_t n, uint32_t seed, float lo, float hi) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = lo + (hi - lo) * static_cast<float>(seed >> 8) / static_cast<float>(1u << 24);
  }
  return v;
}

// The elements as T, the tensor's storage type.
template <typename T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.size());
}

}  // namespace ampc::testing
