// Math kernels run through a Session: Cast rounding, Where/Clip/variadic broadcasting, Mod signs,
// BitShift, PRelu, Shrink, Mish, Det. Expected values are worked out by hand in the comments.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/session.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

using testing::Halves;
using testing::Make;
using testing::Values;

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;

std::vector<uint16_t> Bits(const Tensor& t) {
  std::vector<uint16_t> bits;
  for (int64_t i = 0; i < t.size(); ++i) bits.push_back(static_cast<const uint16_t*>(t.raw())[i]);
  return bits;
}

class MathKernelsTest : public ::testing::Test {
 protected:
  // Builds a session from ONNX text and runs it once; fails the test on any error.
  std::vector<Tensor> Run(const std::string& text, std::vector<Tensor> inputs) {
    auto session = Session::Create(testing::ParseModelText(text), DefaultRegistry(), backend_);
    EXPECT_TRUE(session.ok()) << session.status();
    if (!session.ok()) return {};
    auto outputs = (*session)->Run(inputs);
    EXPECT_TRUE(outputs.ok()) << outputs.status();
    if (!outputs.ok()) return {};
    sessions_.push_back(*std::move(session));
    return *std::move(outputs);
  }
  CpuBackend backend_{2};
  std::vector<std::unique_ptr<Session>> sessions_;
};

TEST_F(MathKernelsTest, CastFloatToHalfRoundsTiesToEvenAndOverflowsToInfinity) {
  auto out = Run(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[9] x) => (float16[9] y) { y = Cast<to = 10>(x) }
)",
                 {Make<float>(DType::kFloat, {9},
                              {
                                  1.0f + 0x1p-11f,      // tie between 1 and 1+2^-10: even is 1
                                  1.0f + 3 * 0x1p-11f,  // tie: even is 1+2^-9 (mantissa 2)
                                  65504.0f,             // largest half
                                  65519.0f,             // below the 65520 midpoint: 65504
                                  65520.0f,             // tie to even rounds up to 2^16: inf
                                  -1e6f,                // -inf
                                  0x1p-25f,             // half the smallest subnormal: tie to 0
                                  3 * 0x1p-25f,         // tie between 2^-24 and 2^-23: 2^-23
                                  std::nanf(""),
                              })});
  ASSERT_EQ(out.size(), 1u);
  const std::vector<uint16_t> bits = Bits(out[0]);
  EXPECT_THAT(std::vector<uint16_t>(bits.begin(), bits.end() - 1),
              ElementsAre(0x3c00, 0x3c02, 0x7bff, 0x7bff, 0x7c00, 0xfc00, 0x0000, 0x0002));
  EXPECT_EQ(bits.back() & 0x7c00, 0x7c00);
  EXPECT_NE(bits.back() & 0x03ff, 0);  // still a NaN
}

