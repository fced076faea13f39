// SoftmaxCrossEntropyLoss, LayerNormalization and their ai.ampc gradients on the CUDA backend.
// Checks are the CPU kernels' (kernels/cpu/reduce_loss.h, norm_kernels.cc, grad_kernels.cc,
// grad_norm.h) but for the label values, which stay on the device: a label that is neither
// ignore_index nor a class gives NaN there instead of failing the node. Scratch space for the
// launchers' fixed-order sums comes from the backend and goes back to it after the launch (the
// stream orders its next user after the launch).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/grad_common.h"
#include "kernels/cpu/reduce_common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/op_support.h"
#include "kernels/cuda/reduce.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

using cuda::ElemOf;
using cuda::Launched;
using cuda::StreamOf;

// Backend memory of `bytes` for a launcher's workspace (none for 0 bytes).
absl::StatusOr<std::shared_ptr<Buffer>> Workspace(KernelContext& context, size_t bytes) {
  if (bytes == 0) return std::shared_ptr<Buffer>();
  return context.backend().Allocate(bytes);
}

void* DataOf(const std::shared_ptr<Buffer>& buffer) {
  return buffer == nullptr ? nullptr : buffer->data();
}

const void* RawOrNull(const Tensor* tensor) { return tensor == nullptr ? nullptr : tensor->raw(); }

// ---- SoftmaxCrossEntropyLoss -------------------------------------------------------------------

// Reduction and ignore_index from the attributes, as reduce::SetupLoss reads them.
absl::Status ReadLossAttributes(const KernelContext& context, cuda::CrossEntropyArgs& args) {
  const Attributes attributes = context.attributes();
  const std::string reduction = attributes.String("reduction", "mean");
  if (reduction == "none") {
    args.reduction = cuda::LossReduction::kNone;
  } else if (reduction == "sum") {
    args.reduction = cuda::LossReduction::kSum;
  } else if (reduction == "mean") {
    args.reduction = cuda::LossReduction::kMean;
  } else {
    return NodeError(context,
                     absl::StrCat("reduction '", reduction, "' is not one of none, sum, mean"));
  }
  args.has_ignore_index = attributes.Has("ignore_index");
  args.ignore_index = attributes.Int("ignore_index", 0);
  return absl::OkStatus();
}

// Scores [N, C, d...] and labels [N, d...] as the launchers' [n, classes, d] view; the labels'
// shape to `labels_shape`.
absl::StatusOr<cuda::CrossEntropyArgs> LossArgs(const KernelContext& context, const Tensor& scores,
                                                const Tensor& labels, const char* scores_name,
                                                Shape& labels_shape) {
  if (scores.rank() < 2) {
    return NodeError(context, absl::StrCat(scores_name, " must be [N, C, d1, ...], got shape ",
                                           ShapeString(scores.shape())));
  }
  labels_shape = scores.shape();
  labels_shape.erase(labels_shape.begin() + 1);
  if (labels.shape() != labels_shape) {
    return NodeError(context, absl::StrCat("labels have shape ", ShapeString(labels.shape()), "; ",
                                           scores_name, " of shape ", ShapeString(scores.shape()),
                                           " need ", ShapeString(labels_shape)));
  }
  cuda::CrossEntropyArgs args;
  args.type = ElemOf(scores.dtype());
  args.label_type = ElemOf(labels.dtype());
  args.n = scores.dim(0);
  args.classes = scores.dim(1);
  args.d = ElementCount(std::span<const int64_t>(labels_shape).subspan(1));
  AMPC_RETURN_IF_ERROR(ReadLossAttributes(context, args));
  return args;
}

absl::Status CheckWeights(const KernelContext& context, const Tensor* weights, DType dtype,
                          int64_t classes) {
  if (weights == nullptr) return absl::OkStatus();
  if (weights->dtype() != dtype) {
    return NodeError(context, absl::StrCat("weights are ", DTypeName(weights->dtype()), ", scores ",
                                           DTypeName(dtype)));
  }
  if (weights->rank() != 1 || weights->dim(0) != classes) {
    return NodeError(context, absl::StrCat("weights must have shape [", classes, "], got ",
                                           ShapeString(weights->shape())));
  }
  return absl::OkStatus();
}

