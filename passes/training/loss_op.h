// loss-op: `--train --loss-op KIND:VALUE` (docs/training.md) appends a loss to a forward model that
// has none, before training-step assembles the step:
//   cross_entropy:LOGITS  LOGITS [N, ..., C] (classes last); a new int64 input `labels` [N, ...]
//                         and loss = the mean over the labelled positions of the softmax cross
//                         entropy (SoftmaxCrossEntropyLoss, classes moved to axis 1 when the
//                         rank is above 2);
//   causal_lm:LOGITS      LOGITS [N, T, C], `labels` [N, T]: position t is scored against label
//                         t + 1 (the one-token shift of a causal language model);
//   mse:OUTPUT            a new input `target` of OUTPUT's type and shape and
//                         loss = ReduceMean((OUTPUT - target)^2) over every axis;
// the two cross entropies take options after the value, `,ignore_index=I` (labels equal to I
// are left out of the loss and its mean) and `,label_smoothing=E` (PyTorch's: (1 - E) times the
// cross entropy plus E times the mean over classes of -log p);
// both computed in FP32 (a Cast first when the value is not). The loss is named `loss`, or the
// first free `loss_N`; it becomes a graph output and context.loss (the loss the training step
// trains).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "passes/pass.h"

namespace ampc {

struct LossOpSpec {
  enum class Kind { kCrossEntropy, kCausalLm, kMse };
  Kind kind;
  std::string value;  // LOGITS or OUTPUT
  std::optional<int64_t> ignore_index;
  double label_smoothing = 0;  // in [0, 1)
};

// "cross_entropy:LOGITS[,OPTION...]", "causal_lm:LOGITS[,OPTION...]" or "mse:OUTPUT";
// InvalidArgument "--loss-op=TEXT: ..." naming what is wrong else.
absl::StatusOr<LossOpSpec> ParseLossOp(std::string_view text);

class LossOp : public Pass {
 public:
  // `text`: --loss-op (empty: the pass does nothing).
  explicit LossOp(std::string text) : text_(std::move(text)) {}
  absl::string_view Name() const override { return "loss-op"; }
  // Sets context.loss to the loss it adds. Errors name the file and the value: no such value,
  // not a float tensor, LOGITS of rank below 2 (3 for causal_lm), `labels`/`target` already taken.
  absl::StatusOr<PassResult> Run(ModelContext& context) override;

 private:
  const std::string text_;
};

}  // namespace ampc
