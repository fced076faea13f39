// Resize, Upsample and GridSample CPU kernels, one node at a time through the registry. Expected
// values are the ONNX spec's examples (named) or worked by hand from the spec's formulas (the
// arithmetic is in the comments), never produced by the kernels under test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/cpu_backend.h"
#include "tests/support/kernel_runs.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

using testing::Make;
using testing::Values;

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

Tensor F32(Shape shape, const std::vector<float>& v) { return Make(DType::kFloat, shape, v); }
Tensor F64(Shape shape, const std::vector<double>& v) { return Make(DType::kDouble, shape, v); }
Tensor I64(Shape shape, const std::vector<int64_t>& v) { return Make(DType::kInt64, shape, v); }
const Tensor kNone;  // an omitted optional input

using testing::OpResult;

// The single node written in ONNX text, at opset 19 unless given.
OpResult RunOp(const std::string& node_text, std::vector<Tensor> inputs, int opset = 19) {
  return testing::RunOp(node_text, std::move(inputs), opset);
}

#define ASSERT_RUNS(r) ASSERT_TRUE((r).status.ok()) << (r).status.message()

const std::vector<float> kTwoByTwo = {1, 2, 3, 4};

// ---- Resize: modes and coordinate transformations ----

TEST(ResampleKernelsTest, ResizeNearestUpsamplesBySpecExample) {
  // test_resize_upsample_scales_nearest: half_pixel, round_prefer_floor.
  OpResult r = RunOp("y = Resize <mode = \"nearest\"> (x, , s)",
                     {F32({1, 1, 2, 2}, kTwoByTwo), kNone, F32({4}, {1, 1, 2, 3})});
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{1, 1, 4, 6}));
  EXPECT_THAT(r.floats(),
              ElementsAreArray(std::vector<float>{1.f, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2,  //
                                                  3,   3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4}));
}

TEST(ResampleKernelsTest, ResizeLinearHalfPixelBySpecExample) {
  // test_resize_upsample_scales_linear: x = (y + 0.5) / 2 - 0.5, edges clamped.
  OpResult r = RunOp("y = Resize <mode = \"linear\"> (x, , s)",
                     {F32({1, 1, 2, 2}, kTwoByTwo), kNone, F32({4}, {1, 1, 2, 2})});
  ASSERT_RUNS(r);
  EXPECT_THAT(r.floats(),
              ElementsAreArray(std::vector<float>{1.f, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f,
                                                  2.5f, 2.75f, 3.25f, 3.5f, 3, 3.25f, 3.75f, 4}));
}

TEST(ResampleKernelsTest, ResizeLinearAlignCornersBySpecExample) {
  // test_resize_upsample_scales_linear_align_corners: x = y * (2 - 1) / (4 - 1).
  OpResult r = RunOp(
      "y = Resize <mode = \"linear\", coordinate_transformation_mode = \"align_corners\"> (x, , "
      "s)",
      {F32({1, 1, 2, 2}, kTwoByTwo), kNone, F32({4}, {1, 1, 2, 2})});
  ASSERT_RUNS(r);
  EXPECT_THAT(r.floats(),
              Pointwise(FloatNear(1e-5), std::vector<float>{1, 4 / 3.f, 5 / 3.f, 2, 5 / 3.f, 2,
                                                            7 / 3.f, 8 / 3.f, 7 / 3.f, 8 / 3.f, 3,
                                                            10 / 3.f, 3, 10 / 3.f, 11 / 3.f, 4}));
}

TEST(ResampleKernelsTest, ResizeCubicAsymmetricUsesKeysKernel) {
  // x = y / 2; at ratio 0.5 the weights (a = -0.75) are W(1.5), W(0.5), W(0.5), W(1.5) =
  // -0.09375, 0.59375, 0.59375, -0.09375, over taps floor-1..floor+2 clamped into [0, 3]; at an
  // integer x they are 0, 0, 1, 0. y=1: 0.59375 - 2 * 0.09375; y=5: taps 1,2,3,3; y=7: 2,3,3,3.
  OpResult r = RunOp(
      "y = Resize <mode = \"cubic\", coordinate_transformation_mode = \"asymmetric\"> (x, , s)",
      {F32({4}, {0, 1, 2, 3}), kNone, F32({1}, {2})});
  ASSERT_RUNS(r);
  EXPECT_THAT(r.floats(), Pointwise(FloatNear(1e-6), std::vector<float>{0, 0.40625f, 1, 1.5f, 2,
                                                                        2.59375f, 3, 3.09375f}));
}