TEST_F(MathKernelsTest, CastDoubleToHalfAndBFloat16RoundsOnlyOnce) {
  // 1 + 2^-11 + 2^-40 is just above the FP16 tie 1 + 2^-11, so it rounds up to 1 + 2^-10 (0x3c01).
  // Going through float first would drop the 2^-40 and round the tie to even (0x3c00). Likewise
  // 1 + 2^-8 + 2^-40 in BF16 rounds up to 1 + 2^-7 (0x3f81), not to 1 (0x3f80).
  auto out =
      Run(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (double[2] x) => (float16[2] h, bfloat16[2] b) {
  h = Cast<to = 10>(x)
  b = Cast<to = 16>(x)
}
)",
          {Make<double>(DType::kDouble, {2}, {1.0 + 0x1p-11 + 0x1p-40, 1.0 + 0x1p-8 + 0x1p-40})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(Bits(out[0])[0], 0x3c01);
  EXPECT_EQ(Bits(out[1])[1], 0x3f81);
}

TEST_F(MathKernelsTest, CastIntegersToHalfRoundTiesToEven) {
  // Above 2048 FP16 steps by 2: 2049 is a tie (-> 2048), 2051 too (-> 2052).
  auto out = Run(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (int32[3] x) => (float16[3] y) { y = Cast<to = 10>(x) }
)",
                 {Make<int32_t>(DType::kInt32, {3}, {2049, 2051, -2051})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(Bits(out[0]),
              ElementsAre(FloatToHalf(2048.0f), FloatToHalf(2052.0f), FloatToHalf(-2052.0f)));
}

TEST_F(MathKernelsTest, CastFloatToIntTruncatesAndToBoolTestsNonzero) {
  auto out = Run(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[5] x) => (int32[5] i, bool[5] b, uint8[5] u) {
  i = Cast<to = 6>(x)
  b = Cast<to = 9>(x)
  u = Cast<to = 2>(x)
}
)",
                 {Make<float>(DType::kFloat, {5}, {-2.7f, 2.7f, -0.5f, 0.0f, std::nanf("")})});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_THAT(Values<int32_t>(out[0]), ElementsAre(-2, 2, 0, 0, 0));
  EXPECT_THAT(Values<bool>(out[1]), ElementsAre(true, true, true, false, true));
  EXPECT_THAT(Values<uint8_t>(out[2]), ElementsAre(254, 2, 0, 0, 0));  // -2 wraps to 254
}

TEST_F(MathKernelsTest, CastLikeTakesTheSecondInputsType) {
  auto out = Run(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[3] x, int64[1] like) => (int64[3] y) { y = CastLike(x, like) }
)",
                 {Make<float>(DType::kFloat, {3}, {1.9f, -1.9f, 300.0f}),
                  Make<int64_t>(DType::kInt64, {1}, {0})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(Values<int64_t>(out[0]), ElementsAre(1, -1, 300));
}

TEST_F(MathKernelsTest, CastToStringFailsAtSessionCreation) {
  auto session = Session::Create(testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[3] x) => (string[3] y) { y = Cast<to = 8>(x) }
)"),
                                 DefaultRegistry(), backend_);
  ASSERT_FALSE(session.ok());
  EXPECT_THAT(session.status().message(), HasSubstr("string"));
}

TEST_F(MathKernelsTest, WhereBroadcastsAllThreeInputs) {
  // cond [2,1], x [3], y [] -> [2,3]: row 0 takes x, row 1 takes y.
  auto out =
      Run(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (bool[2,1] c, float[3] x, float y) => (float[2,3] z) { z = Where(c, x, y) }
)",
          {Make<bool>(DType::kBool, {2, 1}, {true, false}),
           Make<float>(DType::kFloat, {3}, {1, 2, 3}), Make<float>(DType::kFloat, {}, {-1})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (Shape{2, 3}));
  EXPECT_THAT(Values<float>(out[0]), ElementsAre(1, 2, 3, -1, -1, -1));
}

// The element of a [2,3,4,5]-broadcast input of shape `dims` (each 1 or the output's) at output
// index i: the reference the row-wise broadcast loops must match.
int64_t BroadcastOffset(const Shape& dims, int64_t i) {
  const Shape out = {2, 3, 4, 5};
  int64_t offset = 0, stride = 1;
  for (int d = 3; d >= 0; --d) {
    const int64_t coordinate = i % out[d];
    i /= out[d];
    if (dims[d] != 1) offset += coordinate * stride;
    stride *= dims[d];
  }
  return offset;
}