absl::Status SoftmaxCrossEntropyLoss(KernelContext& context) {
  const Tensor& scores = context.in(0);
  Shape labels_shape;
  AMPC_ASSIGN_OR_RETURN(cuda::CrossEntropyArgs args,
                        LossArgs(context, scores, context.in(1), "input 0", labels_shape));
  const Tensor* weights = context.input(2);
  AMPC_RETURN_IF_ERROR(CheckWeights(context, weights, scores.dtype(), args.classes));
  const bool none = args.reduction == cuda::LossReduction::kNone;
  AMPC_ASSIGN_OR_RETURN(Tensor * loss, context.Output(0, none ? labels_shape : Shape{}));
  Tensor* log_prob = nullptr;
  if (reduce::WantsOutput(context, 1)) {
    AMPC_ASSIGN_OR_RETURN(log_prob, context.Output(1, scores.shape()));
  }
  AMPC_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> workspace,
                        Workspace(context, cuda::SoftmaxCrossEntropyLossWorkspaceBytes(args)));
  return Launched(context, cuda::SoftmaxCrossEntropyLoss(
                               args, scores.raw(), context.in(1).raw(), RawOrNull(weights),
                               loss->raw(), log_prob == nullptr ? nullptr : log_prob->raw(),
                               DataOf(workspace), StreamOf(context)));
}

absl::Status SoftmaxCrossEntropyLossGrad(KernelContext& context) {
  const Tensor& dloss = context.in(0);
  AMPC_RETURN_IF_ERROR(grad::CheckSameType(context, {1}, {"log_prob"}));
  const Tensor& log_prob = context.in(1);
  if (context.input(2) == nullptr) return NodeError(context, "input labels is required");
  Shape labels_shape;
  AMPC_ASSIGN_OR_RETURN(cuda::CrossEntropyArgs args,
                        LossArgs(context, log_prob, context.in(2), "log_prob", labels_shape));
  const bool none = args.reduction == cuda::LossReduction::kNone;
  AMPC_RETURN_IF_ERROR(grad::CheckShape(context, dloss, "dloss", none ? labels_shape : Shape{}));
  const Tensor* weights = context.input(3);
  if (weights != nullptr) {
    AMPC_RETURN_IF_ERROR(grad::CheckSameType(context, {3}, {"weights"}));
    AMPC_RETURN_IF_ERROR(grad::CheckShape(context, *weights, "weights", {args.classes}));
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * dscores, context.Output(0, log_prob.shape()));
  AMPC_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> workspace,
                        Workspace(context, cuda::SoftmaxCrossEntropyLossGradWorkspaceBytes(args)));
  return Launched(context, cuda::SoftmaxCrossEntropyLossGrad(args, dloss.raw(), log_prob.raw(),
                                                             context.in(2).raw(),
                                                             RawOrNull(weights), dscores->raw(),
                                                             DataOf(workspace), StreamOf(context)));
}

// ---- LayerNormalization ------------------------------------------------------------------------

// The element count of a Scale or B input that broadcasts to `normalized` the way the kernels read
// it (its dims, leading 1s dropped, are the trailing dims of `normalized`); the CPU's message for
// one that does not broadcast at all, and a CUDA-specific one for other broadcasts.
absl::StatusOr<int64_t> ParamSize(const KernelContext& context, const Tensor* param,
                                  absl::string_view name, const Shape& normalized) {
  const int64_t cols = ElementCount(normalized);
  if (param == nullptr) return cols;
  const Shape& dims = param->shape();
  bool broadcasts = dims.size() <= normalized.size();
  for (size_t i = 1; broadcasts && i <= dims.size(); ++i) {
    const int64_t d = dims[dims.size() - i];
    broadcasts = d == 1 || d == normalized[normalized.size() - i];
  }
  if (!broadcasts) {
    return NodeError(context, absl::StrCat(name, " of shape ", ShapeString(dims),
                                           " does not broadcast to the normalized shape ",
                                           ShapeString(normalized)));
  }
  size_t first = 0;
  while (first < param->shape().size() && param->dim(static_cast<int>(first)) == 1) ++first;
  const size_t kept = param->shape().size() - first;
  const bool suffix =
      std::equal(param->shape().begin() + first, param->shape().end(), normalized.end() - kept);
  if (!suffix) {
    return NodeError(context,
                     absl::StrCat(name, " of shape ", ShapeString(param->shape()),
                                  " broadcasts to the normalized shape ", ShapeString(normalized),
                                  " other than as its trailing dims, which the CUDA "
                                  "kernel does not take"));
  }
  return param->size();
}

