// Element conversions for Cast and CastLike: every pair of runtime types, each rounded once.
//
// Narrowing to FP16/BF16 goes through float with the project's RNE conversions (half.h). A source
// wider than float (double, integers over 2^24) is first rounded to float *to odd*: that keeps
// the sticky information, so the final RNE to 11 or 8 bits equals a direct, single rounding.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "runtime/dtype.h"

namespace ampc {

template <typename T>
inline constexpr bool kIsHalfLike = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// double -> float rounding toward zero, with the lowest bit set when inexact (round to odd).
inline float DoubleToFloatOdd(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(v) || static_cast<double>(f) == v) return f;
  if (std::abs(static_cast<double>(f)) > std::abs(v)) {
    f = std::nextafter(f, 0.0f);  // truncate toward zero (inf steps back to FLT_MAX)
  }
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
}

// Integer -> float rounded to odd, exactly (no intermediate double).
template <typename I>
float IntegerToFloatOdd(I v) {
  const bool negative = std::is_signed_v<I> && v < 0;
  // Magnitude as uint64 (well defined for the most negative value too).
  const uint64_t magnitude =
      negative ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  float f;
  const int width = std::bit_width(magnitude);
  if (width <= 24) {
    f = static_cast<float>(magnitude);
  } else {
    const int shift = width - 24;
    uint64_t top = magnitude >> shift;
    if ((magnitude & ((uint64_t{1} << shift) - 1)) != 0) top |= 1u;
    f = std::ldexp(static_cast<float>(top), shift);
  }
  return negative ? -f : f;
}

// Float -> integer by truncation; NaN gives 0, values beyond int64/uint64 saturate, and values in
// range but outside To wrap modulo 2^bits as C and numpy do for integer narrowing.
template <typename To, typename F>
To FloatToInteger(F v) {
  if (std::isnan(v)) return To{0};
  const double t = std::trunc(static_cast<double>(v));
  if constexpr (std::is_unsigned_v<To>) {
    if (t >= 0x1p64) return std::numeric_limits<To>::max();
    if (t >= 0) return static_cast<To>(static_cast<uint64_t>(t));
  }
  if (t >= 0x1p63) return std::numeric_limits<To>::max();
  if (t < -0x1p63) return std::is_unsigned_v<To> ? To{0} : std::numeric_limits<To>::lowest();
  return static_cast<To>(static_cast<int64_t>(t));
}

// One element of From converted to To.
template <typename From, typename To>
To ConvertElement(From v) {
  if constexpr (std::is_same_v<From, To>) {
    return v;
  } else if constexpr (kIsHalfLike<From>) {
    return ConvertElement<float, To>(Compute<From>::Load(v));  // widening is exact
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From{0};
  } else if constexpr (kIsHalfLike<To>) {
    if constexpr (std::is_same_v<From, float>) {
      return Compute<To>::Store(v);
    } else if constexpr (std::is_same_v<From, double>) {
      return Compute<To>::Store(DoubleToFloatOdd(v));
    } else if constexpr (std::is_same_v<From, bool>) {
      return Compute<To>::Store(v ? 1.0f : 0.0f);
    } else {
      return Compute<To>::Store(IntegerToFloatOdd(v));
    }
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(v);  // a single RNE conversion
  } else if constexpr (std::is_floating_point_v<From>) {
    return FloatToInteger<To>(v);
  } else {
    return static_cast<To>(v);  // integer narrowing wraps; bool gives 0/1
  }
}

}  // namespace ampc