TEST_F(MathKernelsTest, RowBroadcastSubMatchesTheElementwiseReferenceInEveryLayout) {
  // [2,3,4,5] op [1,3,1,1] runs as rows of 20 with b repeated; [2,1,4,5] op [1,3,1,1] broadcasts
  // both over the outer dims; [1,3,1,1] op [2,3,4,5] repeats a. FP16 rounds each difference once.
  const std::vector<std::pair<Shape, Shape>> layouts = {
      {{2, 3, 4, 5}, {1, 3, 1, 1}}, {{2, 1, 4, 5}, {1, 3, 1, 1}}, {{1, 3, 1, 1}, {2, 3, 4, 5}}};
  for (const auto& [sa, sb] : layouts) {
    const std::vector<float> va = testing::PseudoFloats(ElementCount(sa), 1, -4, 4);
    const std::vector<float> vb = testing::PseudoFloats(ElementCount(sb), 2, -4, 4);
    const std::string text =
        absl::StrCat(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float16[)",
                     absl::StrJoin(sa, ","), "] a, float16[", absl::StrJoin(sb, ","), R"(] b)
  => (float16[2,3,4,5] d, bool[2,3,4,5] gt) { d = Sub(a, b) gt = Greater(a, b) }
)");
    const Tensor a = Halves(sa, va), b = Halves(sb, vb);
    auto out = Run(text, {a, b});
    ASSERT_EQ(out.size(), 2u);
    const std::vector<uint16_t> bits = Bits(out[0]);
    const std::vector<bool> greater = Values<bool>(out[1]);
    for (int64_t i = 0; i < 120; ++i) {
      const float x = HalfToFloat(Bits(a)[BroadcastOffset(sa, i)]);
      const float y = HalfToFloat(Bits(b)[BroadcastOffset(sb, i)]);
      ASSERT_EQ(bits[i], FloatToHalf(x - y)) << "element " << i << " of " << ShapeString(sa);
      ASSERT_EQ(greater[i], x > y) << "element " << i << " of " << ShapeString(sa);
    }
  }
}

TEST_F(MathKernelsTest, ShortRowBroadcastOfFp16RoundsEachProductOnceAcrossBlocks) {
  // [64,3,2,2] * [64,3,1,1] has rows of 4, too short for the row loop: the element walk, whose
  // FP16 results are rounded 512 at a time (768 values: one full block and a partial one).
  const Shape sa = {64, 3, 2, 2}, sb = {64, 3, 1, 1};
  const std::vector<float> va = testing::PseudoFloats(ElementCount(sa), 3, -300, 300);
  const std::vector<float> vb = testing::PseudoFloats(ElementCount(sb), 4, -300, 300);
  auto out = Run(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float16[64,3,2,2] a, float16[64,3,1,1] b) => (float16[64,3,2,2] p, bool[64,3,2,2] gt) {
  p = Mul(a, b) gt = Greater(a, b) }
)",
                 {Halves(sa, va), Halves(sb, vb)});
  ASSERT_EQ(out.size(), 2u);
  const std::vector<uint16_t> bits = Bits(out[0]);
  const std::vector<bool> greater = Values<bool>(out[1]);
  const Tensor a = Halves(sa, va), b = Halves(sb, vb);
  for (int64_t i = 0; i < ElementCount(sa); ++i) {
    const float x = HalfToFloat(Bits(a)[i]), y = HalfToFloat(Bits(b)[i / 4]);
    ASSERT_EQ(bits[i], FloatToHalf(x * y)) << "element " << i;  // some overflow to infinity
    ASSERT_EQ(greater[i], x > y) << "element " << i;
  }
}

TEST_F(MathKernelsTest, RowBroadcastWhereMatchesTheElementwiseReference) {
  // cond [2,3,4,5] contiguous, x [1,3,1,1] repeated along each row of 20, y one value.
  std::vector<bool> cond(120);
  for (size_t i = 0; i < cond.size(); ++i) cond[i] = (i * 7) % 3 == 0;
  auto out = Run(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (bool[2,3,4,5] c, float[1,3,1,1] x, float y) => (float[2,3,4,5] z) { z = Where(c, x, y) }
)",
                 {Make<bool>(DType::kBool, {2, 3, 4, 5}, cond),
                  Make<float>(DType::kFloat, {1, 3, 1, 1}, {10, 20, 30}),
                  Make<float>(DType::kFloat, {}, {-1})});
  ASSERT_EQ(out.size(), 1u);
  const std::vector<float> z = Values<float>(out[0]);
  for (int64_t i = 0; i < 120; ++i) {
    ASSERT_EQ(z[i], cond[i] ? 10.0f * static_cast<float>(1 + (i / 20) % 3) : -1.0f) << i;
  }
}

