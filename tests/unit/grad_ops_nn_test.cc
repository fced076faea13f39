// ai.ampc gradient ops of the CNN layers (ConvGrad, MaxPoolGrad, AveragePoolGrad,
// BatchNormalizationGrad) against central finite differences of the standard forward op (FP64),
// in FP16/BF16 against their FP32 result rounded, and each op's function body (inlined, FP64)
// against its kernel (CheckGradCase).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/substitute.h"
#include "kernels/numerics/float16.h"
#include "tests/support/grad_op_check.h"
#include "tests/support/kernel_runs.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

using testing::CheckGradCase;
using testing::Dims;
using testing::GradCase;
using testing::Pseudo;
using testing::Value;

constexpr DType kF64 = DType::kDouble;

// y = Conv<attributes>(x, w, b); dx, dw, db = ai.ampc.ConvGrad<attributes>(dy, x, w).
GradCase ConvCase(const Shape& x, const Shape& w, const Shape& y, const std::string& attributes) {
  GradCase c;
  c.forward = absl::Substitute(
      "f ($$T[$0] x, $$T[$1] w, $$T[$2] b) => ($$T[$3] y) { y = Conv<$4>(x, w, b) }", Dims(x),
      Dims(w), w[0], Dims(y), attributes);
  c.grad = absl::Substitute(
      "g ($$T[$3] dy, $$T[$0] x, $$T[$1] w) => ($$T[$0] dx, $$T[$1] dw, $$T[$2] db) {\n"
      "  dx, dw, db = ai.ampc.ConvGrad<$4>(dy, x, w)\n}",
      Dims(x), Dims(w), w[0], Dims(y), attributes);
  c.inputs = {Pseudo(kF64, x, -1, 1, 21), Pseudo(kF64, w, -1, 1, 23),
              Pseudo(kF64, {w[0]}, -1, 1, 25)};
  c.wrt = {0, 1, 2};
  c.grad_inputs = [](const std::vector<Value>& in, const auto&, const Value& r) {
    return std::vector<Value>{r, in[0], in[1]};
  };
  return c;
}

TEST(ConvGradTest, PaddedMatchesFiniteDifferences) {
  CheckGradCase(ConvCase({1, 2, 5, 5}, {3, 2, 3, 3}, {1, 3, 5, 5}, "pads = [1, 1, 1, 1]"));
}

TEST(ConvGradTest, StridedWithUnevenPadsMatchesFiniteDifferences) {
  CheckGradCase(
      ConvCase({2, 2, 6, 5}, {3, 2, 3, 2}, {2, 3, 3, 3}, "strides = [2, 2], pads = [0, 1, 1, 0]"));
}

TEST(ConvGradTest, GroupedAndDilatedMatchesFiniteDifferences) {
  CheckGradCase(
      ConvCase({2, 4, 6, 5}, {4, 2, 2, 2}, {2, 4, 4, 4}, "group = 2, dilations = [2, 1]"));
  CheckGradCase(ConvCase({1, 4, 5, 5}, {4, 1, 3, 3}, {1, 4, 3, 3}, "group = 4"), DType::kBFloat16,
                1.6e-2);
}

TEST(ConvGradTest, EndPaddingTheLastWindowDoesNotReachMatchesFiniteDifferences) {
  // Rows: 9 + 1 + 2 padded, windows of 3 at stride 2 cover padded rows 0..10: input row 8 is in
  // the last window but the end pad's second row is in none (a ConvTranspose with the forward's
  // pads would crop row 8). Columns: stride 3 drops none of the 8 + 1.
  CheckGradCase(ConvCase({1, 2, 9, 8}, {4, 1, 3, 3}, {1, 4, 5, 3},
                         "group = 2, strides = [2, 3], pads = [1, 0, 2, 1]"));
}

