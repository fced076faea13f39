// insert-casts: applies autocast's plan. Each value gets at most one Cast per target dtype, placed
// right after its producer and shared by every consumer; constants are converted at compile time
// instead (one copy per dtype). Graph outputs and control-flow bodies keep their declared types.
#pragma once

#include "passes/pass.h"

namespace ampc {

class InsertCasts : public Pass {
 public:
  absl::string_view Name() const override { return "insert-casts"; }
  absl::StatusOr<bool> Run(ModelContext& context) override;
};

}  // namespace ampc
