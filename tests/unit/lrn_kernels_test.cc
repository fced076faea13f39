// LRN run through a Session against hand arithmetic from the ONNX definition.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/session.h"
#include "tests/support/kernel_runs.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

using ::testing::FloatNear;
using ::testing::Pointwise;

using testing::RunModel;

// Channels 1, 2, 3. size 2 sums channels c and c + 1; size 3 sums c - 1 to c + 1 (those that
// exist); alpha / size scales the sum.
TEST(LrnTest, SumsTheChannelWindowThatExists) {
  auto out = RunModel(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1, 3, 1, 1] x) => (float[1, 3, 1, 1] y2, float[1, 3, 1, 1] y3) {
  y2 = LRN<size = 2, alpha = 3.0, beta = 1.0, bias = 1.0>(x)
  y3 = LRN<size = 3, alpha = 3.0, beta = 0.5, bias = 1.0>(x)
}
)",
                      {testing::Floats({1, 3, 1, 1}, {1, 2, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  // size 2: sums 5, 13, 9 -> x / (1 + 1.5 * sum).
  EXPECT_THAT(testing::Values<float>((*out)[0]),
              Pointwise(FloatNear(1e-6f), std::vector<float>{1 / 8.5f, 2 / 20.5f, 3 / 14.5f}));
  // size 3: sums 5, 14, 13 -> x / sqrt(1 + sum).
  EXPECT_THAT(
      testing::Values<float>((*out)[1]),
      Pointwise(FloatNear(1e-6f), std::vector<float>{1 / std::sqrt(6.0f), 2 / std::sqrt(15.0f),
                                                     3 / std::sqrt(14.0f)}));
}

}  // namespace
}  // namespace ampc