TEST(ResampleKernelsTest, ResizeCubicExcludeOutsideRenormalisesInsideWeights) {
  // y=1 as above without tap -1: (1 * 0.59375 - 2 * 0.09375) / (2 * 0.59375 - 0.09375) = 13/35.
  OpResult r = RunOp(
      "y = Resize <mode = \"cubic\", coordinate_transformation_mode = \"asymmetric\", "
      "exclude_outside = 1> (x, , s)",
      {F32({4}, {0, 1, 2, 3}), kNone, F32({1}, {2})});
  ASSERT_RUNS(r);
  EXPECT_NEAR(r.floats()[1], 13.0 / 35.0, 1e-6);
}

TEST(ResampleKernelsTest, ResizeNearestModesRound) {
  // asymmetric, scale 2: x = 0, 0.5, 1, ..., 3.5.
  const auto run = [](const std::string& mode) {
    return RunOp(absl::StrCat("y = Resize <mode = \"nearest\", coordinate_transformation_mode = "
                              "\"asymmetric\", nearest_mode = \"",
                              mode, "\"> (x, , s)"),
                 {F32({4}, {10, 20, 30, 40}), kNone, F32({1}, {2})})
        .floats();
  };
  EXPECT_THAT(run("round_prefer_floor"), ElementsAre(10, 10, 20, 20, 30, 30, 40, 40));
  EXPECT_THAT(run("round_prefer_ceil"), ElementsAre(10, 20, 20, 30, 30, 40, 40, 40));
  EXPECT_THAT(run("floor"), ElementsAre(10, 10, 20, 20, 30, 30, 40, 40));
  EXPECT_THAT(run("ceil"), ElementsAre(10, 20, 20, 30, 30, 40, 40, 40));
}

TEST(ResampleKernelsTest, ResizeHalfPixelSymmetricCentresTheOutput) {
  // in 3, scale 0.7: width 2.1, out 2; offset = 1.5 * (1 - 2 / 2.1) = 1/14; x = 1/14 + (y + 0.5) /
  // 0.7 - 0.5 = 2/7 and 12/7 (half_pixel would give 3/14 and 23/14). Linear over 0, 1, 2 is x.
  OpResult r = RunOp(
      "y = Resize <mode = \"linear\", coordinate_transformation_mode = \"half_pixel_symmetric\"> "
      "(x, , s)",
      {F32({3}, {0, 1, 2}), kNone, F32({1}, {0.7f})});
  ASSERT_RUNS(r);
  EXPECT_THAT(r.floats(), Pointwise(FloatNear(1e-5), std::vector<float>{2 / 7.f, 12 / 7.f}));
}

TEST(ResampleKernelsTest, ResizePytorchHalfPixelToOneElementReadsMinusHalf) {
  // pytorch_half_pixel maps a one-element output to x = -0.5 (the first element); half_pixel to
  // (0 + 0.5) * 3 - 0.5 = 1.
  const std::vector<Tensor> inputs = {F32({3}, {5, 6, 7}), kNone, kNone, I64({1}, {1})};
  EXPECT_THAT(RunOp("y = Resize <mode = \"linear\", coordinate_transformation_mode = "
                    "\"pytorch_half_pixel\"> (x, , , n)",
                    inputs)
                  .floats(),
              ElementsAre(5));
  EXPECT_THAT(RunOp("y = Resize <mode = \"linear\"> (x, , , n)", inputs).floats(), ElementsAre(6));
}

TEST(ResampleKernelsTest, ResizeTfCropAndResizeExtrapolates) {
  // roi [0.5, 1.5] of 4 elements, 3 outputs: x = y * 1 * 3 / 2 + 0.5 * 3 = 1.5, 3, 4.5 (> 3:
  // the extrapolation value).
  OpResult r = RunOp(
      "y = Resize <mode = \"linear\", coordinate_transformation_mode = \"tf_crop_and_resize\", "
      "extrapolation_value = 10.0> (x, roi, , n)",
      {F32({4}, {0, 1, 2, 3}), F32({2}, {0.5f, 1.5f}), kNone, I64({1}, {3})});
  ASSERT_RUNS(r);
  EXPECT_THAT(r.floats(), ElementsAre(1.5f, 3, 10));
}