TEST_F(MathKernelsTest, ClipReadsAttributesBeforeOpset11AndInputsAfter) {
  auto old = Run(R"(
<ir_version: 7, opset_import: ["" : 10]>
g (float[4] x) => (float[4] y) { y = Clip<min = -1.0, max = 2.0>(x) }
)",
                 {Make<float>(DType::kFloat, {4}, {-5, 0.5f, 3, 2})});
  ASSERT_EQ(old.size(), 1u);
  EXPECT_THAT(Values<float>(old[0]), ElementsAre(-1, 0.5f, 2, 2));
  // Only min given (max omitted): nothing is capped above.
  auto now = Run(
      R"(
<ir_version: 8, opset_import: ["" : 13]>
g (int32[4] x, int32 lo) => (int32[4] y) { y = Clip(x, lo) }
)",
      {Make<int32_t>(DType::kInt32, {4}, {-5, 0, 300, 7}), Make<int32_t>(DType::kInt32, {}, {0})});
  ASSERT_EQ(now.size(), 1u);
  EXPECT_THAT(Values<int32_t>(now[0]), ElementsAre(0, 0, 300, 7));
}

TEST_F(MathKernelsTest, SumAndMeanOfFp16AccumulateInFloat) {
  // Sum: 2048 + 1 + 1 = 2050 exactly; an FP16 accumulator gives 2048 + 1 -> 2048 (tie to even)
  // twice. Mean: (65504 + 65504) / 2 = 65504; an FP16 accumulator overflows to inf.
  auto out = Run(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float16[2] a, float16[2] b, float16[2] c) => (float16[2] s, float16[2] m) {
  s = Sum(a, b, c)
  m = Mean(a, b)
}
)",
                 {Halves({2}, {2048, 65504}), Halves({2}, {1, 65504}), Halves({2}, {1, 0})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(HalfToFloat(Bits(out[0])[0]), 2050.0f);
  EXPECT_EQ(HalfToFloat(Bits(out[1])[1]), 65504.0f);
}

// FP16/BF16 folds run a block of 512 at a time (a broadcast scalar among them): each element is
// still folded in float and rounded once, NaN propagating through Max as one at a time does.
TEST_F(MathKernelsTest, LowPrecisionFoldsOverManyBlocksRoundOnce) {
  const int n = 1100;
  for (const bool bf16 : {false, true}) {
    const std::string type = bf16 ? "bfloat16" : "float16";
    const auto round = [&](float v) {
      return bf16 ? BFloat16ToFloat(FloatToBFloat16(v)) : HalfToFloat(FloatToHalf(v));
    };
    const auto tensor = [&](Shape shape, const std::vector<float>& v) {
      Tensor t = Tensor::Host(bf16 ? DType::kBFloat16 : DType::kFloat16, std::move(shape));
      for (size_t i = 0; i < v.size(); ++i) {
        t.data<uint16_t>()[i] = bf16 ? FloatToBFloat16(v[i]) : FloatToHalf(v[i]);
      }
      return t;
    };
    std::vector<float> a(n), b(n);
    for (int i = 0; i < n; ++i) {
      a[i] = round(std::sin(0.37f * i) * 300.0f);
      b[i] = round(std::cos(0.11f * i) * 7.0f);
    }
    a[700] = NAN;
    const float c = round(0.3f);
    auto out = Run(absl::StrCat(R"(<ir_version: 8, opset_import: ["" : 17]>
g ()",
                                type, "[1100] a, ", type, "[1100] b, ", type, " c) => (", type,
                                "[1100] s, ", type, "[1100] mx, ", type, R"([1100] m) {
  s = Sum(a, b, c)
  mx = Max(b, a, c)
  m = Mean(a, b)
}
)"),
                   {tensor({n}, a), tensor({n}, b), tensor({}, {c})});
    ASSERT_EQ(out.size(), 3u);
    for (int i = 0; i < n; ++i) {
      const float sum = round(a[i] + b[i] + c), mean = round((a[i] + b[i]) / 2.0f);
      const float max = std::isnan(a[i]) ? a[i] : std::max(std::max(b[i], a[i]), c);
      const uint16_t* bits[3] = {out[0].data<uint16_t>(), out[1].data<uint16_t>(),
                                 out[2].data<uint16_t>()};
      const float want[3] = {sum, max, mean};
      for (int k = 0; k < 3; ++k) {
        const float got = bf16 ? BFloat16ToFloat(bits[k][i]) : HalfToFloat(bits[k][i]);
        if (std::isnan(want[k])) {
          EXPECT_TRUE(std::isnan(got)) << type << " output " << k << " at " << i;
        } else {
          ASSERT_EQ(got, want[k]) << type << " output " << k << " at " << i;
        }
      }
    }
  }
}

