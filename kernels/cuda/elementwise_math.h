// Per-element math of the CUDA elementwise kernels, as __host__ __device__ code so that host tests
// check it against the CPU kernels. Each op is written to give the CPU backend's result bit for
// bit (kernels/cpu/elementwise_kernels.cc, math_kernels.cc): FP16/BF16 load exactly to float,
// compute there and round once to nearest even (num.h). Exceptions, by design:
// - Exp, Log, Tanh, Erf, Sigmoid and Pow on float evaluate in double and round to float, which is
//   nearly always the correctly rounded result; glibc's float functions are not always (tanhf
//   errs by over 1.5 ulp, expf rounds some near-ties the wrong way), so results may differ from
//   the CPU backend's by up to 2 ulp in rare cases (Sigmoid inherits Exp's). FP64 results may
//   differ from glibc by an ulp (CUDA's double functions are accurate to 1-2 ulp).
// - A NaN produced by arithmetic is the hardware's NaN (sign and payload may differ from x86's).
// Plain C++17 without CUDA headers.
#ifndef AMPC_KERNELS_CUDA_ELEMENTWISE_MATH_H_
#define AMPC_KERNELS_CUDA_ELEMENTWISE_MATH_H_

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/numerics/integer_pow.h"
#include "kernels/numerics/num.h"

