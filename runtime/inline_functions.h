// Ops the backend has no kernel for but that ONNX defines as a function of other ops (Gelu-20,
// Swish-24, RMSNormalization-23...), and calls of model-local functions without a kernel, are
// replaced by their bodies with ONNX's inliner before a session is built (docs/runtime.md).
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "absl/status/status.h"
#include "runtime/core/kernel_registry.h"

namespace ampc {

// Inlines, in the main graph, every call the registry has no `backend` kernel for and whose body
// is known: a model-local function, or a schema function of the pinned ONNX. Call after the
// expansion bound (CheckFunctionExpansion); an op with neither a kernel nor a body is left for the
// registry to name. An error names the op the inliner failed on.
absl::Status InlineFunctionsWithoutKernels(onnx::ModelProto& model, const KernelRegistry& registry,
                                           const std::string& backend);

}  // namespace ampc
