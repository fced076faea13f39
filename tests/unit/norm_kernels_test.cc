// Normalization, pooling and dropout kernels run through a Session. Expected values come from
// reference loops written here (straight from the ONNX definitions) or from hand arithmetic.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/session.h"
#include "tests/support/kernel_runs.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

using ::testing::HasSubstr;

using testing::Floats;
using testing::Halves;

std::vector<float> ValuesOf(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.size()));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = t.dtype() == DType::kFloat16 ? HalfToFloat(t.data<Half>()[i].bits) : t.data<float>()[i];
  }
  return v;
}

using testing::RunModel;

// Deterministic pseudo-random values in [lo, hi) (a fixed LCG, so tests need no seed plumbing).
std::vector<float> Pseudo(size_t n, float lo, float hi, uint32_t seed = 1) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = lo + (hi - lo) * static_cast<float>(seed >> 8) / static_cast<float>(1u << 24);
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// LayerNormalization

TEST(LayerNormalizationTest, Fp32MatchesHandValuesWithMeanAndInvStdDev) {
  auto out = RunModel(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 4] x, float[4] s, float[4] b) => (float[2, 4] y, float[2, 1] m, float[2, 1] r) {
  y, m, r = LayerNormalization<epsilon = 0.0>(x, s, b)
}
)",
                      {Floats({2, 4}, {1, 2, 3, 4, -2, -2, 2, 2}), Floats({4}, {1, 1, 2, 2}),
                       Floats({4}, {0, 0, 0, 1})});
  ASSERT_TRUE(out.ok()) << out.status();
  // Row 0: mean 2.5, var 1.25; row 1: mean 0, var 4 (inv std 0.5).
  const float inv0 = 1.0f / std::sqrt(1.25f);
  EXPECT_THAT(ValuesOf((*out)[0]),
              ::testing::Pointwise(::testing::FloatNear(1e-6f),
                                   std::vector<float>{-1.5f * inv0, -0.5f * inv0, 2 * 0.5f * inv0,
                                                      2 * 1.5f * inv0 + 1, -1, -1, 2, 3}));
  EXPECT_THAT(ValuesOf((*out)[1]), ::testing::ElementsAre(2.5f, 0.0f));
  EXPECT_THAT(ValuesOf((*out)[2]),
              ::testing::Pointwise(::testing::FloatNear(1e-6f), std::vector<float>{inv0, 0.5f}));
}

TEST(LayerNormalizationTest, AxisZeroNormalizesTheWholeTensorWithBroadcastScale) {
  auto out = RunModel(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 2] x, float[1] s) => (float[2, 2] y) {
  y = LayerNormalization<axis = 0, epsilon = 0.0>(x, s)
}
)",
                      {Floats({2, 2}, {0, 0, 4, 4}), Floats({1}, {3})});
  ASSERT_TRUE(out.ok()) << out.status();
  // mean 2, std 2: (x - 2) / 2 * 3.
  EXPECT_THAT(ValuesOf((*out)[0]), ::testing::ElementsAre(-3, -3, 3, 3));
}

// 512 FP16 values near 1000: their sum (~5e5) overflows FP16 (max 65504), so an FP16 accumulator
// gives inf. The reference accumulates in FP32 and rounds each output to FP16 once, so the results
// must agree bit for bit; a double reference bounds the FP32 statistics' own error.
TEST(LayerNormalizationTest, Fp16AccumulatesInFp32AndRoundsOnce) {
  constexpr int kRows = 3, kCols = 512;
  std::vector<float> x = Pseudo(kRows * kCols, 990, 1010);
  for (float& v : x) v = HalfToFloat(FloatToHalf(v));  // exactly representable inputs
  std::vector<float> scale = Pseudo(kCols, 0.5f, 2, 7), bias = Pseudo(kCols, -1, 1, 9);
  for (float& v : scale) v = HalfToFloat(FloatToHalf(v));
  for (float& v : bias) v = HalfToFloat(FloatToHalf(v));
  auto out = RunModel(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float16[3, 512] x, float16[512] s, float16[512] b) => (float16[3, 512] y, float[3, 1] m) {
  y, m = LayerNormalization(x, s, b)
}
)",
                      {Halves({kRows, kCols}, x), Halves({kCols}, scale), Halves({kCols}, bias)});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& y = (*out)[0];
  for (int r = 0; r < kRows; ++r) {
    const float* row = x.data() + r * kCols;
    float sum = 0, squares = 0;
    double exact_sum = 0;
    for (int j = 0; j < kCols; ++j) {
      sum += row[j];
      exact_sum += row[j];
    }
    const float mean = sum / kCols;
    for (int j = 0; j < kCols; ++j) squares += (row[j] - mean) * (row[j] - mean);
    const float inv = 1.0f / std::sqrt(squares / kCols + 1e-5f);
    EXPECT_EQ(ValuesOf((*out)[1])[r], mean);
    EXPECT_NEAR(mean, exact_sum / kCols, 1e-3);
    for (int j = 0; j < kCols; ++j) {
      const float want = (row[j] - mean) * inv * scale[j] + bias[j];
      ASSERT_EQ(y.data<Half>()[r * kCols + j].bits, FloatToHalf(want))
          << "row " << r << " col " << j << " want " << want;
    }
  }
}

