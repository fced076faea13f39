// CPU kernels of the ai.ampc loss-scaling stage and optimizers (docs/training-design.md, "The
// step"): CheckFinite, UpdateScale, UnscaleClip, SGD, Adam, and the runtime's fused forms of
// them (CheckUnscaleClip, MultiSGD, MultiAdam), and the runtime's LearningRate. Gradients may be
// FP32/FP16/BF16/FP64; everything after the unscale is FP32, with PyTorch's single-tensor optimizer
// arithmetic (its Python-double scalars computed in double and rounded to float, the tensor ops in
// FP32 in the order torch.optim does them): the formulas of kernels/numerics/scaler_math.h, which
// the CUDA kernels apply too. A skipped optimizer step returns its inputs themselves.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/elementwise_convert.h"
#include "kernels/cpu/optimizer_simd.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/scaler_ops.h"
#include "kernels/numerics/lr_schedule.h"
#include "kernels/numerics/scaler_math.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

using scaler_ops::ExpectParamShape;
namespace math = scaler_math;

// The single element of scalar input i (its dtype was checked at creation).
template <typename T>
absl::StatusOr<T> Scalar(const KernelContext& context, int i) {
  AMPC_RETURN_IF_ERROR(scaler_ops::ExpectScalar(context, i));
  return context.in(i).data<T>()[0];
}

template <typename T>
absl::Status NewScalar(KernelContext& context, int i, DType dtype, T value) {
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(i, {}, dtype));
  out->data<T>()[0] = value;
  return absl::OkStatus();
}

// ---- CheckFinite ----

bool AnyNonFinite(KernelContext& context, const Tensor& t) {
  std::atomic<bool> found{false};
  Dispatch<AMPC_FLOAT_TYPES>(t.dtype(), [&]<typename T>() {
    const T* x = t.data<T>();
    ParallelFor(context, t.size(), 1, [&](int64_t begin, int64_t end) {
      // Sub-blocks without an early exit inside, so that the test vectorises.
      for (int64_t i = begin; i < end && !found.load(std::memory_order_relaxed); i += 4096) {
        int any = 0;
        for (int64_t k = i; k < std::min(end, i + 4096); ++k) any |= math::NonFinite(x[k]);
        if (any != 0) found.store(true, std::memory_order_relaxed);
      }
    });
  });
  return found.load();
}

absl::Status CheckFinite(KernelContext& context) {
  bool found = false;
  for (int i = 0; i < context.num_inputs() && !found; ++i) {
    found = AnyNonFinite(context, context.in(i));
  }
  return NewScalar(context, 0, DType::kBool, found);
}

// ---- UpdateScale (docs/training-design.md, "The scale update rule") ----

math::ScaleAttrs ScaleAttrsOf(const Attributes& a) {
  math::ScaleAttrs attrs;
  attrs.dynamic = a.Int("dynamic", attrs.dynamic ? 1 : 0) != 0;
  attrs.hysteresis = a.Int("hysteresis", attrs.hysteresis);
  attrs.growth_interval = a.Int("growth_interval", attrs.growth_interval);
  attrs.growth_factor = a.Float("growth_factor", attrs.growth_factor);
  attrs.backoff_factor = a.Float("backoff_factor", attrs.backoff_factor);
  attrs.min_scale = a.Float("min_scale", attrs.min_scale);
  attrs.max_scale = a.Float("max_scale", attrs.max_scale);
  return attrs;
}