TEST(ConvGradTest, OneDimensionalAndSamePaddingMatchFiniteDifferences) {
  CheckGradCase(ConvCase({2, 3, 7}, {2, 3, 3}, {2, 2, 3}, "strides = [2]"));
  CheckGradCase(ConvCase({1, 2, 5, 4}, {2, 2, 2, 3}, {1, 2, 3, 2},
                         "auto_pad = \"SAME_UPPER\", strides = [2, 2]"));
  CheckGradCase(ConvCase({1, 2, 5, 4}, {2, 2, 2, 3}, {1, 2, 3, 2},
                         "auto_pad = \"SAME_LOWER\", strides = [2, 2]"));
  CheckGradCase(
      ConvCase({1, 2, 6, 5}, {2, 2, 3, 3}, {1, 2, 2, 2}, "auto_pad = \"VALID\", strides = [2, 2]"));
}

// y, indices = MaxPool<attributes>(x); dx = ai.ampc.MaxPoolGrad(dy, indices, x).
GradCase MaxPoolCase(const Shape& x, const Shape& y, const std::string& attributes) {
  GradCase c;
  c.forward =
      absl::Substitute("f ($$T[$0] x) => ($$T[$1] y, int64[$1] i) { y, i = MaxPool<$2>(x) }",
                       Dims(x), Dims(y), attributes);
  c.grad = absl::Substitute(
      "g ($$T[$1] dy, int64[$1] i, $$T[$0] x) => ($$T[$0] dx) {\n"
      "  dx = ai.ampc.MaxPoolGrad(dy, i, x)\n}",
      Dims(x), Dims(y));
  c.inputs = {Pseudo(kF64, x, -1, 1, 31)};  // distinct values: no ties within h
  c.wrt = {0};
  c.grad_inputs = [](const std::vector<Value>& in, const std::vector<Value>& out, const Value& r) {
    Value indices = out[1];
    indices.dtype = DType::kInt64;
    return std::vector<Value>{r, indices, in[0]};
  };
  return c;
}

TEST(MaxPoolGradTest, OverlappingWindowsMatchFiniteDifferences) {
  // Stride 1 under a 3x3 window: an element that is the maximum of several windows collects all.
  CheckGradCase(MaxPoolCase({1, 2, 5, 5}, {1, 2, 3, 3}, "kernel_shape = [3, 3]"));
  CheckGradCase(MaxPoolCase({2, 1, 6, 6}, {2, 1, 3, 3},
                            "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]"));
  CheckGradCase(MaxPoolCase({1, 2, 7}, {1, 2, 3}, "kernel_shape = [3], strides = [2]"),
                DType::kBFloat16, 1.6e-2);
}

// dx = MaxPoolGrad(dy, i, x) for FP16 dy [1, 2, 1, 3] into x [1, 2, 1, 4] with the given indices.
std::vector<uint16_t> MaxPoolGradBits(const std::vector<int64_t>& indices) {
  auto out = testing::RunModel(R"(<ir_version: 8, opset_import: ["" : 17, "ai.ampc" : 1]>
g (float16[1, 2, 1, 3] dy, int64[1, 2, 1, 3] i, float16[1, 2, 1, 4] x) => (float16[1, 2, 1, 4] dx) {
  dx = ai.ampc.MaxPoolGrad(dy, i, x)
})",
                               {testing::Halves({1, 2, 1, 3}, {1, 0x1p-11f, 0x1p-11f, 4, 5, 6}),
                                testing::Int64s({1, 2, 1, 3}, indices),
                                testing::Halves({1, 2, 1, 4}, std::vector<float>(8, 0))});
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  const uint16_t* bits = static_cast<const uint16_t*>((*out)[0].raw());
  return std::vector<uint16_t>(bits, bits + 8);
}

