// Learning-rate schedules (docs/training.md, "LR schedules"): the rate of a step as a function of
// ampc.step, the optimizer steps applied so far, so a skipped step does not advance the schedule.
// This header holds the formulas only, plain C++ that the CPU kernel and the CUDA kernel compile
// alike (AMPC_HD); everything else about the learning rate (the schedule's JSON, the rate a model
// trains at, the LearningRate node that evaluates it on the backend) is runtime/learning_rate.h.
#ifndef AMPC_KERNELS_NUMERICS_LR_SCHEDULE_H_
#define AMPC_KERNELS_NUMERICS_LR_SCHEDULE_H_

#include <math.h>

#include <cstdint>

#include "kernels/numerics/host_device.h"
#include "kernels/numerics/num.h"

namespace ampc {

struct LrSchedule {
  enum class Type { kConstant, kLinearWarmup, kCosine };
  Type type = Type::kConstant;
  int64_t warmup_steps = 0;  // kLinearWarmup (>= 1), kCosine (>= 0)
  int64_t total_steps = 0;   // kCosine: > warmup_steps
  double min_lr = 0;         // kCosine: the rate the cosine decays to
};

// The learning rate of the step after `applied_steps` applied optimizer steps, from the base
// rate `base`, in double (docs/training.md gives the formulas). Each operation is rounded on its
// own on the device too (num.h), so the CPU and the GPU differ only where their cos does.
AMPC_HD inline double ScheduledLearningRate(const LrSchedule& schedule, double base,
                                            int64_t applied_steps) {
  using cuda::Divide;
  if (schedule.type == LrSchedule::Type::kConstant) return base;
  const int64_t step = applied_steps > 0 ? applied_steps : 0;
  if (step < schedule.warmup_steps) {
    return Divide(cuda::Multiply(base, static_cast<double>(step + 1)),
                  static_cast<double>(schedule.warmup_steps));
  }
  if (schedule.type == LrSchedule::Type::kLinearWarmup) return base;
  const double span = static_cast<double>(schedule.total_steps - schedule.warmup_steps);
  const double since = static_cast<double>(step - schedule.warmup_steps);
  const double t = since < span ? since : span;
  constexpr double kPi = 3.141592653589793238462643383279502884;
  const double wave = cuda::Add(1.0, cos(Divide(cuda::Multiply(kPi, t), span)));
  return cuda::Add(schedule.min_lr,
                   Divide(cuda::Multiply(cuda::Subtract(base, schedule.min_lr), wave), 2.0));
}

// The LearningRate node's `rate` input: the base rate and the schedule as kRateWords doubles
// (step counts below 2^53 are exact).
inline constexpr int kRateWords = 5;

inline void EncodeLearningRate(const LrSchedule& schedule, double base, double* words) {
  words[0] = base;
  words[1] = static_cast<double>(static_cast<int>(schedule.type));
  words[2] = static_cast<double>(schedule.warmup_steps);
  words[3] = static_cast<double>(schedule.total_steps);
  words[4] = schedule.min_lr;
}

// The rate of EncodeLearningRate's `words` at `applied_steps`, rounded to float.
AMPC_HD inline float DecodedLearningRate(const double* words, int64_t applied_steps) {
  LrSchedule schedule;
  schedule.type = static_cast<LrSchedule::Type>(static_cast<int>(words[1]));
  schedule.warmup_steps = static_cast<int64_t>(words[2]);
  schedule.total_steps = static_cast<int64_t>(words[3]);
  schedule.min_lr = words[4];
  return static_cast<float>(ScheduledLearningRate(schedule, words[0], applied_steps));
}

}  // namespace ampc

#endif  // AMPC_KERNELS_NUMERICS_LR_SCHEDULE_H_
