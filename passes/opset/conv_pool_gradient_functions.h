// Function bodies (standard ONNX ops) of ai.ampc.ConvGrad and ai.ampc.AveragePoolGrad, for
// GradientFunctionBody (passes/opset/gradient_ops.h); checked against the CPU kernels
// (kernels/cpu/grad_conv.h, grad_pool.h) in tests/unit/grad_ops_nn_test.cc.
#pragma once

#include <onnx/onnx_pb.h>

#include "passes/opset/function_text.h"

namespace ampc {

// Structure from the node's auto_pad and which of strides, dilations, group and pads it states.
FunctionText ConvGradBody(const onnx::NodeProto& node);

// Structure from the node's auto_pad and which of strides, pads and count_include_pad it states.
FunctionText AveragePoolGradBody(const onnx::NodeProto& node);

}  // namespace ampc