// The [rows, cols] view from `axis` on, and the element type of the statistics (`stats`: Mean and
// InvStdDev, whichever are present), which must be x's or float.
absl::StatusOr<cuda::LayerNormArgs> NormArgs(const KernelContext& context, const Tensor& x,
                                             int64_t axis, std::vector<const Tensor*> stats) {
  cuda::LayerNormArgs args;
  args.type = ElemOf(x.dtype());
  args.cols = ElementCount(std::span<const int64_t>(x.shape()).subspan(axis));
  args.rows = args.cols == 0 ? 0 : x.size() / args.cols;
  args.stat_type = cuda::ElemType::kFloat;
  std::optional<DType> stat_type;
  for (const Tensor* stat : stats) {
    if (stat == nullptr) continue;
    if (stat->dtype() != x.dtype() && stat->dtype() != DType::kFloat) {
      return NodeError(context, absl::StrCat("statistics of type ", DTypeName(stat->dtype()),
                                             " beside ", DTypeName(x.dtype()),
                                             " data: the CUDA kernel takes the data's type or "
                                             "float32"));
    }
    if (stat_type.has_value() && *stat_type != stat->dtype()) {
      return NodeError(context, "Mean and InvStdDev of different types");
    }
    stat_type = stat->dtype();
  }
  if (stat_type.has_value()) args.stat_type = ElemOf(*stat_type);
  return args;
}

absl::Status LayerNormalization(KernelContext& context) {
  const Tensor& x = context.in(0);
  const Attributes attributes = context.attributes();
  AMPC_ASSIGN_OR_RETURN(int axis,
                        reduce::NormalizeAxis(context, attributes.Int("axis", -1), x.rank()));
  const int64_t stash_type = attributes.Int("stash_type", 1);
  if (stash_type != static_cast<int64_t>(DType::kFloat)) {
    return NodeError(
        context, absl::StrCat("stash_type ", stash_type, " is not supported (only 1, float32)"));
  }
  const Shape normalized(x.shape().begin() + axis, x.shape().end());
  AMPC_ASSIGN_OR_RETURN(const int64_t scale_size,
                        ParamSize(context, context.input(1), "Scale", normalized));
  AMPC_ASSIGN_OR_RETURN(const int64_t bias_size,
                        ParamSize(context, context.input(2), "B", normalized));
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, x.shape()));
  Shape stat_shape = x.shape();
  for (size_t d = static_cast<size_t>(axis); d < stat_shape.size(); ++d) stat_shape[d] = 1;
  Tensor* mean = nullptr;
  Tensor* inv_std_dev = nullptr;
  if (reduce::WantsOutput(context, 1)) {
    AMPC_ASSIGN_OR_RETURN(mean, context.Output(1, stat_shape));
  }
  if (reduce::WantsOutput(context, 2)) {
    AMPC_ASSIGN_OR_RETURN(inv_std_dev, context.Output(2, stat_shape));
  }
  AMPC_ASSIGN_OR_RETURN(cuda::LayerNormArgs args, NormArgs(context, x, axis, {mean, inv_std_dev}));
  args.scale_size = scale_size;
  args.bias_size = bias_size;
  args.epsilon = attributes.Float("epsilon", 1e-5f);
  return Launched(context,
                  cuda::LayerNormalization(
                      args, x.raw(), RawOrNull(context.input(1)), RawOrNull(context.input(2)),
                      y->raw(), mean == nullptr ? nullptr : mean->raw(),
                      inv_std_dev == nullptr ? nullptr : inv_std_dev->raw(), StreamOf(context)));
}

