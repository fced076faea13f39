// Element conversions for Cast and CastLike between every pair of storage types (float, double,
// FP16, BF16, the integers, bool), each rounded once: the one copy the CPU kernels and (AMPC_HD)
// the CUDA Cast kernels both run. Plain C++17.
//
// Narrowing to FP16/BF16 goes through float with float16.h's RNE conversions. A source wider than
// float (double, integers over 2^24) is first rounded to float *to odd*: that keeps the sticky
// information, so the final RNE to 11 or 8 bits equals a direct, single rounding.
#ifndef AMPC_KERNELS_NUMERICS_CAST_MATH_H_
#define AMPC_KERNELS_NUMERICS_CAST_MATH_H_

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "kernels/numerics/float16.h"
#include "kernels/numerics/host_device.h"

namespace ampc {

// double -> float rounded toward zero, with the lowest bit set when inexact (round to odd).
AMPC_HD inline float DoubleToFloatOdd(double v) {
  float f = static_cast<float>(v);
  if (v != v || static_cast<double>(f) == v) return f;
  uint32_t bits = BitCast<uint32_t>(f);
  // Rounded away from zero (inf included): step the magnitude back by one ulp.
  if (fabs(static_cast<double>(f)) > fabs(v)) bits -= 1;
  return BitCast<float>(bits | 1u);
}

// Integer -> float rounded to odd, exactly (no intermediate double).
template <typename I>
AMPC_HD inline float IntegerToFloatOdd(I v) {
  const bool negative = std::is_signed_v<I> && v < 0;
  // Magnitude as uint64 (well defined for the most negative value too).
  const uint64_t magnitude =
      negative ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  float f;
  const int width = BitWidth(magnitude);
  if (width <= 24) {
    f = static_cast<float>(magnitude);
  } else {
    const int shift = width - 24;
    uint64_t top = magnitude >> shift;
    if ((magnitude & ((uint64_t{1} << shift) - 1)) != 0) top |= 1u;
    // Both factors are exact floats and so is their product (below 2^64).
    f = static_cast<float>(top) * static_cast<float>(uint64_t{1} << shift);
  }
  return negative ? -f : f;
}

// std::numeric_limits<I>'s min and max, which device code cannot call.
template <typename I>
struct IntegerLimits {
  using Unsigned = std::make_unsigned_t<I>;
  static constexpr I kMax =
      static_cast<I>(static_cast<Unsigned>(~Unsigned{0}) >> (std::is_signed_v<I> ? 1 : 0));
  static constexpr I kMin = std::is_signed_v<I> ? static_cast<I>(-kMax - 1) : I{0};
};

// Float -> integer by truncation; NaN gives 0, values beyond int64/uint64 saturate, and values in
// range but outside To wrap modulo 2^bits as C and numpy do for integer narrowing.
template <typename To, typename F>
AMPC_HD inline To FloatToInteger(F v) {
  if (v != v) return To{0};
  const double t = trunc(static_cast<double>(v));
  if constexpr (std::is_unsigned_v<To>) {
    if (t >= 0x1p64) return IntegerLimits<To>::kMax;
    if (t >= 0) return static_cast<To>(static_cast<uint64_t>(t));
  }
  if (t >= 0x1p63) return IntegerLimits<To>::kMax;
  if (t < -0x1p63) return IntegerLimits<To>::kMin;  // 0 for unsigned To
  return static_cast<To>(static_cast<int64_t>(t));
}

// One element of From converted to To.
template <typename From, typename To>
AMPC_HD inline To ConvertElement(From v) {
  if constexpr (std::is_same_v<From, To>) {
    return v;
  } else if constexpr (kIsHalfLike<From>) {
    return ConvertElement<float, To>(Float16Compute<From>::Load(v));  // widening is exact
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From{0};
  } else if constexpr (kIsHalfLike<To>) {
    if constexpr (std::is_same_v<From, float>) {
      return Float16Compute<To>::Store(v);
    } else if constexpr (std::is_same_v<From, double>) {
      return Float16Compute<To>::Store(DoubleToFloatOdd(v));
    } else if constexpr (std::is_same_v<From, bool>) {
      return Float16Compute<To>::Store(v ? 1.0f : 0.0f);
    } else {
      return Float16Compute<To>::Store(IntegerToFloatOdd(v));
    }
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(v);  // a single RNE conversion
  } else if constexpr (std::is_floating_point_v<From>) {
    return FloatToInteger<To>(v);
  } else {
    return static_cast<To>(v);  // integer narrowing wraps; bool gives 0/1
  }
}

// ConvertElement as a functor, for the CUDA elementwise kernels' templates.
template <typename From, typename To>
struct ConvertOp {
  AMPC_HD To operator()(From v) const { return ConvertElement<From, To>(v); }
};

}  // namespace ampc

#endif  // AMPC_KERNELS_NUMERICS_CAST_MATH_H_
