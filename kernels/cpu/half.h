// IEEE binary16 (FP16) and bfloat16 storage types and their exact conversions to and from float.
//
// These are the project's own conversions (DESIGN.md, numerics model): float -> 16 bit rounds to
// nearest, ties to even, overflows to infinity and keeps subnormals exact; 16 bit -> float is
// exact. NaNs keep their sign and payload: widening keeps all of it, narrowing keeps its leading
// bits and sets the quiet bit (so the result is never mistaken for infinity). CUDA's host
// functions instead return one canonical NaN; see tests/unit/half_test.cc.
#ifndef AMPC_KERNELS_CPU_HALF_H_
#define AMPC_KERNELS_CPU_HALF_H_

#include <bit>
#include <cstdint>
#include <span>
#include <type_traits>

namespace ampc {

struct Half {
  uint16_t bits;
};

struct BFloat16 {
  uint16_t bits;
};

static_assert(sizeof(Half) == 2 && std::is_trivial_v<Half>);
static_assert(sizeof(BFloat16) == 2 && std::is_trivial_v<BFloat16>);

inline float HalfToFloat(uint16_t h) {
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
    const uint32_t top = static_cast<uint32_t>(std::bit_width(mantissa)) - 1;
    bits = ((top + 103) << 23) | ((mantissa << (23 - top)) & 0x7fffffu);
  }
  return std::bit_cast<float>(sign | bits);
}

inline uint16_t FloatToHalf(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
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

inline float BFloat16ToFloat(uint16_t b) { return std::bit_cast<float>(uint32_t{b} << 16); }

inline uint16_t FloatToBFloat16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// Bulk conversions, bit for bit the scalar ones above (FP16 with F16C where the CPU has it);
// `out` must hold at least `in.size()` elements.
void HalfToFloat(std::span<const uint16_t> in, std::span<float> out);
void FloatToHalf(std::span<const float> in, std::span<uint16_t> out);
void BFloat16ToFloat(std::span<const uint16_t> in, std::span<float> out);
void FloatToBFloat16(std::span<const float> in, std::span<uint16_t> out);

// The same over arrays of the storage types.
inline std::span<const uint16_t> Bits(std::span<const Half> v) {
  return {reinterpret_cast<const uint16_t*>(v.data()), v.size()};
}
inline std::span<const uint16_t> Bits(std::span<const BFloat16> v) {
  return {reinterpret_cast<const uint16_t*>(v.data()), v.size()};
}
inline void HalfToFloat(std::span<const Half> in, std::span<float> out) {
  HalfToFloat(Bits(in), out);
}
inline void FloatToHalf(std::span<const float> in, std::span<Half> out) {
  FloatToHalf(in, std::span<uint16_t>(reinterpret_cast<uint16_t*>(out.data()), out.size()));
}
inline void BFloat16ToFloat(std::span<const BFloat16> in, std::span<float> out) {
  BFloat16ToFloat(Bits(in), out);
}
inline void FloatToBFloat16(std::span<const float> in, std::span<BFloat16> out) {
  FloatToBFloat16(in, std::span<uint16_t>(reinterpret_cast<uint16_t*>(out.data()), out.size()));
}

}  // namespace ampc

#endif  // AMPC_KERNELS_CPU_HALF_H_
