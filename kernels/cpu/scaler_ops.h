// The ai.ampc loss-scaling family (CheckFinite, UpdateScale, UnscaleClip, SGD, Adam): the node
// checks every backend's kernels share, so each backend accepts the same nodes with the same
// messages. Defined in scaler_ops.cc.
#pragma once

#include <initializer_list>

#include "absl/status/status.h"
#include "runtime/kernel.h"
#include "runtime/kernel_registry.h"

namespace ampc::scaler_ops {

// One backend's kernel functions of the family.
struct ScalerKernels {
  KernelFunction check_finite, update_scale, unscale_clip, sgd, adam;
};

// Registers `kernels` for `backend` in domain ai.ampc, and kernels.sgd and kernels.adam also as
// the runtime's MultiSGD and MultiAdam (runtime/optimizer_fusion.h), which they must handle; each
// node's arity and input types are checked once, when a session is created.
void Register(KernelRegistry& registry, const char* backend, const ScalerKernels& kernels);

// Input i must hold one element (a scale, a flag, a learning rate, a step).
absl::Status ExpectScalar(const KernelContext& context, int i);

// Optimizer inputs `others` must have the shape of the parameter (input `param`).
absl::Status ExpectParamShape(const KernelContext& context, std::initializer_list<int> others,
                              int param = 3);

}  // namespace ampc::scaler_ops
