// The training state of a compiled training model (docs/training-design.md, "The compiled file"):
// the names of its items, their types, and the initialization graph that creates them.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"

namespace ampc {

// `<state>.ampc.next`: the algorithm output that update_binding moves into `<state>`.
std::string NextName(const std::string& state);

// Scaler state and counters, in the order the initialization lists them.
inline constexpr char kScale[] = "ampc.scale";
inline constexpr char kGrowthTracker[] = "ampc.growth_tracker";
inline constexpr char kHysteresisLeft[] = "ampc.hysteresis_left";
inline constexpr char kStep[] = "ampc.step";
inline constexpr char kSkippedSteps[] = "ampc.skipped_steps";
inline constexpr char kConsecutiveSkips[] = "ampc.consecutive_skips";
inline constexpr char kNonfiniteLossSteps[] = "ampc.nonfinite_loss_steps";
// With --accumulate K > 1: micro-batches run in the current window, and whether a loss in it was
// non-finite (per parameter P, `P.ampc.acc` holds the window's sum of scaled gradients).
inline constexpr char kMicroStep[] = "ampc.micro_step";
inline constexpr char kWindowLossBad[] = "ampc.window_loss_bad";
inline constexpr char kLearningRate[] = "ampc.lr";
// Model metadata: K of --accumulate (absent for 1).
inline constexpr char kAccumulateKey[] = "ampc.accumulate";
inline constexpr char kApplied[] = "ampc.applied";
inline constexpr char kGradNorm[] = "ampc.grad_norm";

// One item of the state that is not a parameter, as the initialization creates it.
struct StateItem {
  std::string name;
  int elem_type = onnx::TensorProto::FLOAT;
  std::vector<int64_t> dims;  // {} for a scalar
  double value = 0;           // every element
};

// A graph without inputs whose outputs are `items`, each filled with its value (moments through
// ConstantOfShape, so the file does not hold a copy of every parameter's size in zeros).
onnx::GraphProto BuildInitialization(const std::vector<StateItem>& items);

// The names a model's training steps update or read (update_binding keys, algorithm node
// inputs): initializers of `graph` among them stay FP32 and are read through Casts by the
// inference graph, never replaced by converted copies (insert-casts, fold-casts).
absl::flat_hash_set<std::string> TrainingReads(const onnx::ModelProto& model);

// The initializers insert-casts and fold-casts must keep FP32 and read through Casts:
// TrainingReads, and every FP32 initializer of `graph` when a training step will be built from
// the mixed-precision graph (`training_step_follows`, --train): the step's autodiff then
// differentiates through those Casts and the optimizer updates the FP32 master weights.
absl::flat_hash_set<std::string> MasterWeights(const onnx::ModelProto& model,
                                               bool training_step_follows);

// A value_info of a tensor type.
onnx::ValueInfoProto TensorValue(const std::string& name, int elem_type,
                                 const std::vector<int64_t>& dims);

}  // namespace ampc
