// Low-bit element types of ONNX (FP8 E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ; E8M0; FP4 E2M1; INT4,
// UINT4, INT2, UINT2) as codes in the low bits of a byte, and their conversions to and from float.
//
// Decoding is exact. Encoding a float rounds to nearest, ties to even (E8M0: the round mode
// asked for), with the Cast spec's rules for overflow, infinity and NaN; a wider source rounded
// to float *to odd* first (cast_math.h) keeps the result a single rounding. The rules are the
// onnx package's reference ones (ml_dtypes, numpy_helper.to_float8e8m0).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "runtime/core/dtype.h"

namespace ampc {

// A minifloat: sign, `exponent_bits`, `mantissa_bits`; how it spells NaN and infinity.
struct MiniFloat {
  enum class Specials {
    kIeee,    // E5M2: all-ones exponent is infinity (mantissa 0) or NaN
    kFn,      // E4M3FN: only S.1111.111 is NaN; no infinity
    kFnuz,    // *FNUZ: only 0x80 (negative zero) is NaN; no infinity, no negative zero
    kFinite,  // E2M1: no NaN, no infinity
  };
  int exponent_bits;
  int mantissa_bits;
  int bias;
  Specials specials;
  uint8_t max_code;  // the largest finite magnitude
};

inline constexpr MiniFloat kE4M3Fn{4, 3, 7, MiniFloat::Specials::kFn, 0x7e};
inline constexpr MiniFloat kE4M3Fnuz{4, 3, 8, MiniFloat::Specials::kFnuz, 0x7f};
inline constexpr MiniFloat kE5M2{5, 2, 15, MiniFloat::Specials::kIeee, 0x7b};
inline constexpr MiniFloat kE5M2Fnuz{5, 2, 16, MiniFloat::Specials::kFnuz, 0x7f};
inline constexpr MiniFloat kE2M1{2, 1, 1, MiniFloat::Specials::kFinite, 0x7};

inline uint8_t SignBit(const MiniFloat& f) {
  return static_cast<uint8_t>(1u << (f.exponent_bits + f.mantissa_bits));
}

inline bool IsMiniFloatNaN(const MiniFloat& f, uint8_t code) {
  const uint8_t magnitude = code & (SignBit(f) - 1);
  switch (f.specials) {
    case MiniFloat::Specials::kIeee:
      return magnitude > (SignBit(f) - (1u << f.mantissa_bits));
    case MiniFloat::Specials::kFn:
      return magnitude == SignBit(f) - 1;
    case MiniFloat::Specials::kFnuz:
      return code == SignBit(f);
    case MiniFloat::Specials::kFinite:
      return false;
  }
  return false;
}

inline float MiniFloatToFloat(const MiniFloat& f, uint8_t code) {
  if (IsMiniFloatNaN(f, code)) return std::numeric_limits<float>::quiet_NaN();
  const uint8_t magnitude = code & (SignBit(f) - 1);
  const int exponent = magnitude >> f.mantissa_bits;
  const int mantissa = magnitude & ((1 << f.mantissa_bits) - 1);
  float value;
  if (f.specials == MiniFloat::Specials::kIeee && exponent == (1 << f.exponent_bits) - 1) {
    value = std::numeric_limits<float>::infinity();
  } else if (exponent == 0) {
    value = std::ldexp(static_cast<float>(mantissa), 1 - f.bias - f.mantissa_bits);
  } else {
    value = std::ldexp(static_cast<float>(mantissa + (1 << f.mantissa_bits)),
                       exponent - f.bias - f.mantissa_bits);
  }
  return (code & SignBit(f)) != 0 ? -value : value;
}

// The code of the NaN or infinity an overflow or a non-finite input becomes without saturation.
inline uint8_t MiniFloatSpecial(const MiniFloat& f, bool negative, bool nan) {
  const uint8_t sign = negative ? SignBit(f) : 0;
  switch (f.specials) {
    case MiniFloat::Specials::kIeee:  // quiet NaN S.11111.10, infinity S.11111.00
      return sign | static_cast<uint8_t>(f.max_code + (nan ? 3 : 1));
    case MiniFloat::Specials::kFn:
      return sign | static_cast<uint8_t>(SignBit(f) - 1);
    case MiniFloat::Specials::kFnuz:
      return SignBit(f);
    case MiniFloat::Specials::kFinite:  // ml_dtypes: NaN gives zero (of the other sign)
      return nan ? (negative ? 0 : SignBit(f)) : sign | f.max_code;
  }
  return 0;
}

// The magnitude's code, rounded to nearest even; may exceed max_code (an overflow).
inline uint32_t RoundToMiniFloat(const MiniFloat& f, float magnitude) {
  if (magnitude == 0) return 0;
  int exponent;
  std::frexp(magnitude, &exponent);     // magnitude = m * 2^exponent, m in [0.5, 1)
  const int min_exponent = 1 - f.bias;  // of the smallest normal
  const int e = std::max(exponent - 1, min_exponent);
  // Scaling by a power of two is exact; nearbyint rounds ties to even.
  const float q = std::nearbyint(std::ldexp(magnitude, f.mantissa_bits - e));
  if (q >= std::ldexp(1.0f, 16)) return 0xffff;  // far beyond any finite code
  const uint32_t steps = static_cast<uint32_t>(q);
  if (e == min_exponent) return steps;  // subnormal steps run on into the first binade
  return (static_cast<uint32_t>(e + f.bias) << f.mantissa_bits) + steps - (1u << f.mantissa_bits);
}

// float -> minifloat code. `saturate`: overflows and infinities become the largest finite value
// (FP4 always saturates, as it has no infinity or NaN to give).
inline uint8_t FloatToMiniFloat(const MiniFloat& f, float v, bool saturate) {
  const bool negative = std::signbit(v);
  if (std::isnan(v)) return MiniFloatSpecial(f, negative, true);
  const bool clamp = saturate || f.specials == MiniFloat::Specials::kFinite;
  uint32_t code = std::isinf(v) ? 0xffffu : RoundToMiniFloat(f, std::fabs(v));
  if (code > f.max_code) {
    if (!clamp) return MiniFloatSpecial(f, negative, false);
    code = f.max_code;
  }
  if (code == 0 && f.specials == MiniFloat::Specials::kFnuz) return 0;  // no negative zero
  return static_cast<uint8_t>(code | (negative ? SignBit(f) : 0u));
}

// ---- E8M0: an exponent only, 2^(code - 127); 0xff is NaN ----

enum class RoundMode { kUp, kDown, kNearest };

inline float E8M0ToFloat(uint8_t code) {
  if (code == 0xff) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(code) - 127);
}

