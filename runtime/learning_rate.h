// The learning rate of a training step computed on the backend: a LearningRate node of
// kRuntimeDomain (conv_fusion.h) evaluates the schedule (runtime/lr_schedule.h) at the step
// counter the backend holds, so a schedule that skipped steps do not advance needs no read-back
// of the counter before each step. Never changes the model a TrainingSession saves.
#pragma once

#include <onnx/onnx_pb.h>

namespace ampc {

// The input that replaces `ampc.lr`: kRateWords doubles, EncodeLearningRate's base rate and
// schedule.
inline constexpr char kRateInput[] = "ampc.lr.schedule";

// Where a training step's graph reads its learning rate as a float scalar input `ampc.lr` (and
// the state holds `ampc.step`, an int64 scalar, which the caller checks): that input becomes
// kRateInput, in the same place; a first node LearningRate(kRateInput, ampc.step) -> ampc.lr
// computes the rate, which is also added as the graph's last output (the rate each step ran at).
// Returns false, changing nothing, where the graph has no such input.
bool ComputeLearningRate(onnx::GraphProto& graph);

}  // namespace ampc
