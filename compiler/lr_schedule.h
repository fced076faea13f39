// Learning-rate schedules of `ampc train` (docs/training.md, "LR schedules"): set by
// --train-config's "schedule", recorded in the compiled model as metadata ampc.lr_schedule, and
// evaluated by the trainer at ampc.step (optimizer steps applied), so a skipped step does not
// advance them.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "compiler/json_file.h"

namespace ampc {

struct LrSchedule {
  enum class Type { kConstant, kLinearWarmup, kCosine };
  Type type = Type::kConstant;
  int64_t warmup_steps = 0;  // kLinearWarmup (>= 1), kCosine (>= 0)
  int64_t total_steps = 0;   // kCosine: > warmup_steps
  double min_lr = 0;         // kCosine: the rate the cosine decays to
};

// The schedule of a JSON object {"type": ..., ...}. Errors are InvalidArgument
// "WHERE.key: what is wrong" (`where` names the object, e.g. "cfg.json: schedule").
absl::StatusOr<LrSchedule> LrScheduleFromJson(const Json& json, const std::string& where);

// The canonical JSON of `schedule` (every key of its type), which LrScheduleFromJson reads back.
std::string LrScheduleJson(const LrSchedule& schedule);

// The learning rate of the step after `applied_steps` applied optimizer steps, from the base
// rate `base` (docs/training.md gives the formulas).
double ScheduledLearningRate(const LrSchedule& schedule, double base, int64_t applied_steps);

}  // namespace ampc
