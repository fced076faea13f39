// split-sequences (--train; docs/training.md, "Sequences"): torch's dynamo exporter without its
// optimizer writes tensor.split() as SplitToSequence followed by SequenceAt at constant indices
// (GPT-2's q/k/v split). The runtime has no sequence values and autodiff no sequence gradients,
// so each such pair becomes one Split (and a Squeeze per piece read when keepdims is 0), named so
// that every SequenceAt output keeps its name and type. A SplitToSequence whose pieces cannot be
// counted from constants and declared shapes, or whose sequence is read any other way, is left
// as it is (the runtime then names it).
#pragma once

#include "passes/pass.h"

namespace ampc {

class SplitSequences : public Pass {
 public:
  absl::string_view Name() const override { return "split-sequences"; }
  absl::StatusOr<PassResult> Run(ModelContext& context) override;
};

}  // namespace ampc
