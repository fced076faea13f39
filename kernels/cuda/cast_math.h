// Element conversions of the CUDA Cast kernels, as __host__ __device__ code: the algorithms of
// kernels/cpu/math_cast.h (ConvertElement), bit for bit, so host tests check them against it.
// Narrowing to FP16/BF16 goes through float; a source wider than float is first rounded to float
// *to odd*, so the final rounding to nearest even equals a direct one. Plain C++17.
#ifndef AMPC_KERNELS_CUDA_CAST_MATH_H_
#define AMPC_KERNELS_CUDA_CAST_MATH_H_

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/elementwise_math.h"

namespace ampc::cuda {

// double -> float rounded toward zero, with the lowest bit set when inexact (round to odd).
AMPC_HD inline float DoubleToFloatOdd(double v) {
  float f = static_cast<float>(v);
  if (IsNan(v) || static_cast<double>(f) == v) return f;
  uint32_t bits = BitCast<uint32_t>(f);
  // Rounded away from zero (inf included): step the magnitude back by one ulp.
  if (::fabs(static_cast<double>(f)) > ::fabs(v)) bits -= 1;
  return BitCast<float>(bits | 1u);
}

// Integer -> float rounded to odd, exactly.
template <typename I>
AMPC_HD inline float IntegerToFloatOdd(I v) {
  const bool negative = std::is_signed_v<I> && v < 0;
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

template <typename T>
struct IntLimits;
template <>
struct IntLimits<int8_t> {
  static constexpr int8_t kMin = INT8_MIN, kMax = INT8_MAX;
};
template <>
struct IntLimits<uint8_t> {
  static constexpr uint8_t kMin = 0, kMax = UINT8_MAX;
};
template <>
struct IntLimits<int32_t> {
  static constexpr int32_t kMin = INT32_MIN, kMax = INT32_MAX;
};
template <>
struct IntLimits<int64_t> {
  static constexpr int64_t kMin = INT64_MIN, kMax = INT64_MAX;
};

// Float -> integer by truncation; NaN gives 0, values beyond int64/uint64 saturate, and values in
// range but outside To wrap modulo 2^bits.
template <typename To, typename F>
AMPC_HD inline To FloatToInteger(F v) {
  if (IsNan(v)) return To{0};
  const double t = ::trunc(static_cast<double>(v));
  if constexpr (std::is_unsigned_v<To>) {
    if (t >= 0x1p64) return IntLimits<To>::kMax;
    if (t >= 0) return static_cast<To>(static_cast<uint64_t>(t));
  }
  if (t >= 0x1p63) return IntLimits<To>::kMax;
  if (t < -0x1p63) return std::is_unsigned_v<To> ? To{0} : IntLimits<To>::kMin;
  return static_cast<To>(static_cast<int64_t>(t));
}

template <typename From, typename To>
AMPC_HD inline To ConvertElement(From v) {
  if constexpr (std::is_same_v<From, To>) {
    return v;
  } else if constexpr (kIsHalfLike<From>) {
    return ConvertElement<float, To>(Num<From>::Load(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From{0};
  } else if constexpr (kIsHalfLike<To>) {
    if constexpr (std::is_same_v<From, float>) {
      return Num<To>::Store(v);
    } else if constexpr (std::is_same_v<From, double>) {
      return Num<To>::Store(DoubleToFloatOdd(v));
    } else if constexpr (std::is_same_v<From, bool>) {
      return Num<To>::Store(v ? 1.0f : 0.0f);
    } else {
      return Num<To>::Store(IntegerToFloatOdd(v));
    }
  } else if constexpr (kIsFloat<To>) {
    return static_cast<To>(v);  // one RNE conversion
  } else if constexpr (kIsFloat<From>) {
    return FloatToInteger<To>(v);
  } else {
    return static_cast<To>(v);  // integer narrowing wraps; bool gives 0/1
  }
}

template <typename From, typename To>
struct ConvertOp {
  AMPC_HD To operator()(From v) const { return ConvertElement<From, To>(v); }
};

}  // namespace ampc::cuda

#endif  // AMPC_KERNELS_CUDA_CAST_MATH_H_