TEST(LayerNormalizationTest, AxisOutOfRangeIsAnErrorNamingTheNode) {
  auto out = RunModel(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 4] x, float[4] s) => (float[2, 4] y) {
  y = LayerNormalization<axis = 2>(x, s)
}
)",
                      {Floats({2, 4}, std::vector<float>(8, 1)), Floats({4}, {1, 1, 1, 1})});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("LayerNormalization node producing 'y'"));
  EXPECT_THAT(out.status().message(), HasSubstr("axis 2 is out of range for an input of rank 2"));
}

TEST(LayerNormalizationTest, ScaleThatDoesNotBroadcastIsAnError) {
  auto out = RunModel(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 4] x, float[3] s) => (float[2, 4] y) {
  y = LayerNormalization(x, s)
}
)",
                      {Floats({2, 4}, std::vector<float>(8, 1)), Floats({3}, {1, 1, 1})});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(),
              HasSubstr("Scale of shape [3] does not broadcast to the normalized shape [4]"));
}

TEST(LayerNormalizationTest, IntegerInputFailsAtSessionCreation) {
  CpuBackend backend(1);
  auto session = Session::Create(testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (int32[2, 4] x, int32[4] s) => (int32[2, 4] y) {
  y = LayerNormalization(x, s)
}
)"),
                                 DefaultRegistry(), backend);
  ASSERT_FALSE(session.ok());
  EXPECT_THAT(session.status().message(), HasSubstr("no cpu kernel for input types"));
}

// ---------------------------------------------------------------------------------------------
// BatchNormalization, InstanceNormalization, LpNormalization, MeanVarianceNormalization

TEST(BatchNormalizationTest, InferenceUsesTheGivenStatistics) {
  auto out = RunModel(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[1, 2, 2] x, float[2] s, float[2] b, float[2] m, float[2] v) => (float[1, 2, 2] y) {
  y = BatchNormalization<epsilon = 0.0>(x, s, b, m, v)
}
)",
                      {Floats({1, 2, 2}, {1, 3, 10, 20}), Floats({2}, {2, 1}), Floats({2}, {0, 1}),
                       Floats({2}, {1, 10}), Floats({2}, {4, 25})});
  ASSERT_TRUE(out.ok()) << out.status();
  // channel 0: (x - 1) / 2 * 2; channel 1: (x - 10) / 5 + 1.
  EXPECT_THAT(ValuesOf((*out)[0]), ::testing::ElementsAre(0, 2, 1, 3));
}

TEST(BatchNormalizationTest, TrainingModeUsesBatchStatisticsAndUpdatesRunningOnes) {
  auto out = RunModel(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2, 1, 2] x, float[1] s, float[1] b, float[1] m, float[1] v)
    => (float[2, 1, 2] y, float[1] rm, float[1] rv) {
  y, rm, rv = BatchNormalization<epsilon = 0.0, momentum = 0.75, training_mode = 1>(x, s, b, m, v)
}
)",
                      {Floats({2, 1, 2}, {1, 3, 5, 7}), Floats({1}, {1}), Floats({1}, {0}),
                       Floats({1}, {0}), Floats({1}, {1})});
  ASSERT_TRUE(out.ok()) << out.status();
  // batch mean 4, population variance (9+1+1+9)/4 = 5.
  const float is = 1.0f / std::sqrt(5.0f);
  EXPECT_THAT(ValuesOf((*out)[0]),
              ::testing::Pointwise(::testing::FloatNear(1e-6f),
                                   std::vector<float>{-3 * is, -is, is, 3 * is}));
  EXPECT_THAT(ValuesOf((*out)[1]), ::testing::ElementsAre(0 * 0.75f + 4 * 0.25f));
  EXPECT_THAT(ValuesOf((*out)[2]), ::testing::ElementsAre(1 * 0.75f + 5 * 0.25f));
}