absl::Status UpdateScale(KernelContext& context) {
  math::ScaleState s;
  AMPC_ASSIGN_OR_RETURN(s.scale, Scalar<float>(context, 0));
  AMPC_ASSIGN_OR_RETURN(s.tracker, Scalar<int64_t>(context, 1));
  AMPC_ASSIGN_OR_RETURN(s.hysteresis_left, Scalar<int64_t>(context, 2));
  AMPC_ASSIGN_OR_RETURN(bool found, Scalar<bool>(context, 3));
  AMPC_ASSIGN_OR_RETURN(bool loss_bad, Scalar<bool>(context, 4));
  const math::ScaleAttrs attrs = ScaleAttrsOf(context.attributes());
  if (!attrs.dynamic || loss_bad) {  // math::UpdateScale's no-op, without copying the state
    for (int i = 0; i < 3; ++i) context.SetOutput(i, context.in(i));
    return absl::OkStatus();
  }
  s = math::NextScaleState(s, found, attrs);
  AMPC_RETURN_IF_ERROR(NewScalar(context, 0, DType::kFloat, s.scale));
  AMPC_RETURN_IF_ERROR(NewScalar(context, 1, DType::kInt64, s.tracker));
  return NewScalar(context, 2, DType::kInt64, s.hysteresis_left);
}

// ---- UnscaleClip ----

// u = float(g) * inv over block [begin, end) of g; returns the sum of u^2 in double, and sets
// *nonfinite when g holds an inf or NaN. FP32, FP16 and BF16 (widened into u first: the widened
// value is non-finite exactly when the stored one is) sum over optimizer_simd's 8 lanes; FP64 in
// order (its values may overflow the float they are unscaled to).
template <typename T>
double UnscaleBlock(const T* x, int64_t begin, int64_t end, float inv, float* u, bool* nonfinite) {
  if constexpr (std::is_same_v<T, double>) {
    double sum = 0.0;
    for (int64_t k = begin; k < end; ++k) {
      if (math::NonFinite(x[k])) *nonfinite = true;
      u[k] = math::Unscale(static_cast<float>(x[k]), inv);
      sum += math::Square(u[k]);
    }
    return sum;
  } else {
    const float* w = reinterpret_cast<const float*>(x + begin);
    if constexpr (!std::is_same_v<T, float>) {
      WidenToAcc(x + begin, end - begin, u + begin);
      w = u + begin;
    }
    return optimizer_simd::UnscaleSquares(w, end - begin, inv, u + begin, nonfinite);
  }
}

// u = float(g) * inv; returns the sum of u^2 in double, summed per fixed block and then over
// blocks in order, so the result does not depend on the thread count. *nonfinite: as above.
double Unscale(KernelContext& context, const Tensor& g, float inv, float* u, bool* nonfinite) {
  const int64_t n = g.size();
  const int64_t blocks = (n + kElementwiseGrain - 1) / kElementwiseGrain;
  std::vector<double> partial(static_cast<size_t>(blocks), 0.0);
  std::atomic<bool> found{false};
  Dispatch<AMPC_FLOAT_TYPES>(g.dtype(), [&]<typename T>() {
    const T* x = g.data<T>();
    ParallelFor(context, blocks, kElementwiseGrain, [&](int64_t b0, int64_t b1) {
      bool bad = false;
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t end = std::min(n, (b + 1) * kElementwiseGrain);
        partial[static_cast<size_t>(b)] = UnscaleBlock(x, b * kElementwiseGrain, end, inv, u, &bad);
      }
      if (bad) found.store(true, std::memory_order_relaxed);
    });
  });
  if (found.load()) *nonfinite = true;
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

// UnscaleClip on inputs 1.. (scale 0) into outputs `first` on, the norm after them; *nonfinite
// becomes true when a gradient holds an inf or NaN.
absl::Status UnscaleClipInto(KernelContext& context, int first, bool* nonfinite) {
  AMPC_ASSIGN_OR_RETURN(float scale, Scalar<float>(context, 0));
  const float inv = math::InverseScale(scale);
  const int n = context.num_inputs() - 1;
  std::vector<Tensor*> outputs;
  double sum_sq = 0.0;
  for (int i = 0; i < n; ++i) {
    const Tensor& g = context.in(i + 1);
    AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(first + i, g.shape(), DType::kFloat));
    sum_sq += Unscale(context, g, inv, out->data<float>(), nonfinite);
    outputs.push_back(out);
  }
  const float norm = math::NormOf(sum_sq);
  const float max_norm = context.attributes().Float("max_norm", 0.0f);
  if (max_norm > 0.0f) {  // otherwise the coefficient is 1 and multiplying changes nothing
    const float coef = math::ClipCoefficient(norm, max_norm);
    for (Tensor* out : outputs) {
      float* u = out->data<float>();
      ParallelFor(context, out->size(), 1, [&](int64_t begin, int64_t end) {
        for (int64_t k = begin; k < end; ++k) u[k] = math::Multiply(u[k], coef);
      });
    }
  }
  return NewScalar(context, first + n, DType::kFloat, norm);
}

