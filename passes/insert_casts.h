// insert-casts: applies autocast's plan. Each value gets at most one Cast per target dtype, placed
// right after its producer and shared by every consumer; constants are converted at compile time
// instead (one copy per dtype). Graph outputs and control-flow bodies keep their declared types.
#pragma once

#include "passes/pass.h"

namespace ampc {

class InsertCasts : public Pass {
 public:
  // `training`: --train (FP32 initializers stay FP32 master weights, read through casts).
  explicit InsertCasts(bool training) : training_(training) {}
  absl::string_view Name() const override { return "insert-casts"; }
  absl::StatusOr<PassResult> Run(ModelContext& context) override;

 private:
  const bool training_;
};

}  // namespace ampc
