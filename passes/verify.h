// verify: the output gate; a failure here means an ampc pass produced an invalid model, and is
// reported as ampc's bug. Full: ONNX's check_model plus strict type inference on the whole
// model. Otherwise, where infer-types left a snapshot and the model has no subgraphs, functions
// or training_info: the same checks on what changed since (verify_changes.h), in linear time.
#pragma once

#include "passes/pass.h"

namespace ampc {

class Verify : public Pass {
 public:
  explicit Verify(bool full = false) : full_(full) {}
  absl::string_view Name() const override { return "verify"; }
  absl::StatusOr<PassResult> Run(ModelContext& context) override;

 private:
  bool full_;
};

}  // namespace ampc