absl::Status UnscaleClip(KernelContext& context) {
  bool nonfinite = false;
  return UnscaleClipInto(context, 0, &nonfinite);
}

// The runtime's CheckUnscaleClip (optimizer_fusion.h): CheckFinite's flag found in UnscaleClip's
// pass over the gradients, the two kernels' bits.
absl::Status CheckUnscaleClip(KernelContext& context) {
  bool found = false;
  AMPC_RETURN_IF_ERROR(UnscaleClipInto(context, 1, &found));
  return NewScalar(context, 0, DType::kBool, found);
}

// ---- Optimizers: FP32 parameters, gradients and moments ----

// One parameter's update: param, grad (and buf with momentum) are inputs `in` on, the new param
// (and buf) outputs `out` on.
absl::Status SgdTensor(KernelContext& context, const math::SgdScalars& s, bool skip, int in,
                       int out) {
  AMPC_RETURN_IF_ERROR(s.has_buf ? ExpectParamShape(context, {in + 1, in + 2}, in)
                                 : ExpectParamShape(context, {in + 1}, in));
  if (skip) {
    context.SetOutput(out, context.in(in));
    if (s.has_buf) context.SetOutput(out + 1, context.in(in + 2));
    return absl::OkStatus();
  }
  const Tensor& param = context.in(in);
  AMPC_ASSIGN_OR_RETURN(Tensor * param_out, context.Output(out, param.shape(), DType::kFloat));
  float* buf_out = nullptr;
  if (s.has_buf) {
    AMPC_ASSIGN_OR_RETURN(Tensor * t, context.Output(out + 1, param.shape(), DType::kFloat));
    buf_out = t->data<float>();
  }
  const float *p = param.data<float>(), *grad = context.in(in + 1).data<float>();
  const float* buf = s.has_buf ? context.in(in + 2).data<float>() : nullptr;
  float* p_out = param_out->data<float>();
  ParallelFor(context, param.size(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      float b = 0.0f;
      p_out[k] = math::SgdElement(s, p[k], grad[k], s.has_buf ? buf[k] : 0.0f, &b);
      if (s.has_buf) buf_out[k] = b;
    }
  });
  return absl::OkStatus();
}

// SGD (ai.ampc) with one parameter, and the runtime's MultiSGD (optimizer_fusion.h) with any
// number: inputs skip, lr, first, then param, grad (and buf with momentum) per parameter.
absl::Status Sgd(KernelContext& context) {
  AMPC_ASSIGN_OR_RETURN(bool skip, Scalar<bool>(context, 0));
  AMPC_ASSIGN_OR_RETURN(float lr, Scalar<float>(context, 1));
  AMPC_ASSIGN_OR_RETURN(bool first, Scalar<bool>(context, 2));
  const Attributes a = context.attributes();
  math::SgdAttrs attrs;
  attrs.momentum = a.Float("momentum", attrs.momentum);
  attrs.dampening = a.Float("dampening", attrs.dampening);
  attrs.weight_decay = a.Float("weight_decay", attrs.weight_decay);
  attrs.nesterov = a.Int("nesterov", attrs.nesterov ? 1 : 0) != 0;
  const math::SgdScalars s = math::SgdScalarsFor(attrs, lr, first);
  const int per_in = s.has_buf ? 3 : 2, per_out = s.has_buf ? 2 : 1;
  for (int in = 3, out = 0; in < context.num_inputs(); in += per_in, out += per_out) {
    AMPC_RETURN_IF_ERROR(SgdTensor(context, s, skip, in, out));
  }
  return absl::OkStatus();
}