TEST(MaxPoolGradTest, IndicesInsideAndAcrossPlanesAddInDyOrderRoundingOnce) {
  const uint16_t four = FloatToHalf(4), five = FloatToHalf(5);
  // Plane-local (the per-plane loop): 1 + 2^-11 + 2^-11 adds in FP32 and rounds once to 1 + 2^-10
  // (rounding after each add would stay at 1).
  EXPECT_EQ(
      MaxPoolGradBits({0, 0, 0, 5, 6, 7}),
      (std::vector<uint16_t>{FloatToHalf(1 + 0x1p-10f), 0, 0, 0, 0, four, five, FloatToHalf(6)}));
  // Plane 1's dy into plane 0 and back (the flat loop): the same sums wherever they land.
  EXPECT_EQ(MaxPoolGradBits({7, 7, 7, 0, 0, 3}),
            (std::vector<uint16_t>{FloatToHalf(9), 0, 0, FloatToHalf(6), 0, 0, 0,
                                   FloatToHalf(1 + 0x1p-10f)}));
}

TEST(MaxPoolGradTest, IndexOutsideXIsAnError) {
  auto out = testing::RunModel(
      R"(<ir_version: 8, opset_import: ["" : 17, "ai.ampc" : 1]>
g (float[1, 1, 1, 2] dy, int64[1, 1, 1, 2] i, float[1, 1, 1, 4] x) => (float[1, 1, 1, 4] dx) {
  dx = ai.ampc.MaxPoolGrad(dy, i, x)
})",
      {testing::Floats({1, 1, 1, 2}, {1, 2}), testing::Int64s({1, 1, 1, 2}, {1, 4}),
       testing::Floats({1, 1, 1, 4}, {0, 0, 0, 0})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("index 4 at flat position 1"), std::string::npos)
      << out.status();
}

// y = AveragePool<attributes>(x); dx = ai.ampc.AveragePoolGrad<attributes>(dy, x).
GradCase AveragePoolCase(const Shape& x, const Shape& y, const std::string& attributes) {
  GradCase c;
  c.forward = absl::Substitute("f ($$T[$0] x) => ($$T[$1] y) { y = AveragePool<$2>(x) }", Dims(x),
                               Dims(y), attributes);
  c.grad = absl::Substitute(
      "g ($$T[$1] dy, $$T[$0] x) => ($$T[$0] dx) { dx = ai.ampc.AveragePoolGrad<$2>(dy, x) }",
      Dims(x), Dims(y), attributes);
  c.inputs = {Pseudo(kF64, x, -1, 1, 41)};
  c.wrt = {0};
  c.grad_inputs = [](const std::vector<Value>& in, const auto&, const Value& r) {
    return std::vector<Value>{r, in[0]};
  };
  return c;
}

TEST(AveragePoolGradTest, PaddingCountsMatchFiniteDifferences) {
  const std::string padded = "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]";
  CheckGradCase(AveragePoolCase({1, 2, 5, 6}, {1, 2, 3, 3}, padded));
  CheckGradCase(AveragePoolCase({1, 2, 5, 6}, {1, 2, 3, 3}, padded + ", count_include_pad = 1"));
  CheckGradCase(AveragePoolCase({2, 1, 5}, {2, 1, 4}, "kernel_shape = [2], strides = [1]"));
}

TEST(AveragePoolGradTest, UnevenPadsAndSamePaddingMatchFiniteDifferences) {
  // The end pad's second row is in no window: count_include_pad counts only what windows cover.
  CheckGradCase(AveragePoolCase(
      {1, 1, 7, 6}, {1, 1, 4, 3},
      "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 0, 2, 1], count_include_pad = 1"));
  CheckGradCase(
      AveragePoolCase({1, 2, 7, 6}, {1, 2, 4, 3},
                      "kernel_shape = [3, 3], strides = [2, 2], auto_pad = \"SAME_UPPER\""));
  CheckGradCase(
      AveragePoolCase({1, 1, 7, 6}, {1, 1, 4, 3},
                      "kernel_shape = [3, 3], strides = [2, 2], auto_pad = \"SAME_LOWER\", "
                      "count_include_pad = 1"));
}

