// The ai.ampc loss-scaling family (CheckFinite, UpdateScale, UnscaleClip, SGD, Adam): the node
// checks every backend's kernels share, so each backend accepts the same nodes with the same
// messages. Defined in scaler_ops.cc.
#pragma once

#include <initializer_list>

#include "absl/status/status.h"
#include "runtime/core/kernel.h"
#include "runtime/core/kernel_registry.h"

namespace ampc::scaler_ops {

// One backend's kernel functions of the family.
struct ScalerKernels {
  KernelFunction check_finite, update_scale, unscale_clip, sgd, adam;
  // The runtime's CheckUnscaleClip (runtime/optimizer_fusion.h): (scale, g_1..g_n) -> (found,
  // u_1..u_n, norm).
  KernelFunction check_unscale_clip;
  // The runtime's LearningRate (runtime/learning_rate.h): (rate words, ampc.step) -> the step's
  // learning rate (float).
  KernelFunction learning_rate;
};

// Registers `kernels` for `backend` in domain ai.ampc, kernels.sgd and kernels.adam also as the
// runtime's MultiSGD and MultiAdam (runtime/optimizer_fusion.h), which they must handle, and
// kernels.check_unscale_clip as its CheckUnscaleClip
// and kernels.learning_rate as its LearningRate; each node's arity and input types are
// checked once, when a session is created.
void Register(KernelRegistry& registry, const char* backend, const ScalerKernels& kernels);

// LearningRate's inputs hold kRateWords doubles and one step (kernels/numerics/lr_schedule.h).
absl::Status ExpectRateAndStep(const KernelContext& context);

// Input i must hold one element (a scale, a flag, a learning rate, a step).
absl::Status ExpectScalar(const KernelContext& context, int i);

// Optimizer inputs `others` must have the shape of the parameter (input `param`).
absl::Status ExpectParamShape(const KernelContext& context, std::initializer_list<int> others,
                              int param = 3);

}  // namespace ampc::scaler_ops
