// IEEE binary16 (FP16) and bfloat16 storage types and their exact scalar conversions to and from
// float: the one copy the CPU kernels (through half.h) and the CUDA kernels (through num.h, on the
// device too) both use. Plain C++17, AMPC_HD: nvcc compiles CUDA as C++17.
//
// These are the project's own conversions (DESIGN.md, numerics model): float -> 16 bit rounds to
// nearest, ties to even, overflows to infinity and keeps subnormals exact; 16 bit -> float is
// exact. NaNs keep their sign and payload: widening keeps all of it, narrowing keeps its leading
// bits and sets the quiet bit (so the result is never mistaken for infinity). CUDA's host
// functions instead return one canonical NaN; see tests/unit/half_test.cc.
#ifndef AMPC_KERNELS_NUMERICS_FLOAT16_H_
#define AMPC_KERNELS_NUMERICS_FLOAT16_H_

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/numerics/host_device.h"

namespace ampc {

struct Half {
  uint16_t bits;
};

struct BFloat16 {
  uint16_t bits;
};

static_assert(sizeof(Half) == 2 && std::is_trivial_v<Half>);
static_assert(sizeof(BFloat16) == 2 && std::is_trivial_v<BFloat16>);

template <typename T>
inline constexpr bool kIsHalfLike = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// std::bit_cast, which neither C++17 nor device code has.
template <typename To, typename From>
AMPC_HD inline To BitCast(From from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  memcpy(&to, &from, sizeof(To));
  return to;
}

// std::bit_width: the bits needed to hold x (0 for 0).
AMPC_HD inline int BitWidth(uint64_t x) {
#ifdef __CUDA_ARCH__
  return 64 - __clzll(static_cast<long long>(x));
#else
  return x == 0 ? 0 : 64 - __builtin_clzll(x);
#endif
}

AMPC_HD inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = 0;
  } else {
    // Subnormal: mantissa * 2^-24, renormalised around its leading one bit.
    const uint32_t top = static_cast<uint32_t>(BitWidth(mantissa)) - 1;
    bits = ((top + 103) << 23) | ((mantissa << (23 - top)) & 0x7fffffu);
  }
  return BitCast<float>(sign | bits);
}

AMPC_HD inline uint16_t FloatToHalf(float f) {
  const uint32_t x = BitCast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t magnitude = x & 0x7fffffffu;
  uint32_t bits;
  if (magnitude >= 0x47800000u) {  // |f| >= 2^16, infinity or NaN
    bits = magnitude > 0x7f800000u ? 0x7e00u | ((magnitude >> 13) & 0x3ffu) : 0x7c00u;
  } else if (magnitude >= 0x38800000u) {  // normal half; a carry may round up to infinity
    const uint32_t rounding = 0xfffu + ((magnitude >> 13) & 1u);
    bits = (magnitude - ((127u - 15u) << 23) + rounding) >> 13;
  } else {  // subnormal half or zero: significand * 2^(exponent - 150) in units of 2^-24
    const uint32_t exponent = magnitude >> 23;
    const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    const uint32_t shift = exponent < 95 ? 31 : 126 - exponent;
    const uint32_t odd = (significand >> shift) & 1u;
    bits = (significand + (1u << (shift - 1)) - 1 + odd) >> shift;
  }
  return static_cast<uint16_t>(sign | bits);
}

AMPC_HD inline float BFloat16ToFloat(uint16_t b) { return BitCast<float>(uint32_t{b} << 16); }

AMPC_HD inline uint16_t FloatToBFloat16(float f) {
  const uint32_t x = BitCast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// A 16-bit float as the float it computes in: Load widens exactly, Store rounds to nearest even.
// The FP16/BF16 cases of runtime/core/dtype.h's Compute<T> and num.h's Num<T>.
template <typename T>
struct Float16Compute;
template <>
struct Float16Compute<Half> {
  using type = float;
  AMPC_HD static float Load(Half v) { return HalfToFloat(v.bits); }
  AMPC_HD static Half Store(float v) { return Half{FloatToHalf(v)}; }
};
template <>
struct Float16Compute<BFloat16> {
  using type = float;
  AMPC_HD static float Load(BFloat16 v) { return BFloat16ToFloat(v.bits); }
  AMPC_HD static BFloat16 Store(float v) { return BFloat16{FloatToBFloat16(v)}; }
};

}  // namespace ampc

#endif  // AMPC_KERNELS_NUMERICS_FLOAT16_H_
