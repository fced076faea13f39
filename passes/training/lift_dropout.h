// lift-dropout (--train; docs/training.md, "Dropout"): torch's dynamo exporter in training mode
// lowers an in-place Dropout of keep probability k to
//   mask = Div(Cast(Less(RandomUniformLike(c), k)), k);  y = Mul(x, mask)
// with c a constant of x's shape. Each such chain (intermediate values read by the chain alone,
// RandomUniformLike over [0, 1), k one positive scalar constant, c shaped as x) becomes
// y = Dropout(x, ratio = 1 - k, training_mode = true), which --dropout then turns off or trains as
// any Dropout. Random ops outside such a chain are left for dropout-mode to refuse.
#pragma once

#include "passes/pass.h"

namespace ampc {

class LiftDropout : public Pass {
 public:
  absl::string_view Name() const override { return "lift-dropout"; }
  absl::StatusOr<PassResult> Run(ModelContext& context) override;
};

}  // namespace ampc
