// Storage and compute types of the CUDA elementwise kernels: FP16/BF16 storage structs with the
// bit-level conversions of kernels/cpu/half.h (round to nearest even, NaN payloads kept), and
// Num<T>, runtime/dtype.h's Compute<T>: FP16/BF16 load exactly to float and store rounded once;
// and float/double arithmetic rounded once per operation on the device as on the host.
// __host__ __device__ so host tests check them against half.h. Plain C++17, no CUDA headers.
#ifndef AMPC_KERNELS_CUDA_NUM_H_
#define AMPC_KERNELS_CUDA_NUM_H_

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/host_device.h"

namespace ampc::cuda {

// Storage types of the 16-bit floats (device code cannot use kernels/cpu/half.h: C++20).
struct F16 {
  uint16_t bits;
};
struct BF16 {
  uint16_t bits;
};

template <typename To, typename From>
AMPC_HD inline To BitCast(From from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  memcpy(&to, &from, sizeof(To));
  return to;
}

AMPC_HD inline int BitWidth(uint64_t x) {
#ifdef __CUDA_ARCH__
  return 64 - __clzll(static_cast<long long>(x));
#else
  return x == 0 ? 0 : 64 - __builtin_clzll(x);
#endif
}

// ---- IEEE-exact arithmetic: one rounding to nearest even per operation, whatever nvcc's
// -prec-div/-fmad flags say (a multiply and an add never contract into one FMA) ----

AMPC_HD inline float Divide(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
AMPC_HD inline double Divide(double a, double b) {
#ifdef __CUDA_ARCH__
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}
AMPC_HD inline float Add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
AMPC_HD inline double Add(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
AMPC_HD inline float Subtract(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
AMPC_HD inline double Subtract(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
AMPC_HD inline float Multiply(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
AMPC_HD inline double Multiply(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

// ---- FP16/BF16 <-> float: the algorithms of kernels/cpu/half.h ----

AMPC_HD inline float HalfBitsToFloat(uint16_t h) {
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
    const uint32_t top = static_cast<uint32_t>(BitWidth(mantissa)) - 1;
    bits = ((top + 103) << 23) | ((mantissa << (23 - top)) & 0x7fffffu);
  }
  return BitCast<float>(sign | bits);
}

AMPC_HD inline uint16_t FloatToHalfBits(float f) {
  const uint32_t x = BitCast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t magnitude = x & 0x7fffffffu;
  uint32_t bits;
  if (magnitude >= 0x47800000u) {
    bits = magnitude > 0x7f800000u ? 0x7e00u | ((magnitude >> 13) & 0x3ffu) : 0x7c00u;
  } else if (magnitude >= 0x38800000u) {
    const uint32_t rounding = 0xfffu + ((magnitude >> 13) & 1u);
    bits = (magnitude - ((127u - 15u) << 23) + rounding) >> 13;
  } else {
    const uint32_t exponent = magnitude >> 23;
    const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    const uint32_t shift = exponent < 95 ? 31 : 126 - exponent;
    const uint32_t odd = (significand >> shift) & 1u;
    bits = (significand + (1u << (shift - 1)) - 1 + odd) >> shift;
  }
  return static_cast<uint16_t>(sign | bits);
}

AMPC_HD inline float BFloat16BitsToFloat(uint16_t b) { return BitCast<float>(uint32_t{b} << 16); }

AMPC_HD inline uint16_t FloatToBFloat16Bits(float f) {
  const uint32_t x = BitCast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// ---- Storage type -> compute type (runtime/dtype.h's Compute<T>) ----

template <typename T>
struct Num {
  using type = T;
  AMPC_HD static T Load(T v) { return v; }
  AMPC_HD static T Store(T v) { return v; }
};
template <>
struct Num<F16> {
  using type = float;
  AMPC_HD static float Load(F16 v) { return HalfBitsToFloat(v.bits); }
  AMPC_HD static F16 Store(float v) { return F16{FloatToHalfBits(v)}; }
};
template <>
struct Num<BF16> {
  using type = float;
  AMPC_HD static float Load(BF16 v) { return BFloat16BitsToFloat(v.bits); }
  AMPC_HD static BF16 Store(float v) { return BF16{FloatToBFloat16Bits(v)}; }
};

template <typename T>
inline constexpr bool kIsFloat = std::is_same_v<T, float> || std::is_same_v<T, double>;
template <typename T>
inline constexpr bool kIsHalfLike = std::is_same_v<T, F16> || std::is_same_v<T, BF16>;
template <typename T>
inline constexpr bool kIsInteger = std::is_integral_v<T> && !std::is_same_v<T, bool>;

template <typename T>
AMPC_HD inline bool IsNan(T x) {
  return x != x;
}

}  // namespace ampc::cuda

#endif  // AMPC_KERNELS_CUDA_NUM_H_