TEST(ResampleKernelsTest, ResizeAntialiasWidensTheLinearKernel) {
  // scale 0.5: first tap -1, four taps; x = 2y + 0.5, ratio 0.5: weights 1 - |0.5 (i - 0.5)| for
  // i = -1..2 = 0.25, 0.75, 0.75, 0.25, normalised to 1/8, 3/8, 3/8, 1/8. y=0 reads 0,0,1,2;
  // y=3 reads 5,6,7,7.
  OpResult r = RunOp("y = Resize <mode = \"linear\", antialias = 1> (x, , s)",
                     {F32({8}, {0, 1, 2, 3, 4, 5, 6, 7}), kNone, F32({1}, {0.5f})});
  ASSERT_RUNS(r);
  EXPECT_THAT(r.floats(), ElementsAre(0.625f, 2.5f, 4.5f, 6.375f));
}

// ---- Resize: sizes, axes, keep_aspect_ratio_policy ----

TEST(ResampleKernelsTest, ResizeAxesResizeOnlyThoseAxes) {
  OpResult r = RunOp("y = Resize <mode = \"nearest\", axes = [-1]> (x, , s)",
                     {F32({2, 2}, kTwoByTwo), kNone, F32({1}, {2})});
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{2, 4}));
  EXPECT_THAT(r.floats(), ElementsAre(1, 1, 2, 2, 3, 3, 4, 4));
}

TEST(ResampleKernelsTest, ResizeKeepAspectRatioPolicies) {
  // sizes [1, 3] of [2, 4]: ratios 0.5 and 0.75. not_larger takes 0.5 (out [1, 2], x = 2y + 0.5
  // rounds to floor at 0.5); not_smaller 0.75 (out [2, 3], x = (y + 0.5) / 0.75 - 0.5 = 1/6, 3/2,
  // 17/6 -> 0, 1, 3).
  const std::vector<Tensor> inputs = {F32({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}), kNone, kNone,
                                      I64({2}, {1, 3})};
  OpResult r = RunOp("y = Resize <keep_aspect_ratio_policy = \"not_larger\"> (x, , , n)", inputs);
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{1, 2}));
  EXPECT_THAT(r.floats(), ElementsAre(1, 3));
  r = RunOp("y = Resize <keep_aspect_ratio_policy = \"not_smaller\"> (x, , , n)", inputs);
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{2, 3}));
  EXPECT_THAT(r.floats(), ElementsAre(1, 2, 4, 5, 6, 8));
}

TEST(ResampleKernelsTest, ResizeScalesFloorTheOutputSize) {
  // 5 * 0.5 = 2.5 -> 2 outputs.
  OpResult r = RunOp("y = Resize (x, , s)", {F32({5}, {1, 2, 3, 4, 5}), kNone, F32({1}, {0.5f})});
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{2}));
}

TEST(ResampleKernelsTest, ResizeFp16RoundsOnceToHalf) {
  OpResult r = RunOp("y = Resize <mode = \"linear\"> (x, , s)",
                     {testing::Halves({1, 1, 2, 2}, kTwoByTwo), kNone, F32({4}, {1, 1, 2, 2})});
  ASSERT_RUNS(r);
  ASSERT_EQ(r.out().dtype(), DType::kFloat16);
  std::vector<float> y;
  for (Half h : Values<Half>(r.out())) y.push_back(HalfToFloat(h.bits));
  EXPECT_THAT(
      y, ElementsAreArray(std::vector<float>{1.f, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f,
                                             2.75f, 3.25f, 3.5f, 3, 3.25f, 3.75f, 4}));
}

TEST(ResampleKernelsTest, ResizeOpset11TakesRoiScalesAndSizes) {
  OpResult r = RunOp("y = Resize (x, roi, s, n)",
                     {F32({2}, {1, 2}), F32({0}, {}), F32({0}, {}), I64({1}, {4})}, 11);
  ASSERT_RUNS(r);
  EXPECT_THAT(r.floats(), ElementsAre(1, 1, 2, 2));
}