namespace ampc::cuda {

// Integer arithmetic wraps, as numpy's does: computed in an unsigned type at least as wide as
// `unsigned` (the CPU kernels' Wrapping).
template <typename C>
using WrapType =
    std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, std::make_unsigned_t<C>>;

// ---- Binary ops: compute type(s) in, compute type or bool out ----

struct AddOp {
  template <typename C>
  AMPC_HD C operator()(C a, C b) const {
    if constexpr (kIsInteger<C>) {
      return static_cast<C>(static_cast<WrapType<C>>(a) + static_cast<WrapType<C>>(b));
    } else {
      return Add(a, b);
    }
  }
};
struct SubOp {
  template <typename C>
  AMPC_HD C operator()(C a, C b) const {
    if constexpr (kIsInteger<C>) {
      return static_cast<C>(static_cast<WrapType<C>>(a) - static_cast<WrapType<C>>(b));
    } else {
      return Subtract(a, b);
    }
  }
};
struct MulOp {
  template <typename C>
  AMPC_HD C operator()(C a, C b) const {
    if constexpr (kIsInteger<C>) {
      return static_cast<C>(static_cast<WrapType<C>>(a) * static_cast<WrapType<C>>(b));
    } else {
      return Multiply(a, b);
    }
  }
};
// Integer division truncates; x / 0 is 0 (undefined in ONNX), lowest / -1 wraps to lowest.
struct DivOp {
  template <typename C>
  AMPC_HD C operator()(C a, C b) const {
    if constexpr (kIsInteger<C>) {
      if (b == 0) return C{0};
      if constexpr (std::is_signed_v<C>) {
        if (b == C{-1}) return static_cast<C>(WrapType<C>{0} - static_cast<WrapType<C>>(a));
      }
      return static_cast<C>(a / b);
    } else {
      return Divide(a, b);
    }
  }
};
// NaN propagates (numpy.maximum); otherwise std::max's choice, so max(+0, -0) is the first.
struct MaxOp {
  template <typename C>
  AMPC_HD C operator()(C a, C b) const {
    if constexpr (kIsFloat<C>) {
      if (IsNan(a) || IsNan(b)) return IsNan(a) ? a : b;
    }
    return a < b ? b : a;
  }
};
struct MinOp {
  template <typename C>
  AMPC_HD C operator()(C a, C b) const {
    if constexpr (kIsFloat<C>) {
      if (IsNan(a) || IsNan(b)) return IsNan(a) ? a : b;
    }
    return b < a ? b : a;
  }
};
AMPC_HD inline float Remainder(float a, float b) { return ::fmodf(a, b); }
AMPC_HD inline double Remainder(double a, double b) { return ::fmod(a, b); }
// Mod with fmod=0 (the remainder takes the divisor's sign) or fmod=1 (the dividend's, C's).
template <bool kFmod>
struct ModOp {
  template <typename C>
  AMPC_HD C operator()(C a, C b) const {
    C r;
    if constexpr (kIsFloat<C>) {
      r = Remainder(a, b);
    } else {
      if (b == 0) return C{0};
      if constexpr (std::is_signed_v<C>) {
        if (b == C{-1}) return C{0};
      }
      r = static_cast<C>(a % b);
    }
    if constexpr (!kFmod && (std::is_signed_v<C> || kIsFloat<C>)) {
      if (r != C{0} && ((r < C{0}) != (b < C{0}))) {
        if constexpr (kIsFloat<C>) {
          r = Add(r, b);
        } else {
          r = static_cast<C>(r + b);
        }
      }
    }
    return r;
  }
};

AMPC_HD inline bool IsSignalingNan(float x) {
  const uint32_t bits = BitCast<uint32_t>(x);
  return (bits & 0x7fc00000u) == 0x7f800000u && (bits & 0x003fffffu) != 0;
}
AMPC_HD inline bool IsSignalingNan(double x) {
  const uint64_t bits = BitCast<uint64_t>(x);
  return (bits & 0x7ff8000000000000u) == 0x7ff0000000000000u && (bits & 0x0007ffffffffffffu) != 0;
}

// glibc's pow gives NaN for a signalling NaN operand even where C asks for 1 (pow(1, y),
// pow(x, 0)); CUDA's gives 1. Float pow evaluates in double, rounded once (as glibc's powf).
AMPC_HD inline float Power(float a, float b) {
  if (IsSignalingNan(a) || IsSignalingNan(b)) return Add(a, b);
  return static_cast<float>(::pow(static_cast<double>(a), static_cast<double>(b)));
}
AMPC_HD inline double Power(double a, double b) {
  if (IsSignalingNan(a) || IsSignalingNan(b)) return Add(a, b);
  return ::pow(a, b);
}

// Pow's exponent may have another type than its base (compute type CE).
struct PowOp {
  template <typename C, typename CE>
  AMPC_HD C operator()(C a, CE b) const {
    if constexpr (kIsInteger<C>) {
      return integer_pow::Pow(a, b);
    } else {
      // Squares and cubes as products, as the CPU kernel (elementwise_kernels.cc) computes them.
      if (b == CE{2}) return a * a;
      if (b == CE{3}) return a * a * a;
      return Power(a, static_cast<C>(b));
    }
  }
};

struct EqualOp {
  template <typename C>
  AMPC_HD bool operator()(C a, C b) const {
    return a == b;
  }
};
struct LessOp {
  template <typename C>
  AMPC_HD bool operator()(C a, C b) const {
    return a < b;
  }
};
struct LessOrEqualOp {
  template <typename C>
  AMPC_HD bool operator()(C a, C b) const {
    return a <= b;
  }
};
struct GreaterOp {
  template <typename C>
  AMPC_HD bool operator()(C a, C b) const {
    return a > b;
  }
};
struct GreaterOrEqualOp {
  template <typename C>
  AMPC_HD bool operator()(C a, C b) const {
    return a >= b;
  }
};
struct AndOp {
  AMPC_HD bool operator()(bool a, bool b) const { return a && b; }
};
struct OrOp {
  AMPC_HD bool operator()(bool a, bool b) const { return a || b; }
};
struct XorOp {
  AMPC_HD bool operator()(bool a, bool b) const { return a != b; }
};

// ---- Unary ops ----

// Neg, Abs, Relu, Sign: floats and integers; integer negation wraps (lowest stays lowest).
template <typename C>
AMPC_HD inline C Negate(C x) {
  if constexpr (kIsInteger<C>) {
    return static_cast<C>(WrapType<C>{0} - static_cast<WrapType<C>>(x));
  } else {
    return -x;
  }
}
struct NegOp {
  template <typename C>
  AMPC_HD C operator()(C x) const {
    return Negate(x);
  }
};
// x < 0 ? -x : x, as the CPU: Abs(-0.0) is -0.0 and a negative NaN keeps its sign.
struct AbsOp {
  template <typename C>
  AMPC_HD C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>) {
      return x;
    } else {
      return x < C{0} ? Negate(x) : x;
    }
  }
};
struct ReluOp {
  template <typename C>
  AMPC_HD C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>) {
      return x;
    } else {
      return x < C{0} ? C{0} : x;
    }
  }
};
struct SignOp {
  template <typename C>
  AMPC_HD C operator()(C x) const {
    if constexpr (kIsFloat<C>) {
      if (IsNan(x)) return x;
    }
    if constexpr (std::is_unsigned_v<C>) {
      return x > C{0} ? C{1} : C{0};
    } else {
      return x > C{0} ? C{1} : (x < C{0} ? static_cast<C>(-1) : C{0});
    }
  }
};

