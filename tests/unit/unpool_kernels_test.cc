// MaxUnpool run through a Session against hand-placed values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using testing::Floats;
using testing::Int64s;

using testing::RunModel;

constexpr char kUnpool2d[] = R"(
<ir_version: 8, opset_import: ["" : 11]>
g (float[1, 1, 1, 2] x, int64[1, 1, 1, 2] i, int64[4] s) => (float[1, 1, 3, 5] y) {
  y = MaxUnpool<kernel_shape = [2, 2], strides = [2, 2]>(x, i, s)
}
)";

// Inferred shape [1, 1, 2, 4]: index 1 is (0, 1), index 6 is (1, 2); the [3, 5] output holds them
// at the same rows and columns (offsets 1 and 7), zeros elsewhere.
TEST(MaxUnpoolTest, IndicesAddressTheInferredShapeInsideOutputShape) {
  auto out = RunModel(kUnpool2d, {Floats({1, 1, 1, 2}, {7, 8}), Int64s({1, 1, 1, 2}, {1, 6}),
                                  Int64s({4}, {1, 1, 3, 5})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(testing::Values<float>((*out)[0]),
              ElementsAre(0, 7, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0));
}

TEST(MaxUnpoolTest, WithoutOutputShapeUsesTheInferredShape) {
  auto out = RunModel(R"(
<ir_version: 8, opset_import: ["" : 11]>
g (float[1, 1, 2] x, int64[1, 1, 2] i) => (float[1, 1, 4] y) {
  y = MaxUnpool<kernel_shape = [2], strides = [2]>(x, i)
}
)",
                      {Floats({1, 1, 2}, {5, 6}), Int64s({1, 1, 2}, {1, 2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(testing::Values<float>((*out)[0]), ElementsAre(0, 5, 6, 0));
}

TEST(MaxUnpoolTest, IndexOutsideTheInferredShapeIsAnError) {
  auto out = RunModel(kUnpool2d, {Floats({1, 1, 1, 2}, {7, 8}), Int64s({1, 1, 1, 2}, {1, 8}),
                                  Int64s({4}, {1, 1, 3, 5})});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("index 8 is outside"));
}

}  // namespace
}  // namespace ampc
