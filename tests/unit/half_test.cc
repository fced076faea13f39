#include "kernels/cpu/half.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#ifdef AMPC_HAVE_CUDA
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace ampc {
namespace {

// CUDA's host functions (CUDA 13) agree bit for bit with ours on every non-NaN input. On NaNs
// they drop the payload: half -> float gives 0x7fffffff (sign dropped too), float -> half and
// float -> bfloat16 give 0x7fff; bfloat16 -> float is a plain shift (payload kept, not quieted).
// So NaNs are compared by NaN-ness only.
#ifdef AMPC_HAVE_CUDA
float CudaHalfToFloat(uint16_t bits) { return __half2float(__half(__half_raw{bits})); }
uint16_t CudaFloatToHalf(float f) { return __half_raw(__float2half_rn(f)).x; }
float CudaBFloat16ToFloat(uint16_t bits) {
  return __bfloat162float(__nv_bfloat16(__nv_bfloat16_raw{bits}));
}
uint16_t CudaFloatToBFloat16(float f) { return __nv_bfloat16_raw(__float2bfloat16_rn(f)).x; }
#endif

struct Format {
  std::string name;
  int exponent_bits;
  int mantissa_bits;
  float (*to_float)(uint16_t);
  uint16_t (*from_float)(float);
  float (*cuda_to_float)(uint16_t);  // null when the CUDA headers are not available
  uint16_t (*cuda_from_float)(float);

  int Bias() const { return (1 << (exponent_bits - 1)) - 1; }
  uint16_t QuietBit() const { return static_cast<uint16_t>(1u << (mantissa_bits - 1)); }
  uint16_t ExponentField(uint16_t bits) const {
    return (bits >> mantissa_bits) & ((1u << exponent_bits) - 1);
  }
  uint16_t MantissaField(uint16_t bits) const { return bits & ((1u << mantissa_bits) - 1); }
  bool IsNaN(uint16_t bits) const {
    return ExponentField(bits) == (1u << exponent_bits) - 1 && MantissaField(bits) != 0;
  }
};

Format HalfFormat() {
  Format f{"Half", 5, 10, HalfToFloat, FloatToHalf, nullptr, nullptr};
#ifdef AMPC_HAVE_CUDA
  f.cuda_to_float = CudaHalfToFloat;
  f.cuda_from_float = CudaFloatToHalf;
#endif
  return f;
}

Format BFloat16Format() {
  Format f{"BFloat16", 8, 7, BFloat16ToFloat, FloatToBFloat16, nullptr, nullptr};
#ifdef AMPC_HAVE_CUDA
  f.cuda_to_float = CudaBFloat16ToFloat;
  f.cuda_from_float = CudaFloatToBFloat16;
#endif
  return f;
}

// The textbook value of a non-NaN pattern. An all-ones exponent with a zero mantissa reads as
// 2^(emax+1): infinity for a decoder, the value after the largest finite one for a midpoint.
double TextbookValue(const Format& f, uint16_t bits) {
  const int exponent = f.ExponentField(bits);
  const int mantissa = f.MantissaField(bits);
  const int scale = std::max(exponent, 1) - f.Bias() - f.mantissa_bits;
  const double magnitude = std::ldexp(mantissa + (exponent == 0 ? 0 : 1 << f.mantissa_bits), scale);
  return (bits & 0x8000) ? -magnitude : magnitude;
}

double Decode(const Format& f, uint16_t bits) {
  const double value = TextbookValue(f, bits);
  if (f.ExponentField(bits) != (1u << f.exponent_bits) - 1) return value;
  return std::copysign(std::numeric_limits<double>::infinity(), value);
}

// Round-to-nearest-even by double arithmetic: scale so the format's last place is 1, let
// nearbyint (default rounding mode) round, scale back.
double RoundToFormat(const Format& f, double x) {
  if (x == 0 || std::isinf(x)) return x;
  int exponent;
  std::frexp(x, &exponent);
  const int lead = std::max(exponent - 1, 1 - f.Bias());
  const double quantum = std::ldexp(1.0, lead - f.mantissa_bits);
  const double rounded = std::nearbyint(x / quantum) * quantum;
  if (std::fabs(rounded) >= std::ldexp(1.0, f.Bias() + 1)) {
    return std::copysign(std::numeric_limits<double>::infinity(), x);
  }
  return rounded;
}

// Every value, every tie between neighbours and the floats either side of it, random mantissas
// under every float exponent, random bit patterns and the special values.
std::vector<float> RoundingCorpus(const Format& f) {
  std::vector<float> corpus;
  const uint16_t positive_inf =
      static_cast<uint16_t>(((1u << f.exponent_bits) - 1) << f.mantissa_bits);
  for (uint16_t bits = 0; bits < positive_inf; ++bits) {
    const float value = static_cast<float>(TextbookValue(f, bits));
    const float tie = static_cast<float>((TextbookValue(f, bits) + TextbookValue(f, bits + 1)) / 2);
    for (float x : {value, tie, std::nextafter(tie, 0.0f), std::nextafter(tie, INFINITY)}) {
      corpus.push_back(x);
      corpus.push_back(-x);
    }
  }
  std::mt19937 rng(20240607);
  for (uint32_t sign_exponent = 0; sign_exponent < 512; ++sign_exponent) {
    for (int i = 0; i < 4096; ++i) {
      corpus.push_back(
          std::bit_cast<float>((sign_exponent << 23) | (static_cast<uint32_t>(rng()) & 0x7fffffu)));
    }
  }
  for (int i = 0; i < 2'000'000; ++i)
    corpus.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  for (uint32_t bits : {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                        0xffc00000u, 0x7f800001u, 0xffbfffffu, 0x7f7fffffu, 0x00800000u,
                        0x00000001u, 0x807fffffu, 0x477fefffu, 0x477ff000u, 0x33000000u}) {
    corpus.push_back(std::bit_cast<float>(bits));
  }
  return corpus;
}

void PrintTo(const Format& f, std::ostream* os) { *os << f.name; }

class HalfFormatTest : public testing::TestWithParam<Format> {};

TEST_P(HalfFormatTest, ToFloatIsExactForEveryPattern) {
  const Format& f = GetParam();
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t bits = static_cast<uint16_t>(i);
    const float x = f.to_float(bits);
    ASSERT_EQ(std::signbit(x), (bits & 0x8000) != 0) << std::hex << bits;
    if (f.IsNaN(bits)) {
      const uint32_t payload = uint32_t{f.MantissaField(bits)} << (23 - f.mantissa_bits);
      ASSERT_EQ(std::bit_cast<uint32_t>(x) & 0x7fffffffu, 0x7f800000u | payload)
          << std::hex << bits;
    } else {
      ASSERT_EQ(static_cast<double>(x), Decode(f, bits)) << std::hex << bits;
    }
  }
}

TEST_P(HalfFormatTest, ToFloatAndBackIsIdentity) {
  const Format& f = GetParam();
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t bits = static_cast<uint16_t>(i);
    const uint16_t expected = f.IsNaN(bits) ? (bits | f.QuietBit()) : bits;
    ASSERT_EQ(f.from_float(f.to_float(bits)), expected) << std::hex << bits;
  }
}

