// Learning-rate schedules of `ampc train` (docs/training.md, "LR schedules"): set by
// --train-config's "schedule", recorded in the compiled model as metadata ampc.lr_schedule, and
// evaluated at ampc.step (optimizer steps applied; a skipped step does not advance them) by the
// runtime's LearningRate node on the backend (runtime/lr_schedule.h has the formula). This file
// reads and writes them as JSON.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "compiler/json_file.h"
#include "runtime/lr_schedule.h"  // LrSchedule, ScheduledLearningRate

namespace ampc {

// The schedule of a JSON object {"type": ..., ...}. Errors are InvalidArgument
// "WHERE.key: what is wrong" (`where` names the object, e.g. "cfg.json: schedule").
absl::StatusOr<LrSchedule> LrScheduleFromJson(const Json& json, const std::string& where);

// The canonical JSON of `schedule` (every key of its type), which LrScheduleFromJson reads back.
std::string LrScheduleJson(const LrSchedule& schedule);

}  // namespace ampc