math::AdamAttrs AdamAttrsOf(const Attributes& a) {
  math::AdamAttrs attrs;
  attrs.beta1 = a.Float("beta1", attrs.beta1);
  attrs.beta2 = a.Float("beta2", attrs.beta2);
  attrs.epsilon = a.Float("epsilon", attrs.epsilon);
  attrs.weight_decay = a.Float("weight_decay", attrs.weight_decay);
  attrs.decoupled = a.Int("decoupled", attrs.decoupled ? 1 : 0) != 0;
  return attrs;
}

// One parameter's update: param, grad, m, v are inputs `in` to in + 3, the new param, m, v
// outputs `out` to out + 2.
absl::Status AdamTensor(KernelContext& context, const math::AdamScalars& s, bool skip, int in,
                        int out) {
  AMPC_RETURN_IF_ERROR(scaler_ops::ExpectParamShape(context, {in + 1, in + 2, in + 3}, in));
  const Shape& shape = context.in(in).shape();
  if (skip) {
    for (int i = 0; i < 3; ++i) context.SetOutput(out + i, context.in(i == 0 ? in : in + i + 1));
    return absl::OkStatus();
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * p_t, context.Output(out, shape, DType::kFloat));
  AMPC_ASSIGN_OR_RETURN(Tensor * m_t, context.Output(out + 1, shape, DType::kFloat));
  AMPC_ASSIGN_OR_RETURN(Tensor * v_t, context.Output(out + 2, shape, DType::kFloat));
  const float *param = context.in(in).data<float>(), *grad = context.in(in + 1).data<float>();
  const float *m = context.in(in + 2).data<float>(), *v = context.in(in + 3).data<float>();
  float *p_out = p_t->data<float>(), *m_out = m_t->data<float>(), *v_out = v_t->data<float>();
  ParallelFor(context, p_t->size(), 1, [&](int64_t begin, int64_t end) {
    begin += optimizer_simd::AdamBlock(s, param + begin, grad + begin, m + begin, v + begin,
                                       p_out + begin, m_out + begin, v_out + begin, end - begin);
    for (int64_t k = begin; k < end; ++k) {
      const math::AdamElementResult r = math::AdamElement(s, param[k], grad[k], m[k], v[k]);
      p_out[k] = r.p;
      m_out[k] = r.m;
      v_out[k] = r.v;
    }
  });
  return absl::OkStatus();
}

// Adam (ai.ampc) with one parameter, and the runtime's MultiAdam (optimizer_fusion.h) with any
// number: inputs skip, lr, step, then param, grad, m, v per parameter.
absl::Status Adam(KernelContext& context) {
  AMPC_ASSIGN_OR_RETURN(bool skip, Scalar<bool>(context, 0));
  AMPC_ASSIGN_OR_RETURN(float lr, Scalar<float>(context, 1));
  AMPC_ASSIGN_OR_RETURN(int64_t step, Scalar<int64_t>(context, 2));
  if (step < 1) return NodeError(context, absl::StrCat("step is ", step, "; it counts from 1"));
  const math::AdamScalars s = math::AdamScalarsFor(AdamAttrsOf(context.attributes()), lr, step);
  for (int k = 0; 3 + 4 * k < context.num_inputs(); ++k) {
    AMPC_RETURN_IF_ERROR(AdamTensor(context, s, skip, 3 + 4 * k, 3 * k));
  }
  return absl::OkStatus();
}

// ---- LearningRate (runtime/learning_rate.h) ----

absl::Status LearningRate(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(scaler_ops::ExpectRateAndStep(context));
  return NewScalar(
      context, 0, DType::kFloat,
      DecodedLearningRate(context.in(0).data<double>(), context.in(1).data<int64_t>()[0]));
}

}  // namespace

void RegisterScalerKernels(KernelRegistry& registry) {
  scaler_ops::Register(
      registry, "cpu",
      {CheckFinite, UpdateScale, UnscaleClip, Sgd, Adam, CheckUnscaleClip, LearningRate});
}

}  // namespace ampc
