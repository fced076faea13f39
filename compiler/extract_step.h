// `ampc extract-step MODEL -o STEP [--with-state]`: the training step of a compiled training model
// (docs/training-design.md) as a standalone ONNX model that any ONNX runtime can run.
//
// - Graph: training_info[0].algorithm's nodes, its own initializers and value_info; the model's
//   opset imports and model-local functions (the ai.ampc op bodies); metadata kept (ampc.lr).
// - Inputs: the algorithm's (data inputs, ampc.lr), then the state: every update_binding key
//   (parameters, optimizer and scaler state, BatchNormalization running statistics) in binding
//   order, then whatever else the algorithm reads from `graph`'s initializers or the
//   initialization's outputs (frozen parameters, constants), in `graph` order then initialization
//   order.
// - Outputs: the algorithm's (the loss, ampc.applied, ampc.grad_norm, `<state>.ampc.next` for
//   each update_binding key): feeding each `<state>.ampc.next` back as `<state>` runs the next
//   step.
// - With --with-state every state input also gets its current value as an initializer (ONNX:
//   an input with a default): the parameters from `graph`, the rest by running the initialization
//   graph on ampc's CPU runtime. One step then needs only the data inputs and ampc.lr.
// The result passes ONNX's checker and strict type inference (the verify pass) before it is
// returned.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ampc {

// The step model of `model`; errors are InvalidArgument, one line naming the value at fault.
absl::StatusOr<onnx::ModelProto> ExtractTrainingStep(const onnx::ModelProto& model,
                                                     bool with_state);

// `args` are the positionals ("extract-step", MODEL); reads -o and --with-state.
absl::Status ExtractStepCommand(const std::vector<std::string>& args);

}  // namespace ampc
