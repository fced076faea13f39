// Pow with an integer base, shared by the CPU and CUDA kernels (AMPC_HD: compiled into both) so
// both backends give the same integer for every input: the exact power, rounded once to double,
// truncated toward zero; out of range (or NaN) gives the type's lowest value, as x86's cvttsd2si.
// Via std::pow instead, results past 2^53 would depend on the math library (glibc's pow is within
// 0.52 ulp, not correctly rounded; CUDA's within 2 ulp: pow(3, 1) may even be 2.9999999999999996).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/numerics/host_device.h"

namespace ampc::integer_pow {

template <typename C>
AMPC_HD inline C DoubleToIntegerX86(double v) {
  constexpr double kLimit = sizeof(C) == 8 ? 0x1p63 : 0x1p31;
  if (!(v >= -kLimit && v < kLimit)) return static_cast<C>(sizeof(C) == 8 ? INT64_MIN : INT32_MIN);
  return static_cast<C>(v);
}

// a^b as a double: exact below 2^53, rounded to nearest above; past 2^64 in magnitude, an
// infinity (out of every integer range). b < 0: 0 (truncated) unless |a| <= 1.
AMPC_HD inline double Power(int64_t a, int64_t b) {
  const bool negative = a < 0 && (b & 1) != 0;
  const double overflow = negative ? -INFINITY : INFINITY;
  if (b < 0) {
    if (a == 0) return INFINITY;
    return a == 1 || a == -1 ? (negative ? -1.0 : 1.0) : 0.0;
  }
  uint64_t base = a < 0 ? 0 - static_cast<uint64_t>(a) : static_cast<uint64_t>(a);
  uint64_t result = 1;
  for (; b > 0; b >>= 1) {
    if ((b & 1) != 0) {
      if (base != 0 && result > UINT64_MAX / base) return overflow;
      result *= base;
    }
    if (b > 1) {
      if (base > UINT32_MAX) return overflow;
      base *= base;
    }
  }
  const double magnitude = static_cast<double>(result);
  return negative ? -magnitude : magnitude;
}

// Pow(a, b) for an integer base type C and an exponent of any type that converts to double
// (an integer exponent past 2^53 in magnitude rounds to an even value there, as when the CPU
// computed in double). A non-integral exponent goes through the math library's pow.
template <typename C, typename E>
AMPC_HD inline C Pow(C a, E b) {
  const double e = static_cast<double>(b);
  if (e != ::trunc(e)) return DoubleToIntegerX86<C>(::pow(static_cast<double>(a), e));  // or NaN
  constexpr double kHuge = 0x1p62;  // even: for an integer base, every larger one acts the same
  const int64_t exponent = e >= kHuge    ? int64_t{1} << 62
                           : e <= -kHuge ? -(int64_t{1} << 62)
                                         : static_cast<int64_t>(e);
  return DoubleToIntegerX86<C>(Power(static_cast<int64_t>(a), exponent));
}

}  // namespace ampc::integer_pow
