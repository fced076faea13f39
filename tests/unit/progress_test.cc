#include "compiler/progress.h"

#include "gtest/gtest.h"

namespace ampc {
namespace {

TEST(ProgressTest, TextCountsTensorsBytesRateAndTimeLeft) {
  // 24 GB to go at 1.5 GB/s.
  EXPECT_EQ(ProgressText(12, 291, 3'000'000'000, 27'000'000'000, 1.5e9),
            "ampc: weights 12/291 tensors, 3.0/27.0 GB, 1.50 GB/s, 16 s left");
}

TEST(ProgressTest, NoRateOrTimeLeftBeforeThereIsARate) {
  EXPECT_EQ(ProgressText(0, 7, 0, 5'000'000'000, 0), "ampc: weights 0/7 tensors, 0.0/5.0 GB");
}

TEST(ProgressTest, CountsStopAtTheTotals) {
  // A tensor converted to two dtypes counts twice; the line never shows more than the model.
  EXPECT_EQ(ProgressText(9, 7, 6'000'000'000, 5'000'000'000, 2.5e9),
            "ampc: weights 7/7 tensors, 5.0/5.0 GB, 2.50 GB/s, 0 s left");
}

}  // namespace
}  // namespace ampc
