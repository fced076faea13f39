// The training state of a compiled training model (docs/training-design.md, "The compiled file"):
// the names of its items, their types, and the initialization graph that creates them; the names
// the algorithm takes and gives besides the state, and the model metadata ampc train reads.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "passes/graph/graph_index.h"
#include "passes/graph/name_allocator.h"
#include "passes/training/param_groups.h"

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

// The state items of parameter `p` besides `p` itself: its optimizer's moments (`P.ampc.m` and
// `P.ampc.v`, or `P.ampc.momentum`, or none), and with K > 1 its accumulator `P.ampc.acc`.
std::vector<std::string> MomentNames(const ParamGroup& group, const std::string& p);
std::string AccumulatorName(const std::string& p);

// The algorithm's learning-rate input (a float scalar: the rate of this step, which the trainer
// computes from its schedule) and its outputs besides the loss and the state.
inline constexpr char kLrInput[] = "ampc.lr";
inline constexpr char kApplied[] = "ampc.applied";
inline constexpr char kGradNorm[] = "ampc.grad_norm";

// Model metadata that ampc train reads (the training step records it): the base learning rate
// (--lr), the schedule's canonical JSON and the skip limit (--train-config, when it sets them),
// and K of --accumulate (absent for 1).
inline constexpr char kLrKey[] = "ampc.lr";
inline constexpr char kLrScheduleKey[] = "ampc.lr_schedule";
inline constexpr char kMaxConsecutiveSkipsKey[] = "ampc.max_consecutive_skips";
inline constexpr char kAccumulateKey[] = "ampc.accumulate";

// The value of `model`'s metadata entry `key`, or nullptr.
const std::string* MetadataValue(const onnx::ModelProto& model, const std::string& key);

// One item of the state that is not a parameter, as the initialization creates it.
struct StateItem {
  std::string name;
  int elem_type = onnx::TensorProto::FLOAT;
  std::vector<int64_t> dims;  // {} for a scalar
  double value = 0;           // every element
};

// The state of a step that trains `params` (FP32 values of `index`, one group each) beside the
// parameters, in initialization order: each parameter's moments and accumulator, then the scaler
// state (the scale starts at `init_scale`) and the counters, then the window's with K > 1.
// InvalidArgument for a parameter that is not FP32.
absl::StatusOr<std::vector<StateItem>> StepState(const GraphIndex& index,
                                                 const std::vector<std::string>& params,
                                                 const std::vector<ParamGroup>& groups,
                                                 const TrainingOptions& options, float init_scale);

// Reserves every name of `state` and its `.ampc.next`, and each parameter's `.ampc.next`;
// InvalidArgument naming the first that the model already uses.
absl::Status ReserveStateNames(const std::vector<StateItem>& state,
                               const std::vector<std::string>& params, NameAllocator& names);

// The dims of a tensor type whose shape is static.
std::vector<int64_t> StaticDims(const onnx::TypeProto& type);

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