TEST(BatchNormalizationTest, BatchStatisticsDoNotDriftOverMillionsOfTerms) {
  // 2^24 + 8192 ones: a float running sum stops at 2^24 (mean 0.9995); the sums add in chunks
  // as ReduceMean's do, so the batch mean is 1 and the variance 0 (momentum 0: the running
  // statistics are the batch's).
  constexpr int64_t kCount = (int64_t{1} << 24) + 8192;
  auto out = RunModel(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[16785408, 1] x, float[1] s, float[1] b, float[1] m, float[1] v)
    => (float[16785408, 1] y, float[1] rm, float[1] rv) {
  y, rm, rv = BatchNormalization<momentum = 0.0, training_mode = 1>(x, s, b, m, v)
}
)",
                      {Floats({kCount, 1}, std::vector<float>(kCount, 1.0f)), Floats({1}, {1}),
                       Floats({1}, {0}), Floats({1}, {0}), Floats({1}, {1})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(ValuesOf((*out)[1]), ::testing::ElementsAre(1.0f));
  EXPECT_THAT(ValuesOf((*out)[2]), ::testing::ElementsAre(0.0f));
}

TEST(BatchNormalizationTest, ParameterOfWrongSizeIsAnError) {
  auto out = RunModel(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[1, 2, 2] x, float[3] s, float[2] b, float[2] m, float[2] v) => (float[1, 2, 2] y) {
  y = BatchNormalization(x, s, b, m, v)
}
)",
                      {Floats({1, 2, 2}, {1, 3, 10, 20}), Floats({3}, {2, 1, 1}),
                       Floats({2}, {0, 1}), Floats({2}, {1, 10}), Floats({2}, {4, 25})});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("scale has 3 elements (shape [3]), expected 2"));
}

TEST(InstanceNormalizationTest, NormalizesEachPlane) {
  auto out =
      RunModel(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 2, 2] x, float[2] s, float[2] b) => (float[1, 2, 2] y) {
  y = InstanceNormalization<epsilon = 0.0>(x, s, b)
}
)",
               {Floats({1, 2, 2}, {1, 3, 10, 30}), Floats({2}, {2, 1}), Floats({2}, {0, 5})});
  ASSERT_TRUE(out.ok()) << out.status();
  // plane 0: mean 2, std 1 -> (-1, 1) * 2; plane 1: mean 20, std 10 -> (-1, 1) + 5.
  EXPECT_THAT(ValuesOf((*out)[0]), ::testing::ElementsAre(-2, 2, 4, 6));
}

TEST(LpNormalizationTest, L1AndL2AlongAnAxis) {
  auto out = RunModel(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 2] x) => (float[2, 2] y1, float[2, 2] y2) {
  y1 = LpNormalization<axis = 0, p = 1>(x)
  y2 = LpNormalization<axis = 1, p = 2>(x)
}
)",
                      {Floats({2, 2}, {3, -1, -1, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  // columns: |3| + |-1| = 4; rows: sqrt(9 + 1).
  EXPECT_THAT(ValuesOf((*out)[0]), ::testing::ElementsAre(0.75f, -0.25f, -0.25f, 0.75f));
  const float n = std::sqrt(10.0f);
  EXPECT_THAT(ValuesOf((*out)[1]), ::testing::ElementsAre(3 / n, -1 / n, -1 / n, 3 / n));
}

// ONNX's reference gives 0 where the norm is 0 (test_l2normalization_axis_0), not 0/0 = NaN.
TEST(LpNormalizationTest, ZeroNormGivesZero) {
  auto out = RunModel(R"(
<ir_version: 8, opset_import: ["" : 22]>
g (float[2, 2] x) => (float[2, 2] y1, float[2, 2] y2) {
  y1 = LpNormalization<axis = 0, p = 1>(x)
  y2 = LpNormalization<axis = 1, p = 2>(x)
}
)",
                      {Floats({2, 2}, {0, 3, 0, -4})});
  ASSERT_TRUE(out.ok()) << out.status();
  // column 0 is zero; column 1: 3 + 4 = 7. Row 0: norm 3, row 1: norm 4.
  EXPECT_THAT(ValuesOf((*out)[0]), ::testing::ElementsAre(0, 3.0f / 7, 0, -4.0f / 7));
  EXPECT_THAT(ValuesOf((*out)[1]), ::testing::ElementsAre(0, 1, 0, -1));
}

TEST(MeanVarianceNormalizationTest, DefaultAxesNormalizePerChannel) {
  auto out = RunModel(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2, 2, 1, 1] x) => (float[2, 2, 1, 1] y) {
  y = MeanVarianceNormalization(x)
}
)",
                      {Floats({2, 2, 1, 1}, {1, 10, 3, 30})});
  ASSERT_TRUE(out.ok()) << out.status();
  // channel 0 over N: {1, 3}, mean 2, std 1; channel 1: {10, 30}, mean 20, std 10.
  EXPECT_THAT(ValuesOf((*out)[0]),
              ::testing::Pointwise(::testing::FloatNear(1e-6f), std::vector<float>{-1, -1, 1, 1}));
}

