// upgrade-opset: with --train, a model whose default-domain opset is below
// kTrainingMinimumOpset is converted to that opset by ONNX's version converter: the training
// step's functions are written against it (CastLike is opset 15; the bodies are checked at 17).
// Models at that opset, and compiles without --train, are left as they are.
#pragma once

#include "passes/pass.h"

namespace ampc {

inline constexpr int kTrainingMinimumOpset = 17;

class UpgradeOpset : public Pass {
 public:
  absl::string_view Name() const override { return "upgrade-opset"; }
  // Warns (naming both opsets) when it converts. An error names the file, the opset and what
  // the converter said.
  absl::StatusOr<bool> Run(ModelContext& context) override;
};

}  // namespace ampc
