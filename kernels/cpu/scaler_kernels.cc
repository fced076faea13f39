// CPU kernels of the ai.ampc loss-scaling stage and optimizers (docs/training-design.md, "The
// step"): CheckFinite, UpdateScale, UnscaleClip, SGD, Adam, and the runtime's fused forms of
// them (CheckUnscaleClip, MultiSGD, MultiAdam), and the runtime's LearningRate. Gradients may be
// FP32/FP16/BF16/FP64; everything after the unscale is FP32, with PyTorch's single-tensor optimizer
// arithmetic (its Python-double scalars computed in double and rounded to float, the tensor ops in
// FP32 in the order torch.optim does them). A skipped optimizer step returns its inputs themselves.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/scaler_ops.h"
#include "runtime/lr_schedule.h"
#include "runtime/status_macros.h"

namespace ampc {
namespace {

using scaler_ops::ExpectParamShape;

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

void ParallelFor(KernelContext& context, int64_t n,
                 const std::function<void(int64_t, int64_t)>& fn) {
  CpuOf(context.backend()).pool().ParallelFor(n, kElementwiseGrain, fn);
}

// ---- CheckFinite ----

// An all-ones exponent is inf or NaN, for each storage type.
bool NonFinite(float x) { return !std::isfinite(x); }
bool NonFinite(double x) { return !std::isfinite(x); }
bool NonFinite(Half x) { return (x.bits & 0x7C00) == 0x7C00; }
bool NonFinite(BFloat16 x) { return (x.bits & 0x7F80) == 0x7F80; }

bool AnyNonFinite(KernelContext& context, const Tensor& t) {
  std::atomic<bool> found{false};
  Dispatch<AMPC_FLOAT_TYPES>(t.dtype(), [&]<typename T>() {
    const T* x = t.data<T>();
    ParallelFor(context, t.size(), [&](int64_t begin, int64_t end) {
      bool any = false;
      for (int64_t i = begin; i < end && !any; ++i) any = NonFinite(x[i]);
      if (any) found.store(true, std::memory_order_relaxed);
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

struct ScaleState {
  float scale;
  int64_t tracker;
  int64_t hysteresis_left;
};

ScaleState NextScaleState(ScaleState s, bool found, const Attributes& a) {
  const int64_t hysteresis = a.Int("hysteresis", 1);
  if (found) {
    s.tracker = 0;
    if (--s.hysteresis_left <= 0) {
      const float floor = std::max(a.Float("min_scale", 0.0f), std::numeric_limits<float>::min());
      s.scale = std::max(s.scale * a.Float("backoff_factor", 0.5f), floor);
      s.hysteresis_left = hysteresis;
    }
    return s;
  }
  s.hysteresis_left = hysteresis;
  if (++s.tracker >= a.Int("growth_interval", 2000)) {
    const float grown = s.scale * a.Float("growth_factor", 2.0f);
    const float max_scale = a.Float("max_scale", 0.0f);
    if (std::isfinite(grown) && (max_scale <= 0.0f || grown <= max_scale)) s.scale = grown;
    s.tracker = 0;
  }
  return s;
}

absl::Status UpdateScale(KernelContext& context) {
  ScaleState s;
  AMPC_ASSIGN_OR_RETURN(s.scale, Scalar<float>(context, 0));
  AMPC_ASSIGN_OR_RETURN(s.tracker, Scalar<int64_t>(context, 1));
  AMPC_ASSIGN_OR_RETURN(s.hysteresis_left, Scalar<int64_t>(context, 2));
  AMPC_ASSIGN_OR_RETURN(bool found, Scalar<bool>(context, 3));
  AMPC_ASSIGN_OR_RETURN(bool loss_bad, Scalar<bool>(context, 4));
  const Attributes attributes = context.attributes();
  if (attributes.Int("dynamic", 1) == 0 || loss_bad) {
    for (int i = 0; i < 3; ++i) context.SetOutput(i, context.in(i));
    return absl::OkStatus();
  }
  s = NextScaleState(s, found, attributes);
  AMPC_RETURN_IF_ERROR(NewScalar(context, 0, DType::kFloat, s.scale));
  AMPC_RETURN_IF_ERROR(NewScalar(context, 1, DType::kInt64, s.tracker));
  return NewScalar(context, 2, DType::kInt64, s.hysteresis_left);
}

// ---- UnscaleClip ----

// u = float(g) * inv; returns the sum of u^2 in double, summed per
// fixed block and then over blocks in order, so the result does not depend on the thread count.
double Unscale(KernelContext& context, const Tensor& g, float inv, float* u) {
  const int64_t n = g.size();
  const int64_t blocks = (n + kElementwiseGrain - 1) / kElementwiseGrain;
  std::vector<double> partial(static_cast<size_t>(blocks), 0.0);
  Dispatch<AMPC_FLOAT_TYPES>(g.dtype(), [&]<typename T>() {
    const T* x = g.data<T>();
    CpuOf(context.backend()).pool().ParallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        double sum = 0.0;
        const int64_t end = std::min(n, (b + 1) * kElementwiseGrain);
        for (int64_t k = b * kElementwiseGrain; k < end; ++k) {
          u[k] = static_cast<float>(Compute<T>::Load(x[k])) * inv;
          sum += static_cast<double>(u[k]) * static_cast<double>(u[k]);
        }
        partial[static_cast<size_t>(b)] = sum;
      }
    });
  });
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

absl::Status UnscaleClip(KernelContext& context) {
  AMPC_ASSIGN_OR_RETURN(float scale, Scalar<float>(context, 0));
  // GradScaler: inv_scale = scale.double().reciprocal().float().
  const float inv = static_cast<float>(1.0 / static_cast<double>(scale));
  const int n = context.num_inputs() - 1;
  std::vector<Tensor*> outputs;
  double sum_sq = 0.0;
  for (int i = 0; i < n; ++i) {
    const Tensor& g = context.in(i + 1);
    AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(i, g.shape(), DType::kFloat));
    sum_sq += Unscale(context, g, inv, out->data<float>());
    outputs.push_back(out);
  }
  const float norm = static_cast<float>(std::sqrt(sum_sq));
  const float max_norm = context.attributes().Float("max_norm", 0.0f);
  if (max_norm > 0.0f) {  // torch.nn.utils.clip_grad_norm_ multiplies even by a coefficient of 1
    const float ratio = max_norm / (norm + 1e-6f);
    const float coef = std::isnan(ratio) ? ratio : std::min(1.0f, ratio);  // as torch's clamp
    for (Tensor* out : outputs) {
      float* u = out->data<float>();
      ParallelFor(context, out->size(), [&](int64_t begin, int64_t end) {
        for (int64_t k = begin; k < end; ++k) u[k] *= coef;
      });
    }
  }
  return NewScalar(context, n, DType::kFloat, norm);
}

// ---- Optimizers: FP32 parameters, gradients and moments ----

// torch.optim.SGD, _single_tensor_sgd (maximize=False).
// SGD's attributes as the update uses them.
struct SgdScalars {
  float momentum, wd, keep, neg_lr;
  bool nesterov, first, has_buf;
};

// One parameter's update: param, grad (and buf with momentum) are inputs `in` on, the new param
// (and buf) outputs `out` on.
absl::Status SgdTensor(KernelContext& context, const SgdScalars& s, bool skip, int in, int out) {
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
  ParallelFor(context, param.size(), [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      float g = grad[k];
      if (s.wd != 0.0f) g = g + s.wd * p[k];  // grad.add(param, alpha=weight_decay)
      if (s.has_buf) {
        // buf = clone(grad) on the first step, else buf.mul_(momentum).add_(grad,
        // alpha=1-dampening)
        const float b = s.first ? g : buf[k] * s.momentum + s.keep * g;
        buf_out[k] = b;
        g = s.nesterov ? g + s.momentum * b : b;
      }
      p_out[k] = p[k] + s.neg_lr * g;  // param.add_(grad, alpha=-lr)
    }
  });
  return absl::OkStatus();
}

// The runtime's CheckUnscaleClip (optimizer_fusion.h): the two kernels, the same bits.
absl::Status CheckUnscaleClip(KernelContext& context) {
  return scaler_ops::CheckThenUnscaleClip(context, CheckFinite, UnscaleClip);
}

// SGD (ai.ampc) with one parameter, and the runtime's MultiSGD (optimizer_fusion.h) with any
// number: inputs skip, lr, first, then param, grad (and buf with momentum) per parameter.
absl::Status Sgd(KernelContext& context) {
  AMPC_ASSIGN_OR_RETURN(bool skip, Scalar<bool>(context, 0));
  AMPC_ASSIGN_OR_RETURN(float lr, Scalar<float>(context, 1));
  AMPC_ASSIGN_OR_RETURN(bool first, Scalar<bool>(context, 2));
  const Attributes a = context.attributes();
  SgdScalars s;
  s.momentum = a.Float("momentum", 0.0f);
  s.wd = a.Float("weight_decay", 0.0f);
  s.keep = static_cast<float>(1.0 - static_cast<double>(a.Float("dampening", 0.0f)));
  s.neg_lr = -lr;
  s.nesterov = a.Int("nesterov", 0) != 0;
  s.first = first;
  s.has_buf = s.momentum != 0.0f;
  const int per_in = s.has_buf ? 3 : 2, per_out = s.has_buf ? 2 : 1;
  for (int in = 3, out = 0; in < context.num_inputs(); in += per_in, out += per_out) {
    AMPC_RETURN_IF_ERROR(SgdTensor(context, s, skip, in, out));
  }
  return absl::OkStatus();
}

// The Python-float scalars of torch.optim.Adam(W)'s _single_tensor_adam, rounded to float where
// they meet the FP32 tensors.
struct AdamScalars {
  float beta2, eps, wd, w1, w2, decay, neg_step_size, bc2_sqrt;
  bool decoupled, small_w1;
};

AdamScalars AdamScalarsFor(const Attributes& a, float lr, int64_t step) {
  const double b1 = a.Float("beta1", 0.9f), b2 = a.Float("beta2", 0.999f);
  const double wd = a.Float("weight_decay", 0.0f);
  AdamScalars s;
  s.beta2 = static_cast<float>(b2);
  s.eps = a.Float("epsilon", 1e-8f);
  s.wd = static_cast<float>(wd);
  s.w1 = static_cast<float>(1.0 - b1);
  s.w2 = static_cast<float>(1.0 - b2);
  s.decay = static_cast<float>(1.0 - static_cast<double>(lr) * wd);
  const double bc1 = 1.0 - std::pow(b1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(b2, static_cast<double>(step));
  s.neg_step_size = static_cast<float>(-(static_cast<double>(lr) / bc1));
  s.bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  s.decoupled = a.Int("decoupled", 0) != 0;
  s.small_w1 = std::abs(s.w1) < 0.5f;  // ATen's lerp picks its formula by the weight
  return s;
}

// One parameter's update: param, grad, m, v are inputs `in` to in + 3, the new param, m, v
// outputs `out` to out + 2.
absl::Status AdamTensor(KernelContext& context, const AdamScalars& s, bool skip, int in, int out) {
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
  ParallelFor(context, p_t->size(), [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      float p = param[k], g = grad[k];
      if (s.wd != 0.0f) {
        if (s.decoupled) {
          p = p * s.decay;  // param.mul_(1 - lr * weight_decay)
        } else {
          g = g + s.wd * p;  // grad.add(param, alpha=weight_decay)
        }
      }
      const float diff = g - m[k];  // exp_avg.lerp_(grad, 1 - beta1)
      m_out[k] = s.small_w1 ? m[k] + s.w1 * diff : g - diff * (1.0f - s.w1);
      v_out[k] = v[k] * s.beta2 + (s.w2 * g) * g;  // mul_(beta2).addcmul_(grad, grad, 1 - beta2)
      const float denom = std::sqrt(v_out[k]) / s.bc2_sqrt + s.eps;
      p_out[k] = p + (s.neg_step_size * m_out[k]) / denom;  // addcdiv_(m, denom, -step_size)
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
  const AdamScalars s = AdamScalarsFor(context.attributes(), lr, step);
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