// ---------------------------------------------------------------------------------------------
// Pooling, against direct loops over one 2-D window definition.

struct Pool2d {
  int kh, kw, sh, sw, top, left, bottom, right, dh = 1, dw = 1;
};

// out = floor or ceil((in + pads - extent) / stride) + 1, dropping a window starting in the end
// pad.
int OutSize(int in, int k, int s, int pb, int pe, int d, bool ceil_mode) {
  const int span = in + pb + pe - ((k - 1) * d + 1);
  int out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + pb) --out;
  return out;
}

enum class Reduce { kMax, kAverageExcludePad, kAverageIncludePad };

std::vector<float> ReferencePool(const std::vector<float>& x, int planes, int h, int w,
                                 const Pool2d& p, bool ceil_mode, Reduce reduce, int* oh_out,
                                 int* ow_out) {
  const int oh = OutSize(h, p.kh, p.sh, p.top, p.bottom, p.dh, ceil_mode);
  const int ow = OutSize(w, p.kw, p.sw, p.left, p.right, p.dw, ceil_mode);
  *oh_out = oh;
  *ow_out = ow;
  std::vector<float> y;
  for (int c = 0; c < planes; ++c) {
    for (int i = 0; i < oh; ++i) {
      for (int j = 0; j < ow; ++j) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        int inside = 0, padded = 0;
        for (int a = 0; a < p.kh; ++a) {
          for (int b = 0; b < p.kw; ++b) {
            const int r = i * p.sh - p.top + a * p.dh, q = j * p.sw - p.left + b * p.dw;
            if (r < h + p.bottom && q < w + p.right) ++padded;
            if (r < 0 || r >= h || q < 0 || q >= w) continue;
            const float v = x[(c * h + r) * w + q];
            best = std::max<double>(best, v);
            sum += v;
            ++inside;
          }
        }
        y.push_back(static_cast<float>(reduce == Reduce::kMax                 ? best
                                       : reduce == Reduce::kAverageIncludePad ? sum / padded
                                                                              : sum / inside));
      }
    }
  }
  return y;
}

// The output's spatial dims are left symbolic: libonnx 1.12's shape inference keeps a ceil_mode
// window that starts in the end padding, which ONNX (since 1.15), onnxruntime and PyTorch drop.
std::string PoolModel(const std::string& op, const std::string& attributes, int h, int w) {
  return "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[1, 2, " + std::to_string(h) + ", " +
         std::to_string(w) + "] x) => (float[1, 2, OH, OW] y) {\n  y = " + op + "<" + attributes +
         ">(x)\n}\n";
}

std::string PoolAttributes(const Pool2d& p, bool ceil_mode) {
  return "kernel_shape = [" + std::to_string(p.kh) + ", " + std::to_string(p.kw) +
         "], strides = [" + std::to_string(p.sh) + ", " + std::to_string(p.sw) + "], pads = [" +
         std::to_string(p.top) + ", " + std::to_string(p.left) + ", " + std::to_string(p.bottom) +
         ", " + std::to_string(p.right) + "], ceil_mode = " + (ceil_mode ? "1" : "0");
}

struct PoolCase {
  Pool2d geometry;
  bool ceil_mode;
};