TEST_F(MathKernelsTest, MaxMinSumBroadcastAcrossManyInputs) {
  auto out =
      Run(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (int64[2,1] a, int64[3] b, int64 c) => (int64[2,3] mx, int64[2,3] mn, int64[2,3] s) {
  mx = Max(a, b, c)
  mn = Min(a, b, c)
  s = Sum(a, b, c)
}
)",
          {Make<int64_t>(DType::kInt64, {2, 1}, {0, 10}),
           Make<int64_t>(DType::kInt64, {3}, {-1, 5, 20}), Make<int64_t>(DType::kInt64, {}, {3})});
  ASSERT_EQ(out.size(), 3u);
  // Row r, column j: a[r], b[j], c.
  EXPECT_THAT(Values<int64_t>(out[0]), ElementsAre(3, 5, 20, 10, 10, 20));
  EXPECT_THAT(Values<int64_t>(out[1]), ElementsAre(-1, 0, 0, -1, 3, 3));
  EXPECT_THAT(Values<int64_t>(out[2]), ElementsAre(2, 8, 23, 12, 18, 33));
}

TEST_F(MathKernelsTest, IntegerModFollowsTheDivisorsSignUnlessFmod) {
  const std::string model = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (int32[5] a, int32[5] b) => (int32[5] m, int32[5] f) {
  m = Mod(a, b)
  f = Mod<fmod = 1>(a, b)
}
)";
  auto out = Run(model, {Make<int32_t>(DType::kInt32, {5}, {-7, 7, -7, 7, 0}),
                         Make<int32_t>(DType::kInt32, {5}, {3, -3, -3, 3, 5})});
  ASSERT_EQ(out.size(), 2u);
  // Python: -7 % 3 = 2, 7 % -3 = -2, -7 % -3 = -1, 7 % 3 = 1. C fmod keeps the dividend's sign.
  EXPECT_THAT(Values<int32_t>(out[0]), ElementsAre(2, -2, -1, 1, 0));
  EXPECT_THAT(Values<int32_t>(out[1]), ElementsAre(-1, 1, -1, 1, 0));
}

TEST_F(MathKernelsTest, FloatFmodKeepsTheDividendsSign) {
  auto out = Run(
      R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] a, float[2] b) => (float[2] f) { f = Mod<fmod = 1>(a, b) }
)",
      {Make<float>(DType::kFloat, {2}, {-7.5f, 7.5f}), Make<float>(DType::kFloat, {2}, {2, -2})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(Values<float>(out[0]), ElementsAre(-1.5f, 1.5f));
}

