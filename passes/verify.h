// verify: the output gate. ONNX's checker plus strict type inference on a copy of the model; a
// failure here means an ampc pass produced an invalid model, and is reported as ampc's bug.
#pragma once

#include "passes/pass.h"

namespace ampc {

class Verify : public Pass {
 public:
  absl::string_view Name() const override { return "verify"; }
  absl::StatusOr<PassResult> Run(ModelContext& context) override;
};

}  // namespace ampc
