// autocast: assigns every node a compute dtype (FP16/BF16 or FP32) by the rules of
// docs/autocast.md and records why; insert-casts applies the plan. Reads types from value_info,
// so infer-types runs first.
#pragma once

#include "passes/pass.h"

namespace ampc {

class Autocast : public Pass {
 public:
  absl::string_view Name() const override { return "autocast"; }
  absl::StatusOr<bool> Run(ModelContext& context) override;
};

}  // namespace ampc