TEST(ResampleKernelsTest, ResizeErrorsNameTheProblem) {
  OpResult r =
      RunOp("y = Resize (x, , s, n)", {F32({2}, {1, 2}), kNone, F32({1}, {2}), I64({1}, {4})});
  EXPECT_THAT(r.status.message(), HasSubstr("exactly one of scales and sizes"));
  r = RunOp("y = Resize (x, , s)", {F32({2}, {1, 2}), kNone, F32({2}, {2, 2})});
  EXPECT_THAT(r.status.message(), HasSubstr("scales has 2 values for 1 resized axes"));
  r = RunOp("y = Resize (x, , s)", {F32({2}, {1, 2}), kNone, F32({1}, {-1})});
  EXPECT_THAT(r.status.message(), HasSubstr("must be positive"));
  r = RunOp("y = Resize <coordinate_transformation_mode = \"tf_crop_and_resize\"> (x, , s)",
            {F32({2}, {1, 2}), kNone, F32({1}, {2})});
  EXPECT_THAT(r.status.message(), HasSubstr("needs roi of 2 values"));
  r = RunOp("y = Resize <mode = \"area\"> (x, , s)", {F32({2}, {1, 2}), kNone, F32({1}, {2})});
  EXPECT_THAT(r.status.message(), HasSubstr("mode 'area' is not supported"));
}

// ---- Upsample and Resize-10: asymmetric, nearest rounds down when upsampling ----

TEST(ResampleKernelsTest, UpsampleNearestBySpecExample) {
  // test_upsample_nearest (opset 9), and the same through Upsample-7's scales attribute.
  const std::vector<float> expected = {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2,
                                       3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4};
  OpResult r = RunOp("y = Upsample <mode = \"nearest\"> (x, s)",
                     {F32({1, 1, 2, 2}, kTwoByTwo), F32({4}, {1, 1, 2, 3})}, 9);
  ASSERT_RUNS(r);
  EXPECT_THAT(r.floats(), ElementsAreArray(expected));
  r = RunOp("y = Upsample <scales = [1.0, 1.0, 2.0, 3.0]> (x)", {F32({1, 1, 2, 2}, kTwoByTwo)}, 7);
  ASSERT_RUNS(r);
  EXPECT_THAT(r.floats(), ElementsAreArray(expected));
}

TEST(ResampleKernelsTest, Upsample1HasNoKernel) {
  // Upsample-1 scales by height_scale and width_scale attributes, which the kernel does not read.
  OpResult r = RunOp("y = Upsample <height_scale = 2.0, width_scale = 2.0> (x)",
                     {F32({1, 1, 2, 2}, kTwoByTwo)}, 6);
  EXPECT_FALSE(r.status.ok());
  EXPECT_THAT(r.status.message(), HasSubstr("Upsample-1"));
}

TEST(ResampleKernelsTest, Resize10LinearIsAsymmetric) {
  // x = y / 2 = 0, 0.5, 1, 1.5 (the last clamps to element 1).
  OpResult r =
      RunOp("y = Resize <mode = \"linear\"> (x, s)", {F32({2}, {1, 2}), F32({1}, {2})}, 10);
  ASSERT_RUNS(r);
  EXPECT_THAT(r.floats(), ElementsAre(1, 1.5f, 2, 2));
}

// ---- GridSample ----

// X [1, 1, 3, 2] and grid [1, 2, 4, 2] of the spec's padding-mode examples.
const std::vector<float> kPaddingX = {0, 1, 2, 3, 4, 5};
const std::vector<float> kPaddingGrid = {-10, -10, -5,    -5,    -0.2f, -0.2f, 10, 10,
                                         10,  10,  -0.2f, -0.2f, 5,     5,     10, 10};

