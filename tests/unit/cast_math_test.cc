// kernels/numerics/cast_math.h, the element conversions both backends' Cast kernels run, against
// an independent oracle in long double (64 significant bits: every double and every 64-bit
// integer is exact): narrowing to FP16/BF16 is one rounding to nearest even from any source, and
// float -> integer truncates, saturates beyond the 64-bit range and wraps inside it.
#include "kernels/numerics/cast_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/numerics/float16.h"

namespace ampc {
namespace {

constexpr bool kLongDoubleHolds64Bits = std::numeric_limits<long double>::digits >= 64;

struct Format {
  int mantissa_bits;
  int bias;
};

template <typename T>
constexpr Format FormatOf() {
  return std::is_same_v<T, Half> ? Format{10, 15} : Format{7, 127};
}

// The value of a non-NaN 16-bit pattern.
template <typename T>
long double Decode(T v) {
  return static_cast<long double>(Float16Compute<T>::Load(v));  // exact (half_test.cc)
}

template <typename T>
bool IsNan(T v) {
  return std::isnan(Float16Compute<T>::Load(v));
}

// x rounded to nearest even at T's precision: scale so the last place is 1, nearbyintl, scale
// back; infinity from 2^(bias + 1) on.
template <typename T>
long double RoundTo(long double x) {
  const Format f = FormatOf<T>();
  if (x == 0 || std::isinf(x)) return x;
  int exponent;
  std::frexp(x, &exponent);
  const int lead = std::max(exponent - 1, 1 - f.bias);
  const long double quantum = std::ldexp(1.0L, lead - f.mantissa_bits);
  const long double rounded = std::nearbyint(x / quantum) * quantum;
  if (std::fabs(rounded) >= std::ldexp(1.0L, f.bias + 1)) {
    return std::copysign(std::numeric_limits<long double>::infinity(), x);
  }
  return rounded;
}

// Values of From near T's rounding boundaries (ties and either side, where a second rounding
// through float would go wrong) and at random.
template <typename From, typename T>
std::vector<From> Corpus() {
  std::vector<From> values;
  std::mt19937_64 rng(11);
  const Format f = FormatOf<T>();
  for (int e = -30; e < 66; ++e) {
    for (int i = 0; i < 2000; ++i) {
      // A tie at exponent e: an odd multiple of half the quantum, nudged by a few units of From.
      const uint64_t top =
          (rng() & ((uint64_t{1} << f.mantissa_bits) - 1)) | (uint64_t{1} << f.mantissa_bits);
      const long double tie = std::ldexp(static_cast<long double>(2 * top + 1), e - 1);
      const int64_t nudge = static_cast<int64_t>(rng() % 7) - 3;
      long double x = tie;
      if constexpr (std::is_floating_point_v<From>) {
        From v = static_cast<From>(x);
        for (int64_t k = 0; k < (nudge < 0 ? -nudge : nudge); ++k) {
          v = std::nextafter(v, nudge < 0 ? From(0) : std::numeric_limits<From>::infinity());
        }
        values.push_back(rng() % 2 ? v : -v);
      } else {
        x += static_cast<long double>(nudge);
        if (x >= 0 && x <= static_cast<long double>(std::numeric_limits<From>::max())) {
          const From v = static_cast<From>(x);
          values.push_back(v);
          if constexpr (std::is_signed_v<From>) values.push_back(static_cast<From>(-v));
        }
      }
    }
  }
  for (int i = 0; i < 200000; ++i) {
    uint64_t bits = rng();
    From v;
    std::memcpy(&v, &bits, sizeof v);
    values.push_back(v);
  }
  values.push_back(std::numeric_limits<From>::max());
  values.push_back(std::numeric_limits<From>::lowest());
  return values;
}

template <typename From, typename T>
void ExpectSingleRounding() {
  SCOPED_TRACE((std::is_same_v<T, Half> ? "to FP16" : "to BF16"));
  int failures = 0;
  for (const From v : Corpus<From, T>()) {
    const T got = ConvertElement<From, T>(v);
    if constexpr (std::is_floating_point_v<From>) {
      if (std::isnan(v)) {
        ASSERT_TRUE(IsNan(got)) << v;
        continue;
      }
    }
    const long double want = RoundTo<T>(static_cast<long double>(v));
    if (IsNan(got) || Decode(got) != want || std::signbit(Decode(got)) != std::signbit(want)) {
      ADD_FAILURE() << "of " << static_cast<long double>(v) << ": got 0x" << std::hex << got.bits
                    << ", want " << want;
      if (++failures == 10) return;
    }
  }
}

TEST(CastMathTest, NarrowingToHalfAndBFloat16RoundsOnceFromEveryWiderSource) {
  if (!kLongDoubleHolds64Bits) GTEST_SKIP() << "long double cannot hold every int64 exactly";
  ExpectSingleRounding<double, Half>();
  ExpectSingleRounding<double, BFloat16>();
  ExpectSingleRounding<float, Half>();
  ExpectSingleRounding<float, BFloat16>();
  ExpectSingleRounding<int64_t, Half>();
  ExpectSingleRounding<int64_t, BFloat16>();
  ExpectSingleRounding<uint64_t, Half>();
  ExpectSingleRounding<uint64_t, BFloat16>();
  ExpectSingleRounding<int32_t, BFloat16>();
  ExpectSingleRounding<uint32_t, BFloat16>();
}

TEST(CastMathTest, EveryHalfPatternConvertsThroughItsExactFloat) {
  for (uint32_t i = 0; i <= 0xffff; ++i) {
    const uint16_t bits = static_cast<uint16_t>(i);
    const Half h{bits};
    const BFloat16 b{bits};
    const float hf = HalfToFloat(bits), bf = BFloat16ToFloat(bits);
    ASSERT_EQ(std::bit_cast<uint32_t>(ConvertElement<Half, float>(h)), std::bit_cast<uint32_t>(hf));
    ASSERT_EQ(std::bit_cast<uint64_t>(ConvertElement<BFloat16, double>(b)),
              std::bit_cast<uint64_t>(static_cast<double>(bf)));
    if (!std::isnan(hf)) {
      ASSERT_EQ(Decode(ConvertElement<Half, BFloat16>(h)), RoundTo<BFloat16>(hf))
          << std::hex << bits;
    }
    if (!std::isnan(bf)) {
      ASSERT_EQ(Decode(ConvertElement<BFloat16, Half>(b)), RoundTo<Half>(bf)) << std::hex << bits;
    }
    ASSERT_EQ((ConvertElement<Half, bool>(h)), hf != 0) << std::hex << bits;
    ASSERT_EQ((ConvertElement<BFloat16, int16_t>(b)), (ConvertElement<float, int16_t>(bf)));
    ASSERT_EQ((ConvertElement<Half, uint64_t>(h)), (ConvertElement<float, uint64_t>(hf)));
  }
}

// The rule, spelled out: NaN -> 0; truncate; beyond int64 (signed To) or uint64 (unsigned To)
// saturate to To's limit on that side (0 for an unsigned To below -2^63); otherwise the integer
// modulo 2^bits.
template <typename To>
To Expected(long double v) {
  using L = std::numeric_limits<To>;
  if (std::isnan(v)) return 0;
  const long double t = std::trunc(v);
  const long double high = std::is_unsigned_v<To> ? 0x1p64L : 0x1p63L;
  if (t >= high) return L::max();
  if (t < -0x1p63L) return L::min();
  __extension__ using Int128 = __int128;  // GCC's: every value here, exactly
  __extension__ using Uint128 = unsigned __int128;
  const auto modulo =
      static_cast<Uint128>(static_cast<Int128>(t)) & ((Uint128{1} << (8 * sizeof(To))) - 1);
  return static_cast<To>(static_cast<uint64_t>(modulo));
}

template <typename F, typename To>
void ExpectFloatToInteger(const std::vector<long double>& values) {
  for (const long double x : values) {
    const F v = static_cast<F>(x);
    ASSERT_EQ((ConvertElement<F, To>(v)), Expected<To>(static_cast<long double>(v)))
        << static_cast<long double>(v) << " to " << sizeof(To) * 8 << " bits";
  }
}

TEST(CastMathTest, FloatToIntegerTruncatesSaturatesBeyond64BitsAndWrapsInside) {
  if (!kLongDoubleHolds64Bits) GTEST_SKIP() << "long double cannot hold every int64 exactly";
  std::vector<long double> values = {0.0L,     -0.0L,    0.5L,      -0.5L,    1.9L,         -1.9L,
                                     127.5L,   128.0L,   -128.9L,   -129.0L,  255.9L,       256.0L,
                                     65535.5L, 65536.0L, -32769.0L, 0x1p31L,  -0x1p31L - 1, 0x1p32L,
                                     0x1p62L,  0x1p63L,  -0x1p63L,  -0x1p64L, 0x1p64L,      0x1p70L,
                                     -0x1p70L, 1e30L,    -1e30L,    INFINITY, -INFINITY,    NAN};
  std::mt19937_64 rng(5);
  for (int i = 0; i < 20000; ++i) {
    const int exponent = static_cast<int>(rng() % 72) - 4;
    const long double x = std::ldexp(std::uniform_real_distribution<double>(1, 2)(rng), exponent);
    values.push_back(rng() % 2 ? x : -x);
  }
  auto all_targets = [&]<typename F>() {
    ExpectFloatToInteger<F, int8_t>(values);
    ExpectFloatToInteger<F, uint8_t>(values);
    ExpectFloatToInteger<F, int16_t>(values);
    ExpectFloatToInteger<F, uint16_t>(values);
    ExpectFloatToInteger<F, int32_t>(values);
    ExpectFloatToInteger<F, uint32_t>(values);
    ExpectFloatToInteger<F, int64_t>(values);
    ExpectFloatToInteger<F, uint64_t>(values);
  };
  all_targets.operator()<float>();
  all_targets.operator()<double>();
}

}  // namespace
}  // namespace ampc
