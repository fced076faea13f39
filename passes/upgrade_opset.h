// upgrade-opset: with --train, a model whose default-domain opset is below
// kTrainingMinimumOpset is converted to that opset by ONNX's version converter: the training
// step's functions are written against it (CastLike is opset 15; the bodies are checked at 17).
// Only from kOldestConvertedOpset on, and only models of default-domain ops: below it ONNX
// 1.12's converter changes what some ops compute (Hardmax-11, Upsample and Resize with linear
// modes) or writes invalid nodes (Reshape-4), and it cannot follow model-local functions or
// custom domains. Such models are refused with a request to re-export them. Models at
// kTrainingMinimumOpset, and compiles without --train, are left as they are.
#pragma once

#include "passes/pass.h"

namespace ampc {

inline constexpr int kTrainingMinimumOpset = 17;
inline constexpr int kOldestConvertedOpset = 13;

class UpgradeOpset : public Pass {
 public:
  absl::string_view Name() const override { return "upgrade-opset"; }
  // Warns (naming both opsets) when it converts. An error names the file, the opset and what
  // the converter said.
  absl::StatusOr<bool> Run(ModelContext& context) override;
};

}  // namespace ampc
