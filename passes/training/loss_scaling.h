// Loss scaling in the training step (docs/training-design.md, "The step", 3.-7.; docs/
// loss-scaling.md): the scaler's mode, the finite check of the (window's) gradients, the scale
// update, the unscale and clip, the decision to skip the optimizer, and the counters.
#pragma once

#include <string>
#include <vector>

#include "passes/training/gradients.h"
#include "passes/training/step_writer.h"
#include "passes/training/training_options.h"

namespace ampc {

struct Scaling {
  bool dynamic;
  float init_scale;
};

// --loss-scale, where kDefault is dynamic for FP16 (`low_dtype`) and none otherwise.
Scaling ScalingOf(const TrainingOptions& options, int low_dtype);

// What the check and the unscale give the optimizer.
struct Unscaled {
  std::string found;               // true when a gradient of the window is inf or NaN
  std::vector<std::string> grads;  // FP32, unscaled and clipped, one per parameter
  std::string norm;                // their global L2 norm before clipping
};

// 3.-5. found = CheckFinite(window's gradients); UpdateScale (taking effect at a window's end
// only); UnscaleClip with --clip-grad-norm. `params` name the unscaled gradients.
Unscaled EmitCheckAndUnscale(StepWriter& w, const TrainingOptions& options, const Scaling& scaling,
                             const Window& window, const std::vector<std::string>& params);

// Whether the optimizer skips this step.
struct Skip {
  std::string failed;  // a non-finite gradient or loss in the window
  std::string skip;    // failed, or inside a window
};

// 6. The skip flag, and the outputs ampc.applied (= not skip) and ampc.grad_norm (0 if skipped).
Skip EmitSkip(StepWriter& w, const Window& window, const Unscaled& unscaled);

// 7. The counters: a window that ends with a non-finite gradient or loss is one skipped step.
void EmitCounters(StepWriter& w, const Window& window, const std::string& failed);

}  // namespace ampc
