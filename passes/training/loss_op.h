// loss-op: `--train --loss-op KIND:VALUE` (docs/training.md) appends a loss to a forward model that
// has none, before training-step assembles the step:
//   cross_entropy:LOGITS  a new int64 input `labels` [N] (N: LOGITS's first dim) and
//                         loss = SoftmaxCrossEntropyLoss<reduction = "mean">(LOGITS, labels);
//   mse:OUTPUT            a new input `target` of OUTPUT's type and shape and
//                         loss = ReduceMean((OUTPUT - target)^2) over every axis;
// both computed in FP32 (a Cast first when the value is not). The loss is named `loss`, or the
// first free `loss_N`; it becomes a graph output and context.loss (the loss the training step
// trains).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "passes/pass.h"

namespace ampc {

struct LossOpSpec {
  enum class Kind { kCrossEntropy, kMse };
  Kind kind;
  std::string value;  // LOGITS or OUTPUT
};

// "cross_entropy:LOGITS" or "mse:OUTPUT"; InvalidArgument "--loss-op=TEXT: expected ..." else.
absl::StatusOr<LossOpSpec> ParseLossOp(std::string_view text);

class LossOp : public Pass {
 public:
  // `text`: --loss-op (empty: the pass does nothing).
  explicit LossOp(std::string text) : text_(std::move(text)) {}
  absl::string_view Name() const override { return "loss-op"; }
  // Sets context.loss to the loss it adds. Errors name the file and the value: no such value,
  // not a float tensor, LOGITS not of rank 2, `labels`/`target` already taken.
  absl::StatusOr<PassResult> Run(ModelContext& context) override;

 private:
  const std::string text_;
};

}  // namespace ampc
