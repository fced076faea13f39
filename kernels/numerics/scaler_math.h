// Per-element arithmetic of the ai.ampc loss-scaling stage and optimizers: the one copy of the
// formulas the CPU kernels (kernels/cpu/scaler_kernels.cc) and the CUDA kernels (scaler.cu) both
// apply, operation for operation. Every float and double operation is rounded.h's, a rounded
// intrinsic on the device, so that nvcc cannot contract a multiply and an add into an FMA (one
// rounding instead of two would break bit-for-bit agreement between the backends). Plain C++17:
// includable by g++ and nvcc alike.
#ifndef AMPC_KERNELS_NUMERICS_SCALER_MATH_H_
#define AMPC_KERNELS_NUMERICS_SCALER_MATH_H_

#include <math.h>

#include <cfloat>
#include <cstdint>

#include "kernels/numerics/float16.h"
#include "kernels/numerics/host_device.h"
#include "kernels/numerics/rounded.h"

namespace ampc::scaler_math {

// ---- rounded arithmetic (rounded.h's and these) ----

using rounded::Add;
using rounded::Divide;
using rounded::Multiply;
using rounded::Subtract;

AMPC_HD inline float Sqrt(float a) {
#ifdef __CUDA_ARCH__
  return __fsqrt_rn(a);
#else
  return sqrtf(a);
#endif
}

AMPC_HD inline double DSqrt(double a) {
#ifdef __CUDA_ARCH__
  return __dsqrt_rn(a);
#else
  return sqrt(a);
#endif
}

// CUDA's pow is within 2 ulp in double, glibc's is correctly rounded: the float the result is
// rounded to agrees except when the double lies within 2 ulp of a float rounding boundary.
AMPC_HD inline double DPow(double a, double b) { return pow(a, b); }

AMPC_HD inline float ToFloat(double a) {
#ifdef __CUDA_ARCH__
  return __double2float_rn(a);
#else
  return static_cast<float>(a);
#endif
}

// std::min / std::max exactly (the first argument wins ties and NaN comparisons).
AMPC_HD inline float Min(float a, float b) { return b < a ? b : a; }
AMPC_HD inline float Max(float a, float b) { return a < b ? b : a; }

// ---- storage types: non-finite tests on the bits (widening: float16.h) ----

// An all-ones exponent is inf or NaN, for each storage type.
AMPC_HD inline bool NonFinite(float x) {
  return (BitCast<uint32_t>(x) & 0x7f800000u) == 0x7f800000u;
}
AMPC_HD inline bool NonFinite(double x) {
  return (BitCast<uint64_t>(x) & 0x7ff0000000000000ull) == 0x7ff0000000000000ull;
}
AMPC_HD inline bool NonFinite(Half x) { return (x.bits & 0x7c00u) == 0x7c00u; }
AMPC_HD inline bool NonFinite(BFloat16 x) { return (x.bits & 0x7f80u) == 0x7f80u; }

// ---- CheckFinite / UnscaleClip ----

// GradScaler: inv_scale = scale.double().reciprocal().float().
AMPC_HD inline float InverseScale(float scale) {
  return ToFloat(Divide(1.0, static_cast<double>(scale)));
}

// u = float(g) * inv; its square is exact in double (24 + 24 significant bits).
AMPC_HD inline float Unscale(float widened, float inv) { return Multiply(widened, inv); }
AMPC_HD inline double Square(float u) {
  return Multiply(static_cast<double>(u), static_cast<double>(u));
}

AMPC_HD inline float NormOf(double sum_of_squares) { return ToFloat(DSqrt(sum_of_squares)); }

// torch.nn.utils.clip_grad_norm_: the coefficient every unscaled gradient is multiplied by (even
// when it is 1); max_norm <= 0 means no clipping, coefficient 1.
AMPC_HD inline float ClipCoefficient(float norm, float max_norm) {
  if (!(max_norm > 0.0f)) return 1.0f;
  const float ratio = Divide(max_norm, Add(norm, 1e-6f));
  return ratio != ratio ? ratio : Min(1.0f, ratio);  // a NaN norm gives NaN, as torch's clamp
}

// ---- UpdateScale (docs/training-design.md, "The scale update rule") ----

// The node's attributes, each with its default.
struct ScaleAttrs {
  bool dynamic = true;
  int64_t hysteresis = 1;
  int64_t growth_interval = 2000;
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  float min_scale = 0.0f;
  float max_scale = 0.0f;  // <= 0: none
};

struct ScaleState {
  float scale;
  int64_t tracker;
  int64_t hysteresis_left;
};

AMPC_HD inline ScaleState NextScaleState(ScaleState s, bool found, const ScaleAttrs& a) {
  if (found) {
    s.tracker = 0;
    if (--s.hysteresis_left <= 0) {
      const float floor = Max(a.min_scale, FLT_MIN);  // never below the smallest normal
      s.scale = Max(Multiply(s.scale, a.backoff_factor), floor);
      s.hysteresis_left = a.hysteresis;
    }
    return s;
  }
  s.hysteresis_left = a.hysteresis;
  if (++s.tracker >= a.growth_interval) {
    const float grown = Multiply(s.scale, a.growth_factor);
    if (!NonFinite(grown) && (a.max_scale <= 0.0f || grown <= a.max_scale)) s.scale = grown;
    s.tracker = 0;
  }
  return s;
}

// The whole node: a static scale, or a non-finite forward loss, leaves the state unchanged.
AMPC_HD inline ScaleState UpdateScale(ScaleState s, bool found, bool loss_bad,
                                      const ScaleAttrs& a) {
  if (!a.dynamic || loss_bad) return s;
  return NextScaleState(s, found, a);
}

// ---- SGD: torch.optim.SGD, _single_tensor_sgd (maximize=False) ----

struct SgdAttrs {
  float momentum = 0.0f;
  float dampening = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};

struct SgdScalars {
  float momentum, wd, keep, neg_lr;
  bool nesterov, has_buf, first;
};

AMPC_HD inline SgdScalars SgdScalarsFor(const SgdAttrs& a, float lr, bool first) {
  SgdScalars s;
  s.momentum = a.momentum;
  s.wd = a.weight_decay;
  s.keep = ToFloat(Subtract(1.0, static_cast<double>(a.dampening)));
  s.neg_lr = -lr;
  s.nesterov = a.nesterov;
  s.has_buf = a.momentum != 0.0f;
  s.first = first;
  return s;
}

// One element: returns the new parameter; with a momentum buffer, *buf_out is its new value.
AMPC_HD inline float SgdElement(const SgdScalars& s, float p, float g, float buf, float* buf_out) {
  if (s.wd != 0.0f) g = Add(g, Multiply(s.wd, p));  // grad.add(param, alpha=weight_decay)
  if (s.has_buf) {
    // buf = clone(grad) on the first step, else buf.mul_(momentum).add_(grad, alpha=1-dampening)
    const float b = s.first ? g : Add(Multiply(buf, s.momentum), Multiply(s.keep, g));
    *buf_out = b;
    g = s.nesterov ? Add(g, Multiply(s.momentum, b)) : b;
  }
  return Add(p, Multiply(s.neg_lr, g));  // param.add_(grad, alpha=-lr)
}

// ---- Adam / AdamW: torch.optim.Adam(W), _single_tensor_adam (amsgrad=False) ----

struct AdamAttrs {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  float weight_decay = 0.0f;
  bool decoupled = false;  // AdamW
};

// The Python-float scalars, computed in double and rounded to float where they meet the FP32
// tensors.
struct AdamScalars {
  float beta2, eps, wd, w1, w2, decay, neg_step_size, bc2_sqrt;
  bool decoupled, small_w1;
};

AMPC_HD inline AdamScalars AdamScalarsFor(const AdamAttrs& a, float lr, int64_t step) {
  const double b1 = a.beta1, b2 = a.beta2, wd = a.weight_decay;
  AdamScalars s;
  s.beta2 = ToFloat(b2);
  s.eps = a.epsilon;
  s.wd = ToFloat(wd);
  s.w1 = ToFloat(Subtract(1.0, b1));
  s.w2 = ToFloat(Subtract(1.0, b2));
  s.decay = ToFloat(Subtract(1.0, Multiply(static_cast<double>(lr), wd)));
  const double bc1 = Subtract(1.0, DPow(b1, static_cast<double>(step)));
  const double bc2 = Subtract(1.0, DPow(b2, static_cast<double>(step)));
  s.neg_step_size = ToFloat(-Divide(static_cast<double>(lr), bc1));
  s.bc2_sqrt = ToFloat(DSqrt(bc2));
  s.decoupled = a.decoupled;
  s.small_w1 = (s.w1 < 0.0f ? -s.w1 : s.w1) < 0.5f;  // ATen's lerp picks its formula by the weight
  return s;
}

struct AdamElementResult {
  float p, m, v;
};

AMPC_HD inline AdamElementResult AdamElement(const AdamScalars& s, float p, float g, float m,
                                             float v) {
  if (s.wd != 0.0f) {
    if (s.decoupled) {
      p = Multiply(p, s.decay);  // param.mul_(1 - lr * weight_decay)
    } else {
      g = Add(g, Multiply(s.wd, p));  // grad.add(param, alpha=weight_decay)
    }
  }
  AdamElementResult r;
  const float diff = Subtract(g, m);  // exp_avg.lerp_(grad, 1 - beta1)
  r.m =
      s.small_w1 ? Add(m, Multiply(s.w1, diff)) : Subtract(g, Multiply(diff, Subtract(1.0f, s.w1)));
  r.v = Add(Multiply(v, s.beta2),
            Multiply(Multiply(s.w2, g), g));  // mul_(beta2).addcmul_(grad, grad, 1-beta2)
  const float denom = Add(Divide(Sqrt(r.v), s.bc2_sqrt), s.eps);
  r.p = Add(p, Divide(Multiply(s.neg_step_size, r.m), denom));  // addcdiv_(m, denom, -step_size)
  return r;
}

}  // namespace ampc::scaler_math

#endif  // AMPC_KERNELS_NUMERICS_SCALER_MATH_H_
