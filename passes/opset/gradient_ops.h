// The ai.ampc gradient ops (docs/training-design.md, "Gradient ops"): their OpSchemas and their
// FunctionProto bodies in standard ONNX ops. The CPU kernels are kernels/cpu/grad_kernels.cc.
#pragma once

#include <onnx/onnx_pb.h>

#include "absl/status/statusor.h"

namespace ampc {

// Registers the gradient ops' schemas with libonnx (and the ai.ampc domain if it is not yet);
// idempotent, called by RegisterAmpcSchemas() (passes/opset/training_ops.h).
void RegisterGradientOpSchemas();

// The body of the gradient op `node` (domain ai.ampc) in standard ops of `onnx_opset` (>= 16).
// Hyper-parameters are attribute references (@axis, @ignore_index, @strides, ...), so nodes that
// differ only in them share the body; what changes the body's structure is fixed from `node`: its
// arity (SoftmaxCrossEntropyLossGrad's weights), SoftmaxCrossEntropyLossGrad's `reduction`,
// ConvGrad's and AveragePoolGrad's `auto_pad`, and which of strides, pads and count_include_pad
// an AveragePoolGrad states (the ones it leaves out are ONNX's defaults in the body). A node
// calling the function states every attribute the body reads as a value (IR 8: no defaults);
// ConvGrad's attributes only pass on to Conv and ConvTranspose, whose defaults are Conv's, so it
// may leave any of them out. NotFound for an op without a body. With `in_fp32`, ConvGrad's and
// AveragePoolGrad's bodies cast their inputs to FP32 and their results back (CastLike): for BF16
// nodes, since the Conv and ConvTranspose they call have no bfloat16 before opset 22.
absl::StatusOr<onnx::FunctionProto> GradientFunctionBody(const onnx::NodeProto& node,
                                                         int onnx_opset = 17, bool in_fp32 = false);

}  // namespace ampc
