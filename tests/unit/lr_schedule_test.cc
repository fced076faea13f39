// LR schedules against values computed by hand from docs/training.md's formulas (the expected
// numbers are literals: cos(pi/4) = 0.70710678...), and the canonical JSON read back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "runtime/learning_rate.h"

namespace ampc {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

LrSchedule Parse(const std::string& text) {
  absl::StatusOr<LrSchedule> schedule = LrScheduleFromJson(Json::parse(text), "schedule");
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  return schedule.ok() ? *schedule : LrSchedule{};
}

TEST(LrScheduleTest, ConstantIsTheBaseRateAtEveryStep) {
  const LrSchedule constant = Parse(R"({"type": "constant"})");
  for (int64_t step : {0, 1, 7, 100000}) EXPECT_EQ(ScheduledLearningRate(constant, 0.1, step), 0.1);
}

TEST(LrScheduleTest, LinearWarmupRisesByBaseOverWarmupThenStays) {
  const LrSchedule warmup = Parse(R"({"type": "linear_warmup", "warmup_steps": 4})");
  const double want[] = {0.025, 0.05, 0.075, 0.1, 0.1, 0.1};  // 0.1 * (step + 1) / 4, then 0.1
  for (int step = 0; step < 6; ++step) {
    EXPECT_NEAR(ScheduledLearningRate(warmup, 0.1, step), want[step], 1e-15) << "step " << step;
  }
}

TEST(LrScheduleTest, CosineWithoutWarmupFallsFromBaseToMinLr) {
  const LrSchedule cosine = Parse(R"({"type": "cosine", "total_steps": 4})");
  // (1 + cos(pi * step / 4)) / 2 at steps 0..4, then 0 (min_lr) for good.
  const double want[] = {1.0, 0.8535533905932737, 0.5, 0.1464466094067262, 0.0, 0.0, 0.0};
  for (int step = 0; step < 7; ++step) {
    EXPECT_NEAR(ScheduledLearningRate(cosine, 1.0, step), want[step], 1e-15) << "step " << step;
  }
}

TEST(LrScheduleTest, CosineWithWarmupAndMinLr) {
  const LrSchedule cosine =
      Parse(R"({"type": "cosine", "warmup_steps": 2, "total_steps": 6, "min_lr": 0.02})");
  // Warm-up 0.2 * 1/2, 0.2 * 2/2; then 0.02 + 0.18 * (1 + cos(pi * t / 4)) / 2 for t = 0..4.
  const double want[] = {
      0.1,  0.2, 0.2, 0.02 + 0.18 * 0.8535533905932737, 0.11, 0.02 + 0.18 * 0.1464466094067262,
      0.02, 0.02};
  for (int step = 0; step < 8; ++step) {
    EXPECT_NEAR(ScheduledLearningRate(cosine, 0.2, step), want[step], 1e-15) << "step " << step;
  }
  EXPECT_NEAR(ScheduledLearningRate(cosine, 0.2, 1000000), 0.02, 1e-15);
}

TEST(LrScheduleTest, CanonicalJsonReadsBackAsTheSameSchedule) {
  const LrSchedule cosine =
      Parse(R"({"min_lr": 0.5, "warmup_steps": 3, "type": "cosine", "total_steps": 9})");
  const std::string json = LrScheduleJson(cosine);
  EXPECT_EQ(json, R"({"min_lr":0.5,"total_steps":9,"type":"cosine","warmup_steps":3})");
  const LrSchedule back = Parse(json);
  EXPECT_EQ(back.type, LrSchedule::Type::kCosine);
  EXPECT_EQ(back.warmup_steps, 3);
  EXPECT_EQ(back.total_steps, 9);
  EXPECT_EQ(back.min_lr, 0.5);
  EXPECT_EQ(LrScheduleJson(Parse(R"({"type": "linear_warmup", "warmup_steps": 5})")),
            R"({"type":"linear_warmup","warmup_steps":5})");
  EXPECT_EQ(LrScheduleJson(LrSchedule{}), R"({"type":"constant"})");
}

TEST(LrScheduleTest, ErrorsNameWhere) {
  absl::StatusOr<LrSchedule> bad =
      LrScheduleFromJson(Json::parse(R"({"type": "cosine", "total_steps": -3})"), "metadata x");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "metadata x.total_steps: expected an integer >= 1, got number -3");
  bad = LrScheduleFromJson(Json::parse(R"({"type": "linear_warmup", "warmup_steps": 1e3})"), "s");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("s.warmup_steps: expected an integer >= 1"));
}

}  // namespace
}  // namespace ampc