TEST_F(MathKernelsTest, BitShiftLeftAndRight) {
  auto out = Run(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (uint8[3] x, uint8[3] s) => (uint8[3] l, uint8[3] r) {
  l = BitShift<direction = "LEFT">(x, s)
  r = BitShift<direction = "RIGHT">(x, s)
}
)",
                 {Make<uint8_t>(DType::kUint8, {3}, {16, 4, 1}),
                  Make<uint8_t>(DType::kUint8, {3}, {1, 2, 3})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_THAT(Values<uint8_t>(out[0]), ElementsAre(32, 16, 8));
  EXPECT_THAT(Values<uint8_t>(out[1]), ElementsAre(8, 1, 0));
}

TEST_F(MathKernelsTest, ThresholdedReluOfNanIsZeroAsOnnxDefinesIt) {
  // y = x for x > alpha, else 0: NaN is not > alpha.
  auto out = Run(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[3] x) => (float[3] y) { y = ThresholdedRelu <alpha = 1.0> (x) })",
                 {testing::Floats({3}, {NAN, 0.5f, 2.0f})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{0.0f, 0.0f, 2.0f}));
}

TEST_F(MathKernelsTest, PReluBroadcastsSlopeOverX) {
  auto out = Run(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x, float[3] slope) => (float[2,3] y) { y = PRelu(x, slope) }
)",
                 {Make<float>(DType::kFloat, {2, 3}, {-1, -2, 3, 4, -5, -6}),
                  Make<float>(DType::kFloat, {3}, {0.5f, 2, 10})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(Values<float>(out[0]), ElementsAre(-0.5f, -4, 3, 4, -10, -60));
}

TEST_F(MathKernelsTest, PReluBeforeOpset7AppliesASlopeOfCPerChannel) {
  // X [1,2,2]: channel 0 holds -1, -2 (slope 0.5), channel 1 holds -3, 4 (slope 3).
  auto out = Run(R"(
<ir_version: 3, opset_import: ["" : 6]>
g (float[1,2,2] x, float[2] slope) => (float[1,2,2] y) { y = PRelu(x, slope) }
)",
                 {Make<float>(DType::kFloat, {1, 2, 2}, {-1, -2, -3, 4}),
                  Make<float>(DType::kFloat, {2}, {0.5f, 3})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(Values<float>(out[0]), ElementsAre(-0.5f, -1, -9, 4));
}

TEST_F(MathKernelsTest, ShrinkAndMish) {
  auto out = Run(R"(
<ir_version: 8, opset_import: ["" : 18]>
g (float[5] x) => (float[5] s, float[5] m) {
  s = Shrink<lambd = 1.5, bias = 0.5>(x)
  m = Mish(x)
}
)",
                 {Make<float>(DType::kFloat, {5}, {-2, -1, 0, 1.5f, 3})});
  ASSERT_EQ(out.size(), 2u);
  // x < -1.5: x + 0.5; x > 1.5: x - 0.5; else 0.
  EXPECT_THAT(Values<float>(out[0]), ElementsAre(-1.5f, 0, 0, 0, 2.5f));
  const std::vector<double> x = {-2, -1, 0, 1.5, 3};
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = x[i] * std::tanh(std::log(1 + std::exp(x[i])));  // definition of Mish
    EXPECT_NEAR(out[1].data<float>()[i], want, 1e-6) << "x = " << x[i];
  }
}

TEST_F(MathKernelsTest, DetOfABatchOfMatrices) {
  auto out = Run(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,2,2] a, double[3,3] b) => (float[2] da, double db) {
  da = Det(a)
  db = Det(b)
}
)",
                 {Make<float>(DType::kFloat, {2, 2, 2}, {1, 2, 3, 4, 0, 2, 3, 0}),
                  Make<double>(DType::kDouble, {3, 3}, {6, 1, 1, 4, -2, 5, 2, 8, 7})});
  ASSERT_EQ(out.size(), 2u);
  // 1*4 - 2*3 = -2; 0*0 - 2*3 = -6 (needs a row swap);
  // 6(-14-40) - 1(28-10) + 1(32+4) = -324 - 18 + 36 = -306.
  EXPECT_THAT(Values<float>(out[0]), ElementsAre(FloatNear(-2, 1e-6), FloatNear(-6, 1e-6)));
  EXPECT_NEAR(out[1].data<double>()[0], -306.0, 1e-9);
}

}  // namespace
}  // namespace ampc
