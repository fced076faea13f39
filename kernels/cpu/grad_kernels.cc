// ai.ampc gradient ops (docs/training-design.md, "Gradient ops"): the backward of Softmax,
// LogSoftmax, Gelu, SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss here; normalization,
// Conv and pooling in grad_norm.h, grad_conv.h and grad_pool.h. FP16/BF16 compute and accumulate in
// FP32, FP64 in FP64, and every output is rounded once.
#include <cmath>
#include <cstdint>
#include <numbers>
#include <optional>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/grad_common.h"
#include "kernels/cpu/grad_conv.h"
#include "kernels/cpu/grad_norm.h"
#include "kernels/cpu/grad_pool.h"
#include "kernels/cpu/reduce_common.h"

namespace ampc {
namespace grad {
namespace {

enum class SoftmaxKind { kSoftmax, kLogSoftmax };

// SoftmaxGrad: dx = y * (dy - sum(dy * y)); LogSoftmaxGrad: dx = dy - exp(y) * sum(dy); sums
// along `axis` (opset 13 semantics: one axis, default -1).
template <SoftmaxKind kKind>
absl::Status SoftmaxLikeGrad(KernelContext& context) {
  const Tensor& dy = context.in(0);
  AMPC_ASSIGN_OR_RETURN(const reduce::AxisLayout layout, SoftmaxGradLayout(context));
  const Tensor& y = context.in(1);
  AMPC_ASSIGN_OR_RETURN(Tensor * dx, context.Output(0, y.shape()));
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(y.dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    const T* pdy = dy.data<T>();
    const T* py = y.data<T>();
    T* pdx = dx->data<T>();
    const int64_t n = layout.n, inner = layout.inner;
    ParallelFor(context, layout.rows(), n, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t start = layout.RowStart(r);
        C sum = 0;
        for (int64_t k = 0, i = start; k < n; ++k, i += inner) {
          const C g = Compute<T>::Load(pdy[i]);
          sum += kKind == SoftmaxKind::kSoftmax ? g * Compute<T>::Load(py[i]) : g;
        }
        for (int64_t k = 0, i = start; k < n; ++k, i += inner) {
          const C g = Compute<T>::Load(pdy[i]), v = Compute<T>::Load(py[i]);
          pdx[i] = Compute<T>::Store(kKind == SoftmaxKind::kSoftmax ? v * (g - sum)
                                                                    : g - std::exp(v) * sum);
        }
      }
    });
  });
  return handled ? absl::OkStatus() : Unsupported(context);
}

// GeluGrad (erf form): dx = dy * (Phi(x) + x * phi(x)), Phi and phi the standard normal CDF and
// density.
absl::Status GeluGrad(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(CheckSameType(context, {1}, {"x"}));
  const Tensor& dy = context.in(0);
  const Tensor& x = context.in(1);
  AMPC_RETURN_IF_ERROR(CheckShape(context, dy, "dy", x.shape()));
  AMPC_ASSIGN_OR_RETURN(Tensor * dx, context.Output(0, x.shape()));
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(x.dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    const T* pdy = dy.data<T>();
    const T* px = x.data<T>();
    T* pdx = dx->data<T>();
    const C inv_sqrt2 = static_cast<C>(1 / std::numbers::sqrt2);
    const C inv_sqrt_2pi = static_cast<C>(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
    ParallelFor(context, x.size(), 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const C v = Compute<T>::Load(px[i]);
        const C cdf = C{0.5} * (C{1} + std::erf(v * inv_sqrt2));
        const C pdf = inv_sqrt_2pi * std::exp(C{-0.5} * v * v);
        pdx[i] = Compute<T>::Store(Compute<T>::Load(pdy[i]) * (cdf + v * pdf));
      }
    });
  });
  return handled ? absl::OkStatus() : Unsupported(context);
}

enum class LossKind { kSoftmaxCrossEntropy, kNegativeLogLikelihood };