const PoolCase kPoolCases[] = {
    {{3, 3, 1, 1, 0, 0, 0, 0}, false},  // plain
    {{3, 3, 2, 2, 1, 1, 1, 1}, false},  // stride and symmetric pads
    {{2, 3, 2, 2, 0, 1, 1, 0}, true},   // asymmetric pads, ceil_mode adds a partial window
    {{3, 2, 3, 2, 1, 0, 2, 1}, true},   // ceil_mode where the last window would start in the pad
    {{2, 2, 2, 2, 0, 0, 0, 0}, true},   // ceil_mode with no pads: partial windows on the edge
    {{2, 2, 2, 2, 0, 0, 0, 0}, false},  // plain 2x2 stride 2 (MaxPool's fast path), last row left
};

TEST(PoolTest, MaxPoolMatchesDirectLoops) {
  constexpr int kH = 7, kW = 6;
  const std::vector<float> x = Pseudo(2 * kH * kW, -5, 5, 3);
  for (const PoolCase& c : kPoolCases) {
    int oh = 0, ow = 0;
    const std::vector<float> want =
        ReferencePool(x, 2, kH, kW, c.geometry, c.ceil_mode, Reduce::kMax, &oh, &ow);
    auto out = RunModel(PoolModel("MaxPool", PoolAttributes(c.geometry, c.ceil_mode), kH, kW),
                        {Floats({1, 2, kH, kW}, x)});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape(), (Shape{1, 2, oh, ow}));
    EXPECT_EQ(ValuesOf((*out)[0]), want) << PoolAttributes(c.geometry, c.ceil_mode);
  }
}

TEST(PoolTest, AveragePoolMatchesDirectLoopsWithAndWithoutPadCounting) {
  constexpr int kH = 7, kW = 6;
  const std::vector<float> x = Pseudo(2 * kH * kW, -5, 5, 4);
  for (const PoolCase& c : kPoolCases) {
    for (bool include : {false, true}) {
      int oh = 0, ow = 0;
      const std::vector<float> want = ReferencePool(
          x, 2, kH, kW, c.geometry, c.ceil_mode,
          include ? Reduce::kAverageIncludePad : Reduce::kAverageExcludePad, &oh, &ow);
      const std::string attributes = PoolAttributes(c.geometry, c.ceil_mode) +
                                     ", count_include_pad = " + (include ? "1" : "0");
      auto out =
          RunModel(PoolModel("AveragePool", attributes, kH, kW), {Floats({1, 2, kH, kW}, x)});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].shape(), (Shape{1, 2, oh, ow}));
      EXPECT_THAT(ValuesOf((*out)[0]), ::testing::Pointwise(::testing::FloatNear(1e-5f), want))
          << attributes;
    }
  }
}

TEST(PoolTest, MaxPoolDilationsMatchDirectLoops) {
  constexpr int kH = 7, kW = 6;
  const std::vector<float> x = Pseudo(2 * kH * kW, -5, 5, 5);
  const Pool2d p{2, 2, 1, 2, 1, 0, 1, 0, 2, 3};
  int oh = 0, ow = 0;
  const std::vector<float> want = ReferencePool(x, 2, kH, kW, p, false, Reduce::kMax, &oh, &ow);
  auto out =
      RunModel(PoolModel("MaxPool", PoolAttributes(p, false) + ", dilations = [2, 3]", kH, kW),
               {Floats({1, 2, kH, kW}, x)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ValuesOf((*out)[0]), want);
}

TEST(PoolTest, MaxPoolIndicesInRowAndColumnMajorOrder) {
  // One 2x3 plane per channel, 2 channels; a 2x2 window with stride 1 gives 1x2 outputs.
  const std::vector<float> x = {1, 9, 2, 3, 4, 8, /*c1*/ 7, 0, 0, 0, 0, 6};
  for (int order : {0, 1}) {
    auto out = RunModel(R"(
<ir_version: 8, opset_import: ["" : 12]>
g (float[1, 2, 2, 3] x) => (float[1, 2, 1, 2] y, int64[1, 2, 1, 2] i) {
  y, i = MaxPool<kernel_shape = [2, 2], storage_order = )" +
                            std::to_string(order) + R"(>(x)
}
)",
                        {Floats({1, 2, 2, 3}, x)});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_THAT(ValuesOf((*out)[0]), ::testing::ElementsAre(9, 9, 7, 6));
    const int64_t* idx = (*out)[1].data<int64_t>();
    // Plane 0's 9 at (h, w) = (0, 1): 1 row-major, 0 + 1 * 2 = 2 column-major. Plane 1 starts at 6;
    // its 7 at (0, 0) is 0 either way, its 6 at (1, 2) is 5 row-major and 1 + 2 * 2 = 5
    // column-major.
    if (order == 0) {
      EXPECT_EQ(std::vector<int64_t>(idx, idx + 4), (std::vector<int64_t>{1, 1, 6, 11}));
    } else {
      EXPECT_EQ(std::vector<int64_t>(idx, idx + 4), (std::vector<int64_t>{2, 2, 6, 11}));
    }
  }
}