// Float-only math: float and double overloads.
struct SqrtOp {
  AMPC_HD float operator()(float x) const {
#ifdef __CUDA_ARCH__
    return __fsqrt_rn(x);
#else
    return ::sqrtf(x);
#endif
  }
  AMPC_HD double operator()(double x) const {
#ifdef __CUDA_ARCH__
    return __dsqrt_rn(x);
#else
    return ::sqrt(x);
#endif
  }
};
struct ReciprocalOp {
  template <typename C>
  AMPC_HD C operator()(C x) const {
    return Divide(C{1}, x);
  }
};
AMPC_HD inline float Exp(float x) { return static_cast<float>(::exp(static_cast<double>(x))); }
AMPC_HD inline double Exp(double x) { return ::exp(x); }
struct ExpOp {
  template <typename C>
  AMPC_HD C operator()(C x) const {
    return Exp(x);
  }
};
struct LogOp {
  AMPC_HD float operator()(float x) const {
    return static_cast<float>(::log(static_cast<double>(x)));
  }
  AMPC_HD double operator()(double x) const { return ::log(x); }
};
struct TanhOp {
  AMPC_HD float operator()(float x) const {
    return static_cast<float>(::tanh(static_cast<double>(x)));
  }
  AMPC_HD double operator()(double x) const { return ::tanh(x); }
};
struct ErfOp {
  AMPC_HD float operator()(float x) const {
    return static_cast<float>(::erf(static_cast<double>(x)));
  }
  AMPC_HD double operator()(double x) const { return ::erf(x); }
};
// 1 / (1 + exp(-x)), each step rounded to C as the CPU kernel does.
struct SigmoidOp {
  template <typename C>
  AMPC_HD C operator()(C x) const {
    return Divide(C{1}, Add(C{1}, Exp(-x)));
  }
};
struct FloorOp {
  AMPC_HD float operator()(float x) const { return ::floorf(x); }
  AMPC_HD double operator()(double x) const { return ::floor(x); }
};
struct CeilOp {
  AMPC_HD float operator()(float x) const { return ::ceilf(x); }
  AMPC_HD double operator()(double x) const { return ::ceil(x); }
};
// std::nearbyint in the default rounding mode: ties to even.
struct RoundOp {
  AMPC_HD float operator()(float x) const { return ::rintf(x); }
  AMPC_HD double operator()(double x) const { return ::rint(x); }
};
struct NotOp {
  AMPC_HD bool operator()(bool x) const { return !x; }
};
struct IsNanOp {
  template <typename C>
  AMPC_HD bool operator()(C x) const {
    return IsNan(x);
  }
};
AMPC_HD inline float Infinity(float) { return BitCast<float>(0x7f800000u); }
AMPC_HD inline double Infinity(double) { return BitCast<double>(uint64_t{0x7ff0000000000000u}); }
struct IsInfOp {
  bool detect_positive = true;
  bool detect_negative = true;
  template <typename C>
  AMPC_HD bool operator()(C x) const {
    const C inf = Infinity(C{});
    return (x == inf && detect_positive) || (x == -inf && detect_negative);
  }
};

}  // namespace ampc::cuda

#endif  // AMPC_KERNELS_CUDA_ELEMENTWISE_MATH_H_
