// upgrade-opset: converts the model's default-domain opset with ONNX's version converter when
// asked (--target-opset N) or needed (--train below kTrainingMinimumOpset: the training step's
// functions are written against it; CastLike is opset 15, the bodies are checked at 17). Only
// upgrades, only from kOldestConvertedOpset on (below it the converter changes what some ops
// compute: Hardmax-11, Upsample and Resize with linear modes), and not through model-local
// functions, which the converter cannot follow. Nodes of other domains are kept as they are. The
// IR version is raised to the first one that carries the new opset. Otherwise a no-op.
#pragma once

#include <cstdint>

#include "passes/pass.h"

namespace ampc {

inline constexpr int kTrainingMinimumOpset = 17;
inline constexpr int kOldestConvertedOpset = 13;

// The first IR version of the ONNX release that introduced default-domain opset `opset`.
int64_t MinimumIrVersion(int64_t opset);

class UpgradeOpset : public Pass {
 public:
  // `target_opset`: --target-opset (0: none asked); `training`: --train, which needs opset 17.
  UpgradeOpset(int target_opset, bool training)
      : target_opset_(target_opset), training_(training) {}
  absl::string_view Name() const override { return "upgrade-opset"; }
  // --train's conversion warns, naming both opsets (--target-opset's is in the summary line).
  // An error names the file, the opsets and what the converter said.
  absl::StatusOr<PassResult> Run(ModelContext& context) override;

 private:
  const int target_opset_;
  const bool training_;
};

}  // namespace ampc