// The plain 2x2 MaxPool loop (2-D) against the general one (the same data as 3-D, depth window
// 1) in FP16, with ties, NaNs and -inf in the windows: the same values and Indices.
TEST(PoolTest, MaxPoolTwoByTwoFastPathPicksAsTheGeneralLoopWithTiesAndNans) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = Pseudo(2 * 4 * 6, -2, 2, 9);
  // Windows (row-major taps a b / c d) of plane 0's first row of outputs: a tie, NaN late, two
  // NaNs, all -inf.
  x[0] = x[1] = x[6] = x[7] = 1.5f;
  x[3] = nan;
  x[9] = nan;
  x[4] = nan;
  x[11] = nan;
  for (int k : {24, 25, 30, 31}) x[k] = -inf;
  const auto model = [](const std::string& dims, const std::string& kernel) {
    return "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float16[" + dims +
           "] x) => (float16[Y] y, int64[Y] i) {\n  y, i = MaxPool<kernel_shape = [" + kernel +
           "], strides = [" + kernel + "]>(x)\n}\n";
  };
  auto fast = RunModel(model("1, 2, 4, 6", "2, 2"), {Halves({1, 2, 4, 6}, x)});
  auto general = RunModel(model("1, 2, 1, 4, 6", "1, 2, 2"), {Halves({1, 2, 1, 4, 6}, x)});
  ASSERT_TRUE(fast.ok()) << fast.status();
  ASSERT_TRUE(general.ok()) << general.status();
  ASSERT_EQ((*fast)[0].size(), 12);
  const auto bits = [](const Tensor& t) {
    const uint16_t* p = static_cast<const uint16_t*>(t.raw());
    return std::vector<uint16_t>(p, p + t.size());
  };
  const auto ints = [](const Tensor& t) {
    return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.size());
  };
  EXPECT_EQ(bits((*fast)[0]), bits((*general)[0]));
  EXPECT_EQ(ints((*fast)[1]), ints((*general)[1]));
  // The tie keeps the first tap; a NaN wins over later numbers, the last NaN over an earlier one.
  EXPECT_EQ(ints((*fast)[1])[0], 0);
  EXPECT_EQ(ints((*fast)[1])[1], 9);
  EXPECT_EQ(ints((*fast)[1])[2], 11);
  EXPECT_EQ(ints((*fast)[1])[6], 24);
}