// SoftmaxCrossEntropyLossGrad(dloss, log_prob, labels[, weights]) -> dscores, the backward of
// reduce_loss.h's forward: dscores[n, c, d] = k(n, d) * (exp(log_prob[n, c, d]) - [c == label])
// with k = dloss (per sample for reduction "none") * weight[label], divided by the sum of the
// applied weights for "mean", and 0 where the label is ignore_index.
// NegativeLogLikelihoodLossGrad(dloss, input, labels[, weights]) -> -k(n, d) * [c == label]
// (`input` gives the shape and type only).
template <LossKind kKind>
absl::Status LossGrad(KernelContext& context) {
  constexpr bool kSoftmax = kKind == LossKind::kSoftmaxCrossEntropy;
  const char* scores_name = kSoftmax ? "log_prob" : "input";
  const Tensor& dloss = context.in(0);
  AMPC_RETURN_IF_ERROR(CheckSameType(context, {1}, {scores_name}));
  const Tensor& log_prob = context.in(1);
  if (context.input(2) == nullptr) return NodeError(context, "input labels is required");
  if (log_prob.rank() < 2) {
    return NodeError(context, absl::StrCat(scores_name, " must be [N, C, d1, ...], got shape ",
                                           ShapeString(log_prob.shape())));
  }
  Shape labels_shape = log_prob.shape();
  labels_shape.erase(labels_shape.begin() + 1);
  AMPC_RETURN_IF_ERROR(CheckShape(context, context.in(2), "labels", labels_shape));
  AMPC_ASSIGN_OR_RETURN(std::vector<int64_t> labels,
                        reduce::ReadInts(context, context.in(2), "labels"));
  const Attributes attributes = context.attributes();
  const std::string reduction = attributes.String("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    return NodeError(context,
                     absl::StrCat("reduction '", reduction, "' is not one of none, sum, mean"));
  }
  AMPC_RETURN_IF_ERROR(
      CheckShape(context, dloss, "dloss", reduction == "none" ? labels_shape : Shape{}));
  std::optional<int64_t> ignore;
  if (attributes.Has("ignore_index")) ignore = attributes.Int("ignore_index", 0);
  const int64_t n = log_prob.dim(0), classes = log_prob.dim(1);
  const int64_t d = n == 0 ? 0 : static_cast<int64_t>(labels.size()) / n;
  const Tensor* weights = context.input(3);
  if (weights != nullptr) {
    AMPC_RETURN_IF_ERROR(CheckSameType(context, {3}, {"weights"}));
    AMPC_RETURN_IF_ERROR(CheckShape(context, *weights, "weights", {classes}));
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] != ignore && (labels[i] < 0 || labels[i] >= classes)) {
      return NodeError(context, absl::StrCat("label ", labels[i], " at flat position ", i,
                                             " is out of range [0, ", classes, ")"));
    }
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, log_prob.shape()));
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(log_prob.dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    const std::vector<C> w = weights == nullptr ? std::vector<C>() : Load<T>(*weights);
    const std::vector<C> g = Load<T>(dloss);
    std::vector<C> k(labels.size(), C{0});  // the factor of each (n, d)
    C weight_sum = 0;
    for (size_t i = 0; i < labels.size(); ++i) {
      if (labels[i] == ignore) continue;
      k[i] = w.empty() ? C{1} : w[labels[i]];
      weight_sum += k[i];
    }
    for (size_t i = 0; i < labels.size(); ++i) {
      k[i] *= reduction == "none" ? g[i] : reduction == "sum" ? g[0] : g[0] / weight_sum;
    }
    const T* lp = log_prob.data<T>();
    T* ds = out->data<T>();
    ParallelFor(context, n * classes, d, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {  // row = (n, c)
        const int64_t i = row / classes, c = row % classes;
        for (int64_t j = 0; j < d; ++j) {
          const int64_t at = i * d + j;
          C v = 0;
          if (labels[at] != ignore) {
            const C p =
                kSoftmax ? std::exp(static_cast<C>(Compute<T>::Load(lp[row * d + j]))) : C{0};
            v = k[at] * (p - (labels[at] == c ? C{1} : C{0}));
          }
          ds[row * d + j] = Compute<T>::Store(v);
        }
      }
    });
  });
  return handled ? absl::OkStatus() : Unsupported(context);
}

}  // namespace
}  // namespace grad

void RegisterGradKernels(KernelRegistry& r) {
  const std::vector<DType> floats = {AMPC_FLOAT_TYPES};
  const std::vector<DType> indices = {DType::kInt32, DType::kInt64};
  const std::string cpu = "cpu", ampc = grad::kDomain;
  r.Register(cpu, ampc, "SoftmaxGrad", {{0, floats}, {1, floats}},
             grad::SoftmaxLikeGrad<grad::SoftmaxKind::kSoftmax>);
  r.Register(cpu, ampc, "LogSoftmaxGrad", {{0, floats}, {1, floats}},
             grad::SoftmaxLikeGrad<grad::SoftmaxKind::kLogSoftmax>);
  r.Register(cpu, ampc, "GeluGrad", {{0, floats}, {1, floats}}, grad::GeluGrad);
  r.Register(cpu, ampc, "SoftmaxCrossEntropyLossGrad",
             {{0, floats}, {1, floats}, {2, indices}, {3, floats}},
             grad::LossGrad<grad::LossKind::kSoftmaxCrossEntropy>);
  r.Register(cpu, ampc, "NegativeLogLikelihoodLossGrad",
             {{0, floats}, {1, floats}, {2, indices}, {3, floats}},
             grad::LossGrad<grad::LossKind::kNegativeLogLikelihood>);
  r.Register(cpu, ampc, "LayerNormalizationGrad", {{0, floats}, {1, floats}, {2, floats}},
             grad::LayerNormalizationGrad);
  r.Register(cpu, ampc, "BatchNormalizationGrad", {{0, floats}, {1, floats}, {2, floats}},
             grad::BatchNormalizationGrad);
  r.Register(cpu, ampc, "ConvGrad", {{0, floats}, {1, floats}, {2, floats}}, grad::ConvGrad);
  r.Register(cpu, ampc, "MaxPoolGrad", {{0, floats}, {1, {DType::kInt64}}, {2, floats}},
             grad::MaxPoolGrad);
  r.Register(cpu, ampc, "AveragePoolGrad", {{0, floats}, {1, floats}}, grad::AveragePoolGrad);
}

}  // namespace ampc
