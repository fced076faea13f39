// The learning rate of training steps (docs/training-design.md, "Learning rate"), all of it but
// the formulas, which kernels/numerics/lr_schedule.h holds for the CPU and CUDA kernels alike:
// - the schedule's JSON (--train-config's "schedule", and the canonical form a compiled model
//   records as metadata ampc.lr_schedule; docs/training.md, "LR schedules");
// - the rate a training model trains at: its base rate and schedule, from --lr and its metadata;
// - the LearningRate node (kRuntimeDomain, runtime/core/kernel_registry.h) that evaluates the
// schedule on the
//   backend at the step counter the backend holds, so a schedule that skipped steps do not
//   advance needs no read-back of the counter before each step. It never changes the model a
//   TrainingSession saves.
#pragma once

#include <onnx/onnx_pb.h>

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/numerics/lr_schedule.h"

namespace ampc {

// The learning rate of every step: `base` shaped by `schedule` at ampc.step (optimizer steps
// applied), computed on the backend where the model holds that counter.
struct ScheduledRate {
  double base = 0;
  LrSchedule schedule;
};

// ---- The schedule as JSON ----

// The schedule of a JSON object {"type": ..., ...}. Errors are InvalidArgument
// "WHERE.key: what is wrong" (`where` names the object, e.g. "cfg.json: schedule").
absl::StatusOr<LrSchedule> LrScheduleFromJson(const nlohmann::json& json, const std::string& where);

// The canonical JSON of `schedule` (every key of its type), which LrScheduleFromJson reads back.
std::string LrScheduleJson(const LrSchedule& schedule);

// ---- The rate a training model trains at ----

// The base rate when neither the command line nor the model gives one (--lr's default).
inline constexpr double kDefaultBaseRate = 0.01;

// The base rate, in float as the step computes: `given` (--lr) when set, else the model's
// metadata ampc.lr (the --lr given at compile time), else kDefaultBaseRate.
absl::StatusOr<float> BaseRate(const onnx::ModelProto& model, std::optional<double> given);

// The model's schedule (metadata ampc.lr_schedule; constant without it), which may not decay
// below `base`.
absl::StatusOr<LrSchedule> ModelSchedule(const onnx::ModelProto& model, float base);

// ---- The LearningRate node ----

// The input that replaces `ampc.lr`: kRateWords doubles, EncodeLearningRate's base rate and
// schedule.
inline constexpr char kScheduleInput[] = "ampc.lr.schedule";

// Where a training step's graph reads its learning rate as a float scalar input `ampc.lr` (and
// the state holds `ampc.step`, an int64 scalar, which the caller checks): that input becomes
// kScheduleInput, in the same place; a first node LearningRate(kScheduleInput, ampc.step) ->
// ampc.lr computes the rate, which is also added as the graph's last output (the rate each step
// ran at). Returns false, changing nothing, where the graph has no such input.
bool InsertLearningRateNode(onnx::GraphProto& graph);

}  // namespace ampc
