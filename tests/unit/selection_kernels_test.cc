// Unique and NonMaxSuppression on the CPU. Expected values are worked out by hand in the comments
// (Unique's also match numpy.unique with return_index, return_inverse and return_counts).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
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

using testing::Floats;
using testing::Int64s;
using testing::Make;
using testing::Values;

using ::testing::ElementsAre;

class SelectionKernelsTest : public testing::KernelTest {};

constexpr char kUniqueModel[] = R"(
<ir_version: 8, opset_import: ["" : 11]>
g (float[6] x) => (float[?] y, int64[?] indices, int64[?] inverse, int64[?] counts) {
  y, indices, inverse, counts = Unique<sorted = SORTED>(x)
}
)";

std::string UniqueModel(int sorted) {
  std::string text = kUniqueModel;
  text.replace(text.find("SORTED"), 6, std::to_string(sorted));
  return text;
}

TEST_F(SelectionKernelsTest, UniqueSortedGivesFirstIndicesInverseAndCounts) {
  // x = [2, 1, 1, 3, 4, 3]: values 1 (first at 1, twice), 2 (0, once), 3 (3, twice), 4 (4, once).
  auto out = Run(UniqueModel(1), {Floats({6}, {2, 1, 1, 3, 4, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(Values<int64_t>((*out)[1]), ElementsAre(1, 0, 3, 4));
  EXPECT_THAT(Values<int64_t>((*out)[2]), ElementsAre(1, 0, 0, 2, 3, 2));
  EXPECT_THAT(Values<int64_t>((*out)[3]), ElementsAre(2, 1, 2, 1));
}

TEST_F(SelectionKernelsTest, UniqueUnsortedKeepsTheOrderOfFirstOccurrence) {
  auto out = Run(UniqueModel(0), {Floats({6}, {2, 1, 1, 3, 4, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<float>((*out)[0]), ElementsAre(2, 1, 3, 4));
  EXPECT_THAT(Values<int64_t>((*out)[1]), ElementsAre(0, 1, 3, 4));
  EXPECT_THAT(Values<int64_t>((*out)[2]), ElementsAre(0, 1, 1, 2, 3, 2));
  EXPECT_THAT(Values<int64_t>((*out)[3]), ElementsAre(1, 2, 2, 1));
}

TEST_F(SelectionKernelsTest, UniqueAlongAnAxisComparesWholeSlices) {
  // Rows [1 0 0], [1 0 0], [2 3 4]: two unique rows. Columns [1 1 2], [0 0 3], [0 0 4]: all
  // differ, sorted lexicographically as [0 0 3] (column 1), [0 0 4] (2), [1 1 2] (0).
  const Tensor x = Int64s({3, 3}, {1, 0, 0, 1, 0, 0, 2, 3, 4});
  auto rows = Run(R"(
<ir_version: 8, opset_import: ["" : 11]>
g (int64[3,3] x) => (int64[?,3] y, int64[?] indices, int64[?] inverse, int64[?] counts) {
  y, indices, inverse, counts = Unique<axis = 0>(x)
}
)",
                  {x});
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ((*rows)[0].shape(), (Shape{2, 3}));
  EXPECT_THAT(Values<int64_t>((*rows)[0]), ElementsAre(1, 0, 0, 2, 3, 4));
  EXPECT_THAT(Values<int64_t>((*rows)[1]), ElementsAre(0, 2));
  EXPECT_THAT(Values<int64_t>((*rows)[2]), ElementsAre(0, 0, 1));
  EXPECT_THAT(Values<int64_t>((*rows)[3]), ElementsAre(2, 1));
  auto columns = Run(R"(
<ir_version: 8, opset_import: ["" : 11]>
g (int64[3,3] x) => (int64[3,?] y, int64[?] indices) {
  y, indices = Unique<axis = -1>(x)
}
)",
                     {x});
  ASSERT_TRUE(columns.ok()) << columns.status();
  EXPECT_THAT(Values<int64_t>((*columns)[0]), ElementsAre(0, 0, 1, 0, 0, 1, 3, 4, 2));
  EXPECT_THAT(Values<int64_t>((*columns)[1]), ElementsAre(1, 2, 0));
}

// Boxes as [y1, x1, y2, x2]: b0 the unit square, b1 it shifted right by 0.1 (IoU with b0
// 0.9 / 1.1 = 0.82), b2 a unit square two to the right (no overlap), b3 b0 with its corners
// given in the other order.
Tensor CornerBoxes() {
  return Floats({1, 4, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 2, 1, 3, 1, 1, 0, 0});
}

constexpr char kNmsModel[] = R"(
<ir_version: 8, opset_import: ["" : 11]>
g (float[1,4,4] boxes, float[1,2,4] scores, int64[1] max, float[1] iou)
    => (int64[?,3] selected) {
  selected = NonMaxSuppression(boxes, scores, max, iou)
}
)";

TEST_F(SelectionKernelsTest, NonMaxSuppressionKeepsTheBestOfOverlappingBoxesPerClass) {
  // Class 0 (scores 0.9, 0.8, 0.7, 0.95): b3 first; b0 (IoU 1) and b1 (0.82) exceed 0.5 and go;
  // b2 stays. Class 1 (0.1, 0.2, 0.3, 0.05): b2, then b1 (no overlap with b2); b0 and b3 overlap
  // b1 by 0.82.
  auto out = Run(kNmsModel, {CornerBoxes(),
                             Floats({1, 2, 4}, {0.9f, 0.8f, 0.7f, 0.95f, 0.1f, 0.2f, 0.3f, 0.05f}),
                             Int64s({1}, {10}), Floats({1}, {0.5f})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{4, 3}));
  EXPECT_THAT(Values<int64_t>((*out)[0]), ElementsAre(0, 0, 3, 0, 0, 2, 0, 1, 2, 0, 1, 1));
}

TEST_F(SelectionKernelsTest, NonMaxSuppressionStopsAtTheLimitAndBelowTheScoreThreshold) {
  // max_output_boxes_per_class 1: only the best box of each class. A score threshold of 0.75
  // keeps class 0's b3, b0 and b1 as candidates and none of class 1's.
  auto limited =
      Run(kNmsModel,
          {CornerBoxes(), Floats({1, 2, 4}, {0.9f, 0.8f, 0.7f, 0.95f, 0.1f, 0.2f, 0.3f, 0.05f}),
           Int64s({1}, {1}), Floats({1}, {0.5f})});
  ASSERT_TRUE(limited.ok()) << limited.status();
  EXPECT_THAT(Values<int64_t>((*limited)[0]), ElementsAre(0, 0, 3, 0, 1, 2));
  auto thresholded =
      Run(R"(
<ir_version: 8, opset_import: ["" : 11]>
g (float[1,4,4] boxes, float[1,2,4] scores, int64[1] max, float[1] iou, float[1] score)
    => (int64[?,3] selected) {
  selected = NonMaxSuppression(boxes, scores, max, iou, score)
}
)",
          {CornerBoxes(), Floats({1, 2, 4}, {0.9f, 0.8f, 0.7f, 0.95f, 0.1f, 0.2f, 0.3f, 0.05f}),
           Int64s({1}, {10}), Floats({1}, {0.5f}), Floats({1}, {0.75f})});
  ASSERT_TRUE(thresholded.ok()) << thresholded.status();
  EXPECT_THAT(Values<int64_t>((*thresholded)[0]), ElementsAre(0, 0, 3));
}

TEST_F(SelectionKernelsTest, NonMaxSuppressionCenterPointBoxesAndTiesByIndex) {
  // [x_center, y_center, width, height]: b0 and b1 the same unit square with equal scores, so the
  // lower index wins and b1 goes (IoU 1); b2 [3, 3, 1, 1] is apart. Two batches, one class.
  const Tensor boxes =
      Floats({2, 3, 4}, {0.5f, 0.5f, 1, 1, 0.5f, 0.5f, 1, 1, 3, 3, 1, 1,  // batch 0
                         0.5f, 0.5f, 1, 1, 0.5f, 0.5f, 1, 1, 3, 3, 1, 1});
  auto out = Run(R"(
<ir_version: 8, opset_import: ["" : 11]>
g (float[2,3,4] boxes, float[2,1,3] scores, int64[1] max, float[1] iou)
    => (int64[?,3] selected) {
  selected = NonMaxSuppression<center_point_box = 1>(boxes, scores, max, iou)
}
)",
                 {boxes, Floats({2, 1, 3}, {0.5f, 0.5f, 0.1f, 0.2f, 0.6f, 0.1f}), Int64s({1}, {3}),
                  Floats({1}, {0.5f})});
  ASSERT_TRUE(out.ok()) << out.status();
  // Batch 0: b0 (tie, lower index), b2. Batch 1: b1 (0.6), b2.
  EXPECT_THAT(Values<int64_t>((*out)[0]), ElementsAre(0, 0, 0, 0, 0, 2, 1, 0, 1, 1, 0, 2));
}

}  // namespace
}  // namespace ampc