// The float's exponent field, rounded by its mantissa as `mode` says (the sign is ignored, as
// the spec leaves negative inputs undefined); NaN and infinity give 0xff. `saturate` keeps a
// round-up from 0xfe from reaching 0xff.
inline uint8_t FloatToE8M0(float v, bool saturate, RoundMode mode) {
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  const uint32_t exponent = (bits >> 23) & 0xffu;
  if (exponent == 0xff) return 0xff;
  bool up = false;
  if (mode == RoundMode::kUp) {
    up = (bits & 0x7fffffu) != 0;
  } else if (mode == RoundMode::kNearest) {
    // Guard bit 22 with (round bit 21, sticky bits below it, or a nonzero exponent): the
    // reference's rule, numpy_helper.to_float8e8m0.
    up = (bits & 0x400000u) != 0 &&
         ((bits & 0x200000u) != 0 || (bits & 0x1fffffu) != 0 || exponent > 0);
  }
  if (up && saturate && exponent == 0xfe) up = false;
  return static_cast<uint8_t>(exponent + (up ? 1 : 0));
}

// ---- INT4, UINT4, INT2, UINT2 ----

inline int64_t SmallIntMin(int bits, bool is_signed) {
  return is_signed ? -(int64_t{1} << (bits - 1)) : 0;
}
inline int64_t SmallIntMax(int bits, bool is_signed) {
  return (int64_t{1} << (is_signed ? bits - 1 : bits)) - 1;
}

inline int64_t SmallIntValue(uint8_t code, int bits, bool is_signed) {
  const int64_t value = code & ((1 << bits) - 1);
  return is_signed && value >= (int64_t{1} << (bits - 1)) ? value - (int64_t{1} << bits) : value;
}

// An integer's low `bits` (narrowing wraps, as for the wider integer types).
inline uint8_t IntegerToSmallInt(int64_t v, int bits) {
  return static_cast<uint8_t>(static_cast<uint64_t>(v) & ((1u << bits) - 1));
}

// float -> code by truncation; NaN, infinities and values whose truncation is out of range
// give 0 (ml_dtypes' conversion, which the onnx package's expected outputs come from).
inline uint8_t FloatToSmallInt(float v, int bits, bool is_signed) {
  if (!std::isfinite(v)) return 0;
  const float t = std::trunc(v);
  if (t < static_cast<float>(SmallIntMin(bits, is_signed)) ||
      t > static_cast<float>(SmallIntMax(bits, is_signed))) {
    return 0;
  }
  return IntegerToSmallInt(static_cast<int64_t>(t), bits);
}

// ---- By DType ----

// The minifloat format of an FP8 or FP4 type; nullptr for the others.
inline const MiniFloat* MiniFloatOf(DType dtype) {
  switch (dtype) {
    case DType::kFloat8E4M3FN:
      return &kE4M3Fn;
    case DType::kFloat8E4M3FNUZ:
      return &kE4M3Fnuz;
    case DType::kFloat8E5M2:
      return &kE5M2;
    case DType::kFloat8E5M2FNUZ:
      return &kE5M2Fnuz;
    case DType::kFloat4E2M1:
      return &kE2M1;
    default:
      return nullptr;
  }
}

inline bool IsSmallInt(DType dtype) {
  return dtype == DType::kInt4 || dtype == DType::kUint4 || dtype == DType::kInt2 ||
         dtype == DType::kUint2;
}
inline bool IsSignedSmallInt(DType dtype) { return dtype == DType::kInt4 || dtype == DType::kInt2; }

// A low-bit code's value (exact).
inline float LowBitToFloat(DType dtype, uint8_t code) {
  if (const MiniFloat* f = MiniFloatOf(dtype)) return MiniFloatToFloat(*f, code);
  if (dtype == DType::kFloat8E8M0) return E8M0ToFloat(code);
  return static_cast<float>(SmallIntValue(code, DTypeBits(dtype), IsSignedSmallInt(dtype)));
}

// What Cast-19+'s 'saturate' and Cast-25+'s 'round_mode' say.
struct LowBitRounding {
  bool saturate = true;
  RoundMode round_mode = RoundMode::kUp;
};

// float -> a low-bit code.
inline uint8_t FloatToLowBit(DType dtype, float v, const LowBitRounding& rounding) {
  if (const MiniFloat* f = MiniFloatOf(dtype)) return FloatToMiniFloat(*f, v, rounding.saturate);
  if (dtype == DType::kFloat8E8M0) return FloatToE8M0(v, rounding.saturate, rounding.round_mode);
  return FloatToSmallInt(v, DTypeBits(dtype), IsSignedSmallInt(dtype));
}

}  // namespace ampc