TEST_P(HalfFormatTest, FromFloatRoundsToNearestEven) {
  const Format& f = GetParam();
  for (float x : RoundingCorpus(f)) {
    const uint16_t bits = f.from_float(x);
    const uint32_t x_bits = std::bit_cast<uint32_t>(x);
    ASSERT_EQ((bits & 0x8000) != 0, std::signbit(x)) << std::hex << x_bits;
    if (std::isnan(x)) {
      ASSERT_TRUE(f.IsNaN(bits)) << std::hex << x_bits;
    } else {
      ASSERT_EQ(Decode(f, bits), RoundToFormat(f, x)) << std::hex << x_bits;
    }
  }
}

TEST_P(HalfFormatTest, NaNKeepsSignAndLeadingPayloadAndIsQuieted) {
  const Format& f = GetParam();
  const int drop = 23 - f.mantissa_bits;
  for (uint32_t payload : {1u, 0x1234u, 0x200000u, 0x400000u, 0x7fffffu}) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      const uint16_t bits = f.from_float(std::bit_cast<float>(sign | 0x7f800000u | payload));
      ASSERT_TRUE(f.IsNaN(bits));
      EXPECT_EQ(bits >> 15, sign >> 31);
      EXPECT_EQ(f.MantissaField(bits), (payload >> drop) | f.QuietBit()) << std::hex << payload;
    }
  }
}

TEST_P(HalfFormatTest, SpanConversionsMatchScalar) {
  const Format& f = GetParam();
  std::vector<float> floats = RoundingCorpus(f);
  floats.resize(100'003);
  std::vector<uint16_t> narrow(floats.size());
  std::vector<float> wide(floats.size());
  if (f.name == "Half") {
    FloatToHalf(floats, narrow);
    HalfToFloat(narrow, wide);
  } else {
    FloatToBFloat16(floats, narrow);
    BFloat16ToFloat(narrow, wide);
  }
  for (size_t i = 0; i < floats.size(); ++i) {
    ASSERT_EQ(narrow[i], f.from_float(floats[i])) << i;
    ASSERT_EQ(std::bit_cast<uint32_t>(wide[i]), std::bit_cast<uint32_t>(f.to_float(narrow[i])));
  }
}

bool SameBitsOrBothNaN(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) ||
         (std::isnan(a) && std::isnan(b));
}

TEST_P(HalfFormatTest, ToFloatMatchesCudaHostFunctions) {
  const Format& f = GetParam();
  if (f.cuda_to_float == nullptr) GTEST_SKIP() << "CUDA backend not built: no cuda_fp16.h";
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t bits = static_cast<uint16_t>(i);
    ASSERT_TRUE(SameBitsOrBothNaN(f.to_float(bits), f.cuda_to_float(bits))) << std::hex << bits;
  }
}

TEST_P(HalfFormatTest, FromFloatMatchesCudaHostFunctions) {
  const Format& f = GetParam();
  if (f.cuda_from_float == nullptr) GTEST_SKIP() << "CUDA backend not built: no cuda_fp16.h";
  for (float x : RoundingCorpus(f)) {
    const uint16_t ours = f.from_float(x);
    const uint16_t cuda = f.cuda_from_float(x);
    if (f.IsNaN(ours) && f.IsNaN(cuda)) continue;
    ASSERT_EQ(ours, cuda) << std::hex << std::bit_cast<uint32_t>(x);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, HalfFormatTest, testing::Values(HalfFormat(), BFloat16Format()),
                         [](const testing::TestParamInfo<Format>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace ampc
