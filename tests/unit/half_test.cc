#include "kernels/numerics/half.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define AMPC_TEST_MXCSR 1
#endif

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
  void (*to_float_span)(std::span<const uint16_t>, std::span<float>) = nullptr;
  void (*from_float_span)(std::span<const float>, std::span<uint16_t>) = nullptr;

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
  f.to_float_span = HalfToFloat;
  f.from_float_span = FloatToHalf;
  return f;
}

Format BFloat16Format() {
  Format f{"BFloat16", 8, 7, BFloat16ToFloat, FloatToBFloat16, nullptr, nullptr};
#ifdef AMPC_HAVE_CUDA
  f.cuda_to_float = CudaBFloat16ToFloat;
  f.cuda_from_float = CudaFloatToBFloat16;
#endif
  f.to_float_span = BFloat16ToFloat;
  f.from_float_span = FloatToBFloat16;
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

// The rounding corpus plus NaNs of both signs with payloads in every part of the mantissa
// (signalling and quiet, payloads that vanish when narrowed).
std::vector<float> SpanCorpus(const Format& f) {
  std::vector<float> floats = RoundingCorpus(f);
  std::mt19937 rng(7);
  std::vector<uint32_t> payloads = {1u,        2u,        0x1fffu,   0x2000u,   0x3fffu,
                                    0x200000u, 0x3fffffu, 0x400000u, 0x400001u, 0x7fffffu};
  for (int i = 0; i < 1000; ++i)
    payloads.push_back((static_cast<uint32_t>(rng()) & 0x7fffffu) | 1u);
  for (uint32_t payload : payloads) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      floats.push_back(std::bit_cast<float>(sign | 0x7f800000u | payload));
    }
  }
  return floats;
}

// The bulk conversions (AVX-512 or AVX2 + F16C loops where the CPU has them) against
// the scalar ones, bit for bit: every 16-bit pattern and the whole corpus, from several
// alignments, and every short length (the tails shorter than a vector).
void ExpectSpansMatchScalar(const Format& f) {
  std::vector<uint16_t> patterns(65536 + 8);
  for (size_t i = 0; i < patterns.size(); ++i) patterns[i] = static_cast<uint16_t>(i);
  std::vector<float> wide(patterns.size());
  for (size_t shift : {0, 1, 3, 8}) {
    const std::span<const uint16_t> in(patterns.data() + shift, 65536);
    f.to_float_span(in, wide);
    for (size_t i = 0; i < in.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(wide[i]), std::bit_cast<uint32_t>(f.to_float(in[i])))
          << std::hex << in[i];
    }
  }
  const std::vector<float> floats = SpanCorpus(f);
  std::vector<uint16_t> narrow(floats.size());
  for (size_t shift : {0, 5}) {
    const std::span<const float> in = std::span(floats).subspan(shift);
    f.from_float_span(in, narrow);
    for (size_t i = 0; i < in.size(); ++i) {
      ASSERT_EQ(narrow[i], f.from_float(in[i])) << std::hex << std::bit_cast<uint32_t>(in[i]);
    }
  }
  for (size_t n = 0; n <= 17; ++n) {
    const size_t first = floats.size() - n;  // the NaNs, the corpus's last entries
    std::vector<uint16_t> out(n + 1, 0xabcd);
    f.from_float_span(std::span(floats).subspan(first, n), out);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], f.from_float(floats[first + i])) << n;
    ASSERT_EQ(out[n], 0xabcd) << "wrote past the end, n = " << n;
    std::vector<float> back(n + 1, 1.5f);
    f.to_float_span(std::span<const uint16_t>(patterns).subspan(0x7c00 + 3, n), back);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(back[i]),
                std::bit_cast<uint32_t>(f.to_float(patterns[0x7c03 + i])));
    }
    ASSERT_EQ(back[n], 1.5f) << "wrote past the end, n = " << n;
  }
}

TEST_P(HalfFormatTest, SpanConversionsMatchScalar) { ExpectSpansMatchScalar(GetParam()); }

#ifdef AMPC_TEST_MXCSR
// Flush-to-zero and denormals-are-zero (set by -ffast-math code in the same process) must not
// change the results: the scalar code is integer arithmetic and the vector conversions must ignore
// both flags.
TEST_P(HalfFormatTest, SpanConversionsIgnoreFlushToZeroAndDenormalsAreZero) {
  struct FlushDenormals {  // FTZ (bit 15) and DAZ (bit 6) while in scope
    unsigned saved = _mm_getcsr();
    FlushDenormals() { _mm_setcsr(saved | 0x8040u); }
    ~FlushDenormals() { _mm_setcsr(saved); }
  } flush;
  ExpectSpansMatchScalar(GetParam());
}
#endif

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