TEST(AveragePoolGradTest, CeilModeMatchesFiniteDifferences) {
  CheckGradCase(AveragePoolCase({1, 1, 6, 6}, {1, 1, 3, 3},
                                "kernel_shape = [3, 3], strides = [2, 2], ceil_mode = 1"));
  // The last window starts inside the input and ends past the padded input.
  CheckGradCase(AveragePoolCase({1, 1, 7, 6}, {1, 1, 4, 3},
                                "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 0, 0, 1], "
                                "ceil_mode = 1, count_include_pad = 1"));
  CheckGradCase(
      AveragePoolCase({1, 2, 4, 4}, {1, 2, 2, 2}, "kernel_shape = [2, 2], strides = [2, 2]"),
      DType::kBFloat16, 1.6e-2);
}

// Batch statistics of x [N, C, ...] per channel, from plain loops: mean and 1/sqrt(var + eps).
std::vector<Value> BatchStatistics(const Value& x, double epsilon) {
  const int64_t n = x.shape[0], c = x.shape[1], inner = ElementCount(x.shape) / (n * c);
  std::vector<double> mean(c, 0.0), inv(c, 0.0);
  for (int64_t k = 0; k < c; ++k) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < inner; ++j) mean[k] += x.values[(i * c + k) * inner + j];
    }
    mean[k] /= static_cast<double>(n * inner);
    double var = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < inner; ++j) {
        const double d = x.values[(i * c + k) * inner + j] - mean[k];
        var += d * d;
      }
    }
    inv[k] = 1 / std::sqrt(var / static_cast<double>(n * inner) + epsilon);
  }
  return {{kF64, {c}, mean}, {kF64, {c}, inv}};
}

// Training-mode BatchNormalization (batch statistics); the grad op gets the saved statistics.
GradCase BatchNormCase(const Shape& x) {
  const int64_t c = x[1];
  GradCase g;
  g.forward = absl::Substitute(
      "f ($$T[$0] x, $$T[$1] s, $$T[$1] b, $$T[$1] m, $$T[$1] v) => ($$T[$0] y, $$T[$1] rm, "
      "$$T[$1] rv) {\n"
      "  y, rm, rv = BatchNormalization<epsilon = 0.001, training_mode = 1>(x, s, b, m, v)\n}",
      Dims(x), c);
  g.grad = absl::Substitute(
      "g ($$T[$0] dy, $$T[$0] x, $$T[$1] s, float[$1] m, float[$1] r) => ($$T[$0] dx, $$T[$1] ds, "
      "$$T[$1] db) {\n"
      "  dx, ds, db = ai.ampc.BatchNormalizationGrad<epsilon = 0.001>(dy, x, s, m, r)\n}",
      Dims(x), c);
  g.inputs = {Pseudo(kF64, x, -2, 2, 51), Pseudo(kF64, {c}, 0.5, 1.5, 53),
              Pseudo(kF64, {c}, -1, 1, 55), Pseudo(kF64, {c}, -1, 1, 57),
              Pseudo(kF64, {c}, 0.5, 1.5, 59)};
  g.wrt = {0, 1, 2};
  g.statistics = {3, 4};
  g.grad_inputs = [](const std::vector<Value>& in, const auto&, const Value& r) {
    // epsilon = 0.001 is exact enough as the forward reads it (an FP32 attribute).
    const std::vector<Value> stats = BatchStatistics(in[0], static_cast<double>(0.001f));
    return std::vector<Value>{r, in[0], in[1], stats[0], stats[1]};
  };
  return g;
}

TEST(BatchNormalizationGradTest, TrainingModeMatchesFiniteDifferences) {
  CheckGradCase(BatchNormCase({3, 2, 2, 2}));
  CheckGradCase(BatchNormCase({5, 3}));
  CheckGradCase(BatchNormCase({2, 3, 4}), DType::kBFloat16, 1.6e-2);
}

}  // namespace
}  // namespace ampc
