// autocast: assigns every node a compute dtype (FP16/BF16 or FP32) by the rules of
// docs/autocast.md and records why; insert-casts applies the plan. Reads types from value_info,
// so infer-types runs first.
#pragma once

#include "passes/pass.h"

namespace ampc {

class Autocast : public Pass {
 public:
  // `training`: --train (every float initializer is a weight the step updates).
  Autocast(AutocastOptions options, bool training)
      : options_(std::move(options)), training_(training) {}
  absl::string_view Name() const override { return "autocast"; }
  absl::StatusOr<PassResult> Run(ModelContext& context) override;

 private:
  const AutocastOptions options_;
  const bool training_;
};

}  // namespace ampc