// A 3-D pool with a depth-1 window is the 2-D pool of every depth slice: the 3-D path (window
// offsets listed once per call) against the same reference, over 18 planes, and its Indices
// against the 2-D path's on the same data seen as [2, 9, 7, 6].
TEST(PoolTest, ThreeDimensionalPoolsMatchTheTwoDimensionalReference) {
  constexpr int kH = 7, kW = 6;
  const std::vector<float> x = Pseudo(18 * kH * kW, -5, 5, 6);
  // MaxPool also returns Indices; the 2-D form reads x as [2, 9, 7, 6].
  const auto model = [](const std::string& op, const std::string& attributes, bool three_d) {
    const std::string dims = three_d ? "2, 3, 3" : "2, 9";
    const bool max = op == "MaxPool";
    return "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[" + dims +
           ", 7, 6] x) => (float[" + dims + ", OH, OW] y" +
           (max ? ", int64[" + dims + ", OH, OW] i" : "") + ") {\n  " + (max ? "y, i" : "y") +
           " = " + op + "<" + attributes + ">(x)\n}\n";
  };
  for (const PoolCase& c : kPoolCases) {
    const Pool2d& p = c.geometry;
    const std::string attributes3 =
        "kernel_shape = [1, " + std::to_string(p.kh) + ", " + std::to_string(p.kw) +
        "], strides = [1, " + std::to_string(p.sh) + ", " + std::to_string(p.sw) +
        "], pads = [0, " + std::to_string(p.top) + ", " + std::to_string(p.left) + ", 0, " +
        std::to_string(p.bottom) + ", " + std::to_string(p.right) +
        "], ceil_mode = " + (c.ceil_mode ? "1" : "0");
    for (Reduce reduce : {Reduce::kMax, Reduce::kAverageExcludePad, Reduce::kAverageIncludePad}) {
      int oh = 0, ow = 0;
      const std::vector<float> want =
          ReferencePool(x, 18, kH, kW, p, c.ceil_mode, reduce, &oh, &ow);
      const bool max = reduce == Reduce::kMax;
      const std::string op = max ? "MaxPool" : "AveragePool";
      std::string attributes = attributes3;
      if (!max) {
        attributes += std::string(", count_include_pad = ") +
                      (reduce == Reduce::kAverageIncludePad ? "1" : "0");
      }
      auto out = RunModel(model(op, attributes, true), {Floats({2, 3, 3, kH, kW}, x)});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0].shape(), (Shape{2, 3, 3, oh, ow}));
      EXPECT_THAT(ValuesOf((*out)[0]), ::testing::Pointwise(::testing::FloatNear(1e-5f), want))
          << op << " " << attributes;
      if (!max) continue;
      auto flat =
          RunModel(model(op, PoolAttributes(p, c.ceil_mode), false), {Floats({2, 9, kH, kW}, x)});
      ASSERT_TRUE(flat.ok()) << flat.status();
      const Tensor& i3 = (*out)[1];
      const Tensor& i2 = (*flat)[1];
      ASSERT_EQ(i3.size(), i2.size());
      EXPECT_EQ(std::vector<int64_t>(i3.data<int64_t>(), i3.data<int64_t>() + i3.size()),
                std::vector<int64_t>(i2.data<int64_t>(), i2.data<int64_t>() + i2.size()))
          << attributes;
    }
  }
}

TEST(PoolTest, SameUpperAndLowerPadTheEndOrTheStart) {
  // 1-D input of 4, kernel 2, stride 1: SAME gives 4 outputs with one pad at the end (UPPER)
  // or at the start (LOWER).
  for (auto [mode, want] : {std::pair{"SAME_UPPER", std::vector<float>{2, 3, 4, 4}},
                            std::pair{"SAME_LOWER", std::vector<float>{1, 2, 3, 4}}}) {
    auto out = RunModel(std::string(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 1, 4] x) => (float[1, 1, 4] y) {
  y = MaxPool<kernel_shape = [2], auto_pad = ")") +
                            mode + R"(">(x)
}
)",
                        {Floats({1, 1, 4}, {1, 2, 3, 4})});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(ValuesOf((*out)[0]), want) << mode;
  }
}

TEST(PoolTest, LpPoolIsTheNormOfEachWindow) {
  auto out = RunModel(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 1, 4] x) => (float[1, 1, 2] y1, float[1, 1, 2] y2) {
  y1 = LpPool<kernel_shape = [2], strides = [2], p = 2>(x)
  y2 = LpPool<kernel_shape = [2], strides = [2], p = 1>(x)
}
)",
                      {Floats({1, 1, 4}, {3, -4, 6, 8})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(ValuesOf((*out)[0]), ::testing::ElementsAre(5, 10));
  EXPECT_THAT(ValuesOf((*out)[1]), ::testing::ElementsAre(7, 14));
}

