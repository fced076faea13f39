// loss-op: `--train --loss-op KIND:VALUE` (docs/training.md) appends a loss to a forward model that
// has none, before training-step assembles the step:
//   cross_entropy:LOGITS  a new int64 input `labels` [N] (N: LOGITS's first dim) and
//                         loss = SoftmaxCrossEntropyLoss<reduction = "mean">(LOGITS, labels);
//   mse:OUTPUT            a new input `target` of OUTPUT's type and shape and
//                         loss = ReduceMean((OUTPUT - target)^2) over every axis;
// both computed in FP32 (a Cast first when the value is not). The loss is named `loss`, or the
// first free `loss_N`; it becomes a graph output and context.training.loss.
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
  absl::string_view Name() const override { return "loss-op"; }
  // Does nothing unless context.training.loss_op is set. Errors name the file and the value: no
  // such value, not a float tensor, LOGITS not of rank 2, `labels`/`target` already taken.
  absl::StatusOr<bool> Run(ModelContext& context) override;
};

}  // namespace ampc