absl::Status LayerNormalizationGrad(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(grad::CheckSameType(context, {1, 2}, {"x", "scale"}));
  const Tensor& x = context.in(1);
  AMPC_RETURN_IF_ERROR(grad::CheckShape(context, context.in(0), "dy", x.shape()));
  AMPC_ASSIGN_OR_RETURN(
      int axis, reduce::NormalizeAxis(context, context.attributes().Int("axis", -1), x.rank()));
  const Shape normalized(x.shape().begin() + axis, x.shape().end());
  AMPC_ASSIGN_OR_RETURN(const int64_t scale_size,
                        ParamSize(context, &context.in(2), "scale", normalized));
  const Tensor* mean = context.input(3);
  const Tensor* inv_std_dev = context.input(4);
  if (mean == nullptr) return NodeError(context, "input mean is required");
  if (inv_std_dev == nullptr) return NodeError(context, "input inv_std_dev is required");
  AMPC_ASSIGN_OR_RETURN(cuda::LayerNormArgs args, NormArgs(context, x, axis, {mean, inv_std_dev}));
  for (const auto& [stat, name] :
       {std::pair{mean, "mean"}, std::pair{inv_std_dev, "inv_std_dev"}}) {
    if (stat->size() != args.rows) {
      return NodeError(context, absl::StrCat(name, " has shape ", ShapeString(stat->shape()),
                                             ", expected ", args.rows, " values"));
    }
  }
  args.scale_size = scale_size;
  args.bias_size = args.cols;
  Tensor* outputs[3] = {nullptr, nullptr, nullptr};
  for (int i = 0; i < 3; ++i) {
    if (!grad::Wants(context, i)) continue;
    AMPC_ASSIGN_OR_RETURN(outputs[i], context.Output(i, i == 0 ? x.shape() : normalized));
  }
  const auto raw = [](Tensor* t) { return t == nullptr ? nullptr : t->raw(); };
  const size_t bytes = outputs[1] == nullptr && outputs[2] == nullptr
                           ? 0
                           : cuda::LayerNormalizationGradWorkspaceBytes(args);
  AMPC_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> workspace, Workspace(context, bytes));
  return Launched(context, cuda::LayerNormalizationGrad(
                               args, context.in(0).raw(), x.raw(), context.in(2).raw(), mean->raw(),
                               inv_std_dev->raw(), raw(outputs[0]), raw(outputs[1]),
                               raw(outputs[2]), DataOf(workspace), StreamOf(context)));
}

}  // namespace

void RegisterCudaLossAndNormKernels(KernelRegistry& r) {
  const std::vector<DType> floats = {AMPC_FLOAT_TYPES};
  const std::vector<DType> indices = {DType::kInt32, DType::kInt64};
  r.Register("cuda", "", "SoftmaxCrossEntropyLoss", {{0, floats}, {1, indices}, {2, floats}},
             SoftmaxCrossEntropyLoss);
  r.Register("cuda", grad::kDomain, "SoftmaxCrossEntropyLossGrad",
             {{0, floats}, {1, floats}, {2, indices}, {3, floats}}, SoftmaxCrossEntropyLossGrad);
  // X, Scale and B of one type (what autocast's FOLLOW gives), so another mix finds no CUDA
  // kernel at session creation rather than failing a step.
  for (DType t : floats) {
    r.Register("cuda", "", "LayerNormalization", {{0, {t}}, {1, {t}}, {2, {t}}},
               LayerNormalization);
    r.Register("cuda", grad::kDomain, "LayerNormalizationGrad", {{0, {t}}, {1, {t}}, {2, {t}}},
               LayerNormalizationGrad);
  }
}

}  // namespace ampc