TEST(PoolTest, AveragePool19AndLpPool18ReadDilations) {
  // x = 1..16 as 4x4, 2x2 windows with dilation 2: the window at (0, 0) holds 1, 3, 9, 11 (mean
  // 6, norm sqrt(212)); the others are shifted by 1, 4 and 5 (means 7, 10, 11).
  auto out =
      RunModel(R"(
<ir_version: 9, opset_import: ["" : 19]>
g (float[1, 1, 4, 4] x) => (float[1, 1, 2, 2] a, float[1, 1, 2, 2] l) {
  a = AveragePool<kernel_shape = [2, 2], dilations = [2, 2]>(x)
  l = LpPool<kernel_shape = [2, 2], dilations = [2, 2]>(x)
}
)",
               {Floats({1, 1, 4, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(ValuesOf((*out)[0]), ::testing::ElementsAre(6, 7, 10, 11));
  EXPECT_THAT(ValuesOf((*out)[1])[0], ::testing::FloatEq(std::sqrt(212.0f)));
}

// 4096 FP16 values of 1000: an FP16 running sum overflows (max 65504); FP32 gives exactly 1000.
TEST(PoolTest, Fp16GlobalAndWindowAveragesAccumulateInFp32) {
  auto out = RunModel(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float16[1, 1, 64, 64] x) => (float16[1, 1, 1, 1] g, float16[1, 1, 1, 1] a, float16[1, 1, 1, 1] m) {
  g = GlobalAveragePool(x)
  a = AveragePool<kernel_shape = [64, 64]>(x)
  m = GlobalMaxPool(x)
}
)",
                      {Halves({1, 1, 64, 64}, std::vector<float>(4096, 1000))});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ValuesOf((*out)[0]), (std::vector<float>{1000}));
  EXPECT_EQ(ValuesOf((*out)[1]), (std::vector<float>{1000}));
  EXPECT_EQ(ValuesOf((*out)[2]), (std::vector<float>{1000}));
}

TEST(PoolTest, KernelShapeOfWrongRankIsAnError) {
  auto out = RunModel(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 1, 4, 4] x) => (float[1, 1, 3, 3] y) {
  y = MaxPool<kernel_shape = [2]>(x)
}
)",
                      {Floats({1, 1, 4, 4}, std::vector<float>(16, 0))});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("MaxPool node producing 'y'"));
  EXPECT_THAT(out.status().message(), HasSubstr("kernel_shape, strides and dilations need 2"));
}

// ---------------------------------------------------------------------------------------------
// Dropout

TEST(DropoutTest, InferenceIsIdentityWithAnAllTrueMask) {
  auto out = RunModel(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[3] x) => (float[3] y, bool[3] mask) {
  y, mask = Dropout(x)
}
)",
                      {Floats({3}, {1, -2, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(ValuesOf((*out)[0]), ::testing::ElementsAre(1, -2, 3));
  const bool* mask = (*out)[1].data<bool>();
  EXPECT_TRUE(mask[0] && mask[1] && mask[2]);
}

constexpr char kTrainingDropout[] = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[4096] x, float r, bool t) => (float[4096] y, bool[4096] mask) {
  y, mask = Dropout<seed = 42>(x, r, t)
}
)";

Tensor Scalar(float v) { return Floats({}, {v}); }
Tensor Bool(bool v) {
  Tensor t = Tensor::Host(DType::kBool, {});
  t.data<bool>()[0] = v;
  return t;
}

TEST(DropoutTest, TrainingKeepsAboutOneMinusRatioScaledAndIsReproducibleWithASeed) {
  const std::vector<float> x(4096, 3.0f);
  auto first = RunModel(kTrainingDropout, {Floats({4096}, x), Scalar(0.25f), Bool(true)});
  auto second = RunModel(kTrainingDropout, {Floats({4096}, x), Scalar(0.25f), Bool(true)});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  const std::vector<float> y = ValuesOf((*first)[0]);
  const bool* mask = (*first)[1].data<bool>();
  int kept = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    EXPECT_EQ(y[i], mask[i] ? 4.0f : 0.0f) << i;  // 3 / (1 - 0.25)
    kept += mask[i];
  }
  // Binomial(4096, 0.75): mean 3072, sd ~28; 6 sd either way.
  EXPECT_NEAR(kept, 3072, 170);
  EXPECT_EQ(ValuesOf((*second)[0]), y);  // same seed, fresh session: same mask
}

TEST(DropoutTest, TrainingWithRatioZeroIsIdentityAndRatioOneIsAnError) {
  const std::vector<float> x(4096, 3.0f);
  auto zero = RunModel(kTrainingDropout, {Floats({4096}, x), Scalar(0.0f), Bool(true)});
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(ValuesOf((*zero)[0]), x);
  auto one = RunModel(kTrainingDropout, {Floats({4096}, x), Scalar(1.0f), Bool(true)});
  ASSERT_FALSE(one.ok());
  EXPECT_THAT(one.status().message(), HasSubstr("ratio must be in [0, 1), got 1"));
}

}  // namespace
}  // namespace ampc
