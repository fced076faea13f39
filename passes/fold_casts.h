// fold-casts: removes the casts that change nothing or can be paid for at compile time
// (docs/autocast.md, "Casts"), in every graph including control-flow bodies. Runs after
// insert-casts. In node order:
//   - identity: a Cast to the dtype its input is known to have (declared, or a Cast's `to`);
//   - exact round trip: Cast(Cast(X, W), dtype of X) reads X when X -> W is an exact widening
//     (FP16/BF16 -> FP32/FP64, FP32 -> FP64); FP32 -> low -> FP32 is lossy and always stays;
//   - duplicate: a second Cast of a value to the same dtype reads the first;
//   - constant: a Cast between FP32, FP16 and BF16 of an initializer (not a graph input) or of a
//     Constant output becomes a converted initializer.
// Then cast motion: a chain of single-input exact ops (Reshape, Flatten, Transpose, Squeeze,
// Unsqueeze, Slice, Gather, Identity, Relu, MaxPool; their data input only) fed by
// Cast(low -> FP32), whose every reader casts back to that low dtype, runs in the low dtype; the
// casts back become identities and go. Multi-input and multi-output exact ops (Concat, Split,
// Max, Min) are not moved across, nor are nodes pinned to FP32 by --block-node, --block-op or
// an FP32 category: the output keeps the precision the report gives them.
// A cast whose output is a graph output or is read by a subgraph is kept. Casts and Constants
// left without readers are removed; initializers this pass did not create are never removed.
#pragma once

#include "passes/pass.h"

namespace ampc {

class FoldCasts : public Pass {
 public:
  // `training`: --train (the casts in front of master weights are kept).
  explicit FoldCasts(bool training) : training_(training) {}
  absl::string_view Name() const override { return "fold-casts"; }
  absl::StatusOr<PassResult> Run(ModelContext& context) override;

 private:
  const bool training_;
};

}  // namespace ampc
