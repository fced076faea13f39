// Inference-only rewrites of a Session's graph that let Conv do the work of the nodes after it:
// a BatchNormalization in inference form folded into the Conv's weights and bias, and a Relu
// applied by the Conv as it writes its output (FusedConv). As onnxruntime does; never for a
// TrainingSession, whose parameters change every step.
#pragma once

#include <onnx/onnx_pb.h>

#include "runtime/core/graph_executor.h"

namespace ampc {

// Rewrites FP32 Conv -> BatchNormalization (inference form) into one Conv with
// W' = W * scale / sqrt(var + eps) and B' = (B - mean) * scale / sqrt(var + eps) + bias (computed
// in double, rounded once to float), and FP32 Conv -> Relu into FusedConv <activation = "Relu">
// of kRuntimeDomain. Only where the Conv's output has no other reader, and, for the folding, W,
// B and the four statistics are FP32 initializers that no graph input overrides. `types` are the
// graph's value types. Returns the number of nodes removed.
int FuseConvs(onnx::GraphProto& graph, const TypeMap& types);

}  // namespace ampc
