// The ai.ampc operator set (version 1) of training graphs (docs/training-design.md): OpSchemas so
// ONNX's checker and shape inference accept the ops, and FunctionProto bodies in standard ONNX ops
// so a compiled model can carry them as model-local functions for other runtimes.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ampc {

inline constexpr char kAmpcDomain[] = "ai.ampc";
inline constexpr int kAmpcOpsetVersion = 1;

// Makes libonnx know the ai.ampc domain (version kAmpcOpsetVersion); idempotent.
void RegisterAmpcDomain();

// Registers the domain and every ai.ampc schema with libonnx, and inference-only schemas of
// onnxruntime's common com.microsoft ops (microsoft_schemas.cc). Idempotent and thread-safe; call
// it before onnx::checker or shape inference sees an ai.ampc or com.microsoft node.
void RegisterAmpcSchemas();

// The body of ai.ampc `op` for a node with `num_inputs` inputs and `num_outputs` outputs (the
// variadic ops and SGD's optional momentum buffer make the body depend on the arity), in standard
// ops of `onnx_opset` (>= 13). Hyper-parameters are read through attribute references (@name), so
// one body serves every node of the op with that arity; IR 8 functions have no attribute
// defaults, so a node calling the function must state every attribute the body declares.
// NotFound for an op without a body; InvalidArgument for an arity the op does not take.
absl::StatusOr<onnx::FunctionProto> AmpcFunctionBody(const std::string& op, int num_inputs,
                                                     int num_outputs, int onnx_opset = 17);

// One model-local function per ai.ampc op the graph's nodes use (top level), sorted by name.
// InvalidArgument naming the node when two nodes of one op differ in arity (one function per op
// name) or a node omits an attribute its body reads.
absl::StatusOr<std::vector<onnx::FunctionProto>> AmpcFunctionBodies(const onnx::GraphProto& graph,
                                                                    int onnx_opset = 17);

}  // namespace ampc