TEST(ResampleKernelsTest, GridSamplePaddingModesBySpecExample) {
  const auto run = [](const std::string& padding) {
    OpResult r = RunOp(absl::StrCat("y = GridSample <padding_mode = \"", padding, "\"> (x, g)"),
                       {F32({1, 1, 3, 2}, kPaddingX), F32({1, 2, 4, 2}, kPaddingGrid)}, 16);
    EXPECT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.out().shape(), (Shape{1, 1, 2, 4}));
    return r.floats();
  };
  // test_gridsample_zeros_padding, _border_padding, _reflection_padding.
  EXPECT_THAT(run("zeros"),
              Pointwise(FloatNear(1e-5), std::vector<float>{0, 0, 1.7f, 0, 0, 1.7f, 0, 0}));
  EXPECT_THAT(run("border"),
              Pointwise(FloatNear(1e-5), std::vector<float>{0, 0, 1.7f, 5, 5, 1.7f, 5, 5}));
  EXPECT_THAT(
      run("reflection"),
      Pointwise(FloatNear(1e-5), std::vector<float>{2.5f, 0, 1.7f, 2.5f, 2.5f, 1.7f, 5, 2.5f}));
}

TEST(ResampleKernelsTest, GridSampleNearestRoundsHalfToEven) {
  // X [[0, 1], [2, 3]], align_corners 0: x = ((g + 1) * 2 - 1) / 2. g = 0 gives x 0.5 -> 0; g = 1
  // gives 1.5 -> 2, outside: zeros reads 0, border clamps to 1. y = -0.5 gives row 0.
  const std::vector<Tensor> inputs = {F32({1, 1, 2, 2}, {0, 1, 2, 3}),
                                      F32({1, 1, 2, 2}, {0, -0.5f, 1, -0.5f})};
  OpResult r = RunOp("y = GridSample <mode = \"nearest\"> (x, g)", inputs, 20);
  ASSERT_RUNS(r);
  EXPECT_THAT(r.floats(), ElementsAre(0, 0));
  r = RunOp("y = GridSample <mode = \"nearest\", padding_mode = \"border\"> (x, g)", inputs, 20);
  ASSERT_RUNS(r);
  EXPECT_THAT(r.floats(), ElementsAre(0, 1));
}

TEST(ResampleKernelsTest, GridSampleCubicPadsItsFourTaps) {
  // One row [0, 1, 2], align_corners 1: x = g + 1 = 1.5, taps 0..3 with weights -0.09375,
  // 0.59375, 0.59375, -0.09375; tap 3 reads 2 with border padding, 0 with zeros. The single row
  // (y = 0) has weight 1.
  const std::vector<Tensor> inputs = {F32({1, 1, 1, 3}, {0, 1, 2}), F32({1, 1, 1, 2}, {0.5f, 0})};
  OpResult r = RunOp(
      "y = GridSample <mode = \"bicubic\", align_corners = 1, padding_mode = \"border\"> (x, g)",
      inputs, 16);
  ASSERT_RUNS(r);
  EXPECT_THAT(r.floats(), ElementsAre(FloatNear(1.59375f, 1e-6)));
  r = RunOp("y = GridSample <mode = \"cubic\", align_corners = 1> (x, g)", inputs, 20);
  ASSERT_RUNS(r);
  EXPECT_THAT(r.floats(), ElementsAre(FloatNear(1.78125f, 1e-6)));
}

TEST(ResampleKernelsTest, GridSampleVolumetricReadsTheLastAxisFirst) {
  // X [1, 1, 2, 2, 2] = 0..7, align_corners 1: grid (x, y, z) = (1, -1, -1) is X[0][0][1] = 1,
  // (-1, 1, -1) X[0][1][0] = 2, (-1, -1, 1) X[1][0][0] = 4; (0, 0, 0) the mean 3.5. The grid is
  // double, X float.
  OpResult r = RunOp("y = GridSample <align_corners = 1> (x, g)",
                     {F32({1, 1, 2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}),
                      F64({1, 1, 1, 4, 3}, {1, -1, -1, -1, 1, -1, -1, -1, 1, 0, 0, 0})},
                     20);
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{1, 1, 1, 1, 4}));
  EXPECT_THAT(r.floats(), ElementsAre(1, 2, 4, 3.5f));
}

TEST(ResampleKernelsTest, GridSampleChecksShapes) {
  OpResult r = RunOp("y = GridSample (x, g)",
                     {F32({1, 1, 2, 2}, {0, 1, 2, 3}), F32({1, 1, 1, 3}, {0, 0, 0})}, 16);
  EXPECT_THAT(r.status.message(), HasSubstr("do not match"));
}

}  // namespace
}  // namespace ampc
