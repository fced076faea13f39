// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opset 12+). Scores are [N, C, d1, ...],
// labels [N, d1, ...]; element loss = -weight[label] * log_prob[n, label, d], 0 where the label is
// ignore_index. reduction "none" keeps the labels' shape, "sum" sums, "mean" divides the sum by the
// sum of the weights applied (the count of labels not ignored when there are no weights).
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu/reduce_common.h"
#include "passes/graph/status_macros.h"

namespace ampc::reduce {

struct LossSetup {
  int64_t n = 0, classes = 0, d = 0;  // scores seen as [n, classes, d]
  Shape labels_shape;
  std::vector<int64_t> labels;  // n * d, each in [0, classes) or ignore_index
  std::optional<int64_t> ignore_index;
  std::string reduction;
};

inline absl::StatusOr<LossSetup> SetupLoss(const KernelContext& context) {
  const Tensor& scores = context.in(0);
  const Tensor& labels = context.in(1);
  if (scores.rank() < 2) {
    return NodeError(context, absl::StrCat("input 0 must be [N, C, d1, ...], got shape ",
                                           ShapeString(scores.shape())));
  }
  LossSetup setup;
  setup.labels_shape = scores.shape();
  setup.labels_shape.erase(setup.labels_shape.begin() + 1);
  if (labels.shape() != setup.labels_shape) {
    return NodeError(context, absl::StrCat("labels have shape ", ShapeString(labels.shape()),
                                           "; scores of shape ", ShapeString(scores.shape()),
                                           " need ", ShapeString(setup.labels_shape)));
  }
  const Attributes attributes = context.attributes();
  setup.reduction = attributes.String("reduction", "mean");
  if (setup.reduction != "none" && setup.reduction != "sum" && setup.reduction != "mean") {
    return NodeError(
        context, absl::StrCat("reduction '", setup.reduction, "' is not one of none, sum, mean"));
  }
  if (attributes.Has("ignore_index")) setup.ignore_index = attributes.Int("ignore_index", 0);
  setup.n = scores.dim(0);
  setup.classes = scores.dim(1);
  setup.d = ElementCount(std::span<const int64_t>(setup.labels_shape).subspan(1));
  AMPC_ASSIGN_OR_RETURN(setup.labels, ReadInts(context, labels, "labels"));
  for (size_t i = 0; i < setup.labels.size(); ++i) {
    const int64_t label = setup.labels[i];
    if (label == setup.ignore_index) continue;
    if (label < 0 || label >= setup.classes) {
      return NodeError(context, absl::StrCat("label ", label, " at flat position ", i,
                                             " is out of range [0, ", setup.classes, ")"));
    }
  }
  const Tensor* weights = context.input(2);
  if (weights != nullptr && weights->dtype() != scores.dtype()) {
    return NodeError(context, absl::StrCat("weights are ", DTypeName(weights->dtype()), ", scores ",
                                           DTypeName(scores.dtype())));
  }
  if (weights != nullptr && (weights->rank() != 1 || weights->dim(0) != setup.classes)) {
    return NodeError(context, absl::StrCat("weights must have shape [", setup.classes, "], got ",
                                           ShapeString(weights->shape())));
  }
  return setup;
}

// Writes output 0 from log_prob(n, c, d) (a value of type F).
template <typename T, typename F, typename LogProb>
absl::Status WriteLoss(KernelContext& context, const LossSetup& setup, LogProb log_prob) {
  const Tensor* weights = context.input(2);
  const bool none = setup.reduction == "none";
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, none ? setup.labels_shape : Shape{}));
  T* y = out->data<T>();
  F loss_sum = 0, weight_sum = 0;
  for (int64_t i = 0; i < setup.n; ++i) {
    for (int64_t j = 0; j < setup.d; ++j) {
      const int64_t label = setup.labels[i * setup.d + j];
      F loss = 0, weight = 0;
      if (label != setup.ignore_index) {
        weight = weights == nullptr ? F{1} : F(Compute<T>::Load(weights->data<T>()[label]));
        loss = -weight * log_prob(i, label, j);
      }
      if (none) y[i * setup.d + j] = StoreAs<T>(loss);
      loss_sum += loss;
      weight_sum += weight;
    }
  }
  if (setup.reduction == "sum") y[0] = StoreAs<T>(loss_sum);
  if (setup.reduction == "mean") y[0] = StoreAs<T>(loss_sum / weight_sum);
  return absl::OkStatus();
}

inline absl::Status NegativeLogLikelihoodLoss(KernelContext& context) {
  AMPC_ASSIGN_OR_RETURN(LossSetup setup, SetupLoss(context));
  absl::Status status;
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(context.in(0).dtype(), [&]<typename T>() {
    using F = FloatAcc<T>;
    const T* x = context.in(0).data<T>();
    const int64_t classes = setup.classes, d = setup.d;
    status = WriteLoss<T, F>(context, setup, [&](int64_t i, int64_t c, int64_t j) {
      return F(Compute<T>::Load(x[(i * classes + c) * d + j]));
    });
  });
  return handled ? status : UnsupportedType(context);
}

// log_softmax over the class axis, kept in F; written to output 1 when the node asks for it.
inline absl::Status SoftmaxCrossEntropyLoss(KernelContext& context) {
  AMPC_ASSIGN_OR_RETURN(LossSetup setup, SetupLoss(context));
  const Tensor& scores = context.in(0);
  Tensor* log_prob_out = nullptr;
  if (WantsOutput(context, 1)) {
    AMPC_ASSIGN_OR_RETURN(log_prob_out, context.Output(1, scores.shape()));
  }
  absl::Status status;
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(scores.dtype(), [&]<typename T>() {
    using F = FloatAcc<T>;
    const T* x = scores.data<T>();
    const int64_t classes = setup.classes, d = setup.d;
    std::vector<F> log_prob(static_cast<size_t>(scores.size()));
    const AxisLayout layout{.outer = setup.n, .n = classes, .inner = d};
    ParallelFor(context, layout.rows(), classes, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t start = layout.RowStart(r);
        F max = -std::numeric_limits<F>::infinity();
        for (int64_t c = 0; c < classes; ++c) {
          max = std::max(max, F(Compute<T>::Load(x[start + c * d])));
        }
        F sum = 0;
        for (int64_t c = 0; c < classes; ++c)
          sum += std::exp(F(Compute<T>::Load(x[start + c * d])) - max);
        const F log_sum = std::log(sum);
        for (int64_t c = 0; c < classes; ++c) {
          log_prob[start + c * d] = F(Compute<T>::Load(x[start + c * d])) - max - log_sum;
        }
      }
    });
    if (log_prob_out != nullptr) {
      T* p = log_prob_out->data<T>();
      for (size_t i = 0; i < log_prob.size(); ++i) p[i] = StoreAs<T>(log_prob[i]);
    }
    status = WriteLoss<T, F>(context, setup, [&](int64_t i, int64_t c, int64_t j) {
      return log_prob[(i * classes + c) * d + j];
    });
  });
  return handled ? status : UnsupportedType(context);
}

}  // namespace ampc::reduce
