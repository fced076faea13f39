// Tensor-family CPU kernels (shape and data movement), run one node at a time through the
// registry, plus a few whole models through a Session. Expected values are written by hand or
// computed by the reference loops below, never by the kernels under test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/core/tensor_proto.h"
#include "runtime/session.h"
#include "tests/support/kernel_runs.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

using testing::Make;
using testing::Values;

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

Tensor F32(Shape shape, const std::vector<float>& v) { return Make(DType::kFloat, shape, v); }
Tensor I64(Shape shape, const std::vector<int64_t>& v) { return Make(DType::kInt64, shape, v); }
Tensor I32(Shape shape, const std::vector<int32_t>& v) { return Make(DType::kInt32, shape, v); }
Tensor Iota(DType dtype, Shape shape) {  // 0, 1, 2, ... in any dtype
  Tensor t = Tensor::Host(dtype, std::move(shape));
  Dispatch<AMPC_ALL_TYPES>(dtype, [&]<typename T>() {
    for (int64_t i = 0; i < t.size(); ++i) {
      t.data<T>()[i] = Compute<T>::Store(static_cast<typename Compute<T>::type>(i % 100));
    }
  });
  return t;
}

using testing::OpResult;
using testing::RunOp;

#define ASSERT_RUNS(r) ASSERT_TRUE((r).status.ok()) << (r).status

// ---- views ----

TEST(TensorKernelsTest, ReshapeIsAViewAndResolvesZeroAndMinusOne) {
  Tensor x = Iota(DType::kFloat, {2, 3, 4});
  OpResult r = RunOp("y = Reshape(x, s)", {x, I64({3}, {0, -1, 2})});
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{2, 6, 2}));
  EXPECT_EQ(r.out().raw(), x.raw());  // no copy: the buffer is shared
}

TEST(TensorKernelsTest, ReshapeAllowZeroKeepsZeroAsADim) {
  OpResult r = RunOp("y = Reshape <allowzero = 1> (x, s)",
                     {Tensor::Host(DType::kFloat, {0, 3}), I64({2}, {3, 0})}, 14);
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{3, 0}));
}

TEST(TensorKernelsTest, ReshapeToTheWrongCountIsAnError) {
  OpResult r = RunOp("y = Reshape(x, s)", {Iota(DType::kFloat, {2, 3}), I64({2}, {4, 2})});
  ASSERT_FALSE(r.status.ok());
  EXPECT_THAT(r.status.message(), HasSubstr("cannot reshape [2,3] (6 elements) to [4,2]"));
  r = RunOp("y = Reshape(x, s)", {Iota(DType::kFloat, {2, 3}), I64({2}, {-1, -1})});
  EXPECT_THAT(r.status.message(), HasSubstr("two -1"));
  r = RunOp("y = Reshape(x, s)", {Iota(DType::kFloat, {2, 3}), I64({2}, {4, -1})});
  EXPECT_THAT(r.status.message(), HasSubstr("cannot reshape"));
}

TEST(TensorKernelsTest, FlattenSqueezeUnsqueezeIdentityAreViews) {
  Tensor x = Iota(DType::kBFloat16, {2, 1, 3, 1});
  OpResult r = RunOp("y = Flatten <axis = -2> (x)", {x});
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{2, 3}));
  EXPECT_EQ(r.out().raw(), x.raw());
  r = RunOp("y = Squeeze(x)", {x});
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{2, 3}));
  r = RunOp("y = Squeeze(x, a)", {x, I64({1}, {-1})});
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{2, 1, 3}));
  r = RunOp("y = Squeeze <axes = [1]> (x)", {x}, 11);  // attribute before opset 13
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{2, 3, 1}));
  r = RunOp("y = Unsqueeze(x, a)", {x, I64({2}, {0, -1})});
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{1, 2, 1, 3, 1, 1}));
  r = RunOp("y = Unsqueeze <axes = [1]> (x)", {x}, 11);
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{2, 1, 1, 3, 1}));
  EXPECT_EQ(r.out().raw(), x.raw());
  r = RunOp("y = Identity(x)", {x});
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().raw(), x.raw());
  r = RunOp("y = Squeeze(x, a)", {x, I64({1}, {2})});
  EXPECT_THAT(r.status.message(), HasSubstr("cannot squeeze axis 2 of size 3"));
}

// ---- layout ----

// Reference transpose by explicit multi-index arithmetic on a [2,3,4] tensor.
TEST(TensorKernelsTest, TransposeMatchesAReferenceLoopForEveryDtypeSize) {
  for (DType dtype : {DType::kFloat, DType::kFloat16, DType::kInt64, DType::kBool, DType::kInt8}) {
    Tensor x = Iota(dtype, {2, 3, 4});
    OpResult r = RunOp("y = Transpose <perm = [1, 2, 0]> (x)", {x});
    ASSERT_RUNS(r);
    ASSERT_EQ(r.out().shape(), (Shape{3, 4, 2}));
    const size_t es = DTypeSize(dtype);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j)
        for (int k = 0; k < 2; ++k) {
          const char* got = static_cast<const char*>(r.out().raw()) + ((i * 4 + j) * 2 + k) * es;
          const char* want = static_cast<const char*>(x.raw()) + ((k * 3 + i) * 4 + j) * es;
          EXPECT_EQ(std::memcmp(got, want, es), 0) << DTypeName(dtype);
        }
  }
  OpResult r = RunOp("y = Transpose(x)", {F32({2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{3, 2}));
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(1, 4, 2, 5, 3, 6));
  r = RunOp("y = Transpose <perm = [0, 0]> (x)", {F32({2, 3}, {1, 2, 3, 4, 5, 6})});
  EXPECT_THAT(r.status.message(), HasSubstr("not a permutation"));
}

TEST(TensorKernelsTest, LargeTransposeSplitAcrossThreadsMatchesAReferenceLoop) {
  Tensor x = Tensor::Host(DType::kInt32, {300, 200});
  for (int i = 0; i < 60000; ++i) x.data<int32_t>()[i] = i;
  OpResult r = RunOp("y = Transpose(x)", {x});
  ASSERT_RUNS(r);
  for (int i = 0; i < 200; ++i)
    for (int j = 0; j < 300; ++j) ASSERT_EQ(r.out().data<int32_t>()[i * 300 + j], j * 200 + i);
  // Rank 4, last axis strided: 1440 output rows of 40 in chunks that start mid-way through the
  // outer dims (each chunk counts its rows' index from its first one).
  Tensor z = Tensor::Host(DType::kInt32, {6, 40, 30, 8});
  for (int i = 0; i < 6 * 40 * 30 * 8; ++i) z.data<int32_t>()[i] = i;
  r = RunOp("y = Transpose <perm = [0, 2, 3, 1]> (x)", {z});
  ASSERT_RUNS(r);
  ASSERT_EQ(r.out().shape(), (Shape{6, 30, 8, 40}));
  for (int a = 0; a < 6; ++a)
    for (int c = 0; c < 30; ++c)
      for (int d = 0; d < 8; ++d)
        for (int b = 0; b < 40; ++b) {
          ASSERT_EQ(r.out().data<int32_t>()[((a * 30 + c) * 8 + d) * 40 + b],
                    ((a * 40 + b) * 30 + c) * 8 + d);
        }
}

TEST(TensorKernelsTest, TransposeKeepsFp16BitPatterns) {
  // -0, NaN with a payload, +inf, the smallest subnormal: moved, never converted.
  Tensor x = Make<uint16_t>(DType::kFloat16, {2, 2}, {0x8000, 0x7e01, 0x7c00, 0x0001});
  OpResult r = RunOp("y = Transpose(x)", {x});
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<uint16_t>(r.out()), ElementsAre(0x8000, 0x7c00, 0x7e01, 0x0001));
}

TEST(TensorKernelsTest, ConcatAndSplit) {
  OpResult r =
      RunOp("y = Concat <axis = -1> (a, b)", {F32({2, 1}, {1, 2}), F32({2, 2}, {3, 4, 5, 6})});
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{2, 3}));
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(1, 3, 4, 2, 5, 6));
  r = RunOp("y = Concat <axis = 0> (a, b)", {F32({2, 1}, {1, 2}), F32({2, 2}, {3, 4, 5, 6})});
  EXPECT_THAT(r.status.message(), HasSubstr("does not match"));

  Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  r = RunOp("a, b = Split <axis = 1> (x, s)", {x, I64({2}, {1, 2})});
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out(0)), ElementsAre(1, 4));
  EXPECT_THAT(Values<float>(r.out(1)), ElementsAre(2, 3, 5, 6));
  r = RunOp("a, b = Split <axis = 1, split = [2, 1]> (x)", {x}, 11);
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out(0)), ElementsAre(1, 2, 4, 5));
  r = RunOp("a, b, c = Split <axis = 1> (x)", {x});
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out(2)), ElementsAre(3, 6));
  r = RunOp("a, b = Split <axis = 1> (x)", {x});
  EXPECT_THAT(r.status.message(), HasSubstr("does not split evenly"));
  // Split-18's num_outputs: ceil(3 / 2) = 2 columns, then the 1 left.
  r = RunOp("a, b = Split <axis = 1, num_outputs = 2> (x)", {x}, 18);
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out(0)), ElementsAre(1, 2, 4, 5));
  EXPECT_THAT(Values<float>(r.out(1)), ElementsAre(3, 6));
}

// Reference: numpy slicing x[starts:ends:steps] on a 1-D iota, written out by hand.
TEST(TensorKernelsTest, SliceClampsAndWalksNegativeSteps) {
  Tensor x = Iota(DType::kInt32, {10});
  auto slice = [&](int64_t s, int64_t e, int64_t step) {
    OpResult r = RunOp("y = Slice(x, s, e, a, t)",
                       {x, I64({1}, {s}), I64({1}, {e}), I64({1}, {0}), I64({1}, {step})});
    EXPECT_TRUE(r.status.ok()) << r.status;
    return Values<int32_t>(r.out());
  };
  EXPECT_THAT(slice(2, 5, 1), ElementsAre(2, 3, 4));
  EXPECT_THAT(slice(-3, 100, 1), ElementsAre(7, 8, 9));
  EXPECT_THAT(slice(1, 9, 3), ElementsAre(1, 4, 7));
  EXPECT_THAT(slice(8, 2, -2), ElementsAre(8, 6, 4));
  EXPECT_THAT(slice(-1, INT64_MIN, -1), ElementsAre(9, 8, 7, 6, 5, 4, 3, 2, 1, 0));
  EXPECT_THAT(slice(100, -100, -4), ElementsAre(9, 5, 1));
  EXPECT_THAT(slice(5, 2, 1), ElementsAre());
  // Steps near the int64 limits take one element (the count no longer overflows).
  EXPECT_THAT(slice(0, 10, INT64_MAX), ElementsAre(0));
  EXPECT_THAT(slice(9, -100, INT64_MIN), ElementsAre(9));
  EXPECT_THAT(slice(9, -100, INT64_MIN + 1), ElementsAre(9));

  Tensor m = Iota(DType::kFloat, {3, 4});  // rows 0..3, 4..7, 8..11
  OpResult r = RunOp("y = Slice(x, s, e, a)",
                     {m, I64({2}, {1, -1}), I64({2}, {INT64_MAX, 0}), I64({2}, {1, 0})}, 13);
  ASSERT_RUNS(r);  // m[-1:0, 1:]: axis 0 runs from 2 up to 0, which is empty
  EXPECT_EQ(r.out().shape(), (Shape{0, 3}));
  r = RunOp("y = Slice <starts = [1, 0], ends = [3, 2]> (x)", {m}, 1);
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(4, 5, 8, 9));
  r = RunOp("y = Slice(x, s, e, a, t)",
            {m, I64({1}, {0}), I64({1}, {1}), I64({1}, {0}), I64({1}, {0})});
  EXPECT_THAT(r.status.message(), HasSubstr("step of axis 0 is 0"));
  r = RunOp("y = Slice(x, s, e, a, t)", {Tensor::Host(DType::kFloat, {0, 2}), I64({1}, {-1}),
                                         I64({1}, {INT64_MIN}), I64({1}, {0}), I64({1}, {-1})});
  ASSERT_RUNS(r);  // an empty axis stays empty with a negative step
  EXPECT_EQ(r.out().shape(), (Shape{0, 2}));
}

TEST(TensorKernelsTest, ShapesThatOverflowInt64AreErrorsNamingTheAxis) {
  OpResult r = RunOp("y = Tile(x, r)", {Iota(DType::kInt32, {3}), I64({1}, {INT64_MAX / 2})});
  EXPECT_THAT(r.status.message(), HasSubstr("axis 0 of 3 repeated"));
  r = RunOp("y = Pad(x, p)", {Iota(DType::kInt32, {3}), I64({2}, {INT64_MAX, INT64_MAX - 1})});
  EXPECT_THAT(r.status.message(), HasSubstr("overflow a dimension"));
  // A shape that fits int64 but no memory: the node's error before anything is built for it.
  r = RunOp("y = Pad(x, p)",
            {Iota(DType::kInt32, {2, 2}), I64({4}, {0, (int64_t{1} << 62) - 2, 0, 0})});
  EXPECT_THAT(r.status.message(), HasSubstr("bytes"));
  for (const auto& [limit, delta] : {std::pair{1.0f, 1e-30f}, {INFINITY, 1.0f}, {NAN, 1.0f}}) {
    r = RunOp("y = Range(s, l, d)", {testing::Floats({}, {0.0f}), testing::Floats({}, {limit}),
                                     testing::Floats({}, {delta})});
    EXPECT_THAT(r.status.message(), HasSubstr("elements (start, limit and delta give no finite"))
        << limit << " " << delta;
  }
}

TEST(TensorKernelsTest, ExpandAndTile) {
  OpResult r = RunOp("y = Expand(x, s)", {F32({3, 1}, {1, 2, 3}), I64({3}, {2, 1, 2})});
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{2, 3, 2}));
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3));
  r = RunOp("y = Expand(x, s)", {F32({3}, {1, 2, 3}), I64({1}, {2})});
  EXPECT_THAT(r.status.message(), HasSubstr("cannot expand [3] to [2]"));
  r = RunOp("y = Expand(x, s)", {F32({1}, {1}), I64({1}, {-2})});
  EXPECT_THAT(r.status.message(), HasSubstr("cannot expand [1] to [-2]"));
  r = RunOp("y = Tile(x, s)", {F32({2, 2}, {1, 2, 3, 4}), I64({2}, {2, 1})});
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(1, 2, 3, 4, 1, 2, 3, 4));
  r = RunOp("y = Tile(x, s)", {F32({2}, {1, 2}), I64({1}, {3})});
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(1, 2, 1, 2, 1, 2));
}

TEST(TensorKernelsTest, PadConstantReflectEdge) {
  Tensor x = F32({1, 3}, {1, 2, 3});
  Tensor pads = I64({4}, {0, 2, 0, 1});
  OpResult r = RunOp("y = Pad(x, p, v)", {x, pads, F32({}, {9})});
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(9, 9, 1, 2, 3, 9));
  r = RunOp("y = Pad <mode = \"reflect\"> (x, p)", {x, pads});
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(3, 2, 1, 2, 3, 2));  // numpy mode='reflect'
  r = RunOp("y = Pad <mode = \"edge\"> (x, p)", {x, pads});
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(1, 1, 1, 2, 3, 3));
  r = RunOp("y = Pad(x, p)", {x, I64({4}, {1, -1, 0, 0})});  // negative pads crop
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{2, 2}));
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(0, 0, 2, 3));
}

TEST(TensorKernelsTest, PadWrapRepeatsTheAxisAsARing) {
  // numpy.pad([1, 2, 3], (2, 4), mode='wrap') = [2, 3, 1, 2, 3, 1, 2, 3, 1].
  Tensor x = F32({1, 3}, {1, 2, 3});
  OpResult r = RunOp("y = Pad <mode = \"wrap\"> (x, p)", {x, I64({4}, {0, 2, 0, 4})}, 19);
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(2, 3, 1, 2, 3, 1, 2, 3, 1));
  // A negative begin crops first; the end then wraps what is left ([2, 3]).
  r = RunOp("y = Pad <mode = \"wrap\"> (x, p)", {x, I64({4}, {0, -1, 0, 2})}, 19);
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(2, 3, 2, 3));
  r = RunOp("y = Pad <mode = \"wrap\"> (x, p)", {x, I64({4}, {0, -3, 0, 1})}, 19);
  EXPECT_THAT(r.status.message(), HasSubstr("crop all of axis 1"));
}

// Pad-18's axes input: the pads apply to the listed axes (negative ones count from the end).
TEST(TensorKernelsTest, PadOnlyTheAxesListed) {
  Tensor x = F32({1, 3}, {1, 2, 3});
  OpResult r =
      RunOp("y = Pad(x, p, v, a)", {x, I64({2}, {2, 1}), F32({}, {9}), I64({1}, {-1})}, 18);
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{1, 6}));
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(9, 9, 1, 2, 3, 9));
  r = RunOp("y = Pad(x, p, v, a)", {x, I64({4}, {0, 0, 0, 0}), F32({}, {9}), I64({1}, {1})}, 18);
  EXPECT_THAT(r.status.message(), HasSubstr("4 pads for 1 axes"));
  r = RunOp("y = Pad(x, p, v, a)", {x, I64({4}, {0, 0, 0, 0}), F32({}, {9}), I64({2}, {1, -1})},
            18);
  EXPECT_THAT(r.status.message(), HasSubstr("axis 1 is listed twice"));
}

TEST(TensorKernelsTest, PadValueAttributeRoundsOnceToFp16) {
  // Before opset 11 the value is a float attribute: 0.1f rounds to the nearest FP16, 0x2E66.
  OpResult r = RunOp("y = Pad <pads = [1, 0], value = 0.1> (x)",
                     {Make<uint16_t>(DType::kFloat16, {1}, {0x3C00})}, 2);
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<uint16_t>(r.out()), ElementsAre(0x2E66, 0x3C00));
}

// Reference: DepthToSpace by the spec's index formula, DCR and CRD, on a [1,8,2,3] iota;
// SpaceToDepth in the same mode inverts it.
TEST(TensorKernelsTest, DepthToSpaceAndSpaceToDepthInvertEachOther) {
  const int64_t b = 2, c = 8, h = 2, w = 3, oc = c / (b * b);
  Tensor x = Iota(DType::kFloat, {1, c, h, w});
  for (const std::string mode : {"DCR", "CRD"}) {
    OpResult r = RunOp("y = DepthToSpace <blocksize = 2, mode = \"" + mode + "\"> (x)", {x});
    ASSERT_RUNS(r);
    ASSERT_EQ(r.out().shape(), (Shape{1, oc, h * b, w * b}));
    for (int64_t k = 0; k < oc; ++k)
      for (int64_t y = 0; y < h * b; ++y)
        for (int64_t xx = 0; xx < w * b; ++xx) {
          const int64_t by = y % b, bx = xx % b;
          const int64_t ch = mode == "DCR" ? (by * b + bx) * oc + k : k * b * b + by * b + bx;
          const float want = static_cast<float>(((ch * h + y / b) * w + xx / b) % 100);
          EXPECT_EQ(r.out().data<float>()[(k * h * b + y) * w * b + xx], want) << mode;
        }
    // SpaceToDepth-28 takes the same `mode`; before it, DCR only.
    OpResult back =
        RunOp("z = SpaceToDepth <blocksize = 2, mode = \"" + mode + "\"> (y)", {r.out()}, 28);
    ASSERT_RUNS(back);
    EXPECT_EQ(Values<float>(back.out()), Values<float>(x)) << mode;
  }
  OpResult dcr = RunOp("z = SpaceToDepth <blocksize = 2> (y)",
                       {RunOp("y = DepthToSpace <blocksize = 2> (x)", {x}).out()});
  ASSERT_RUNS(dcr);
  EXPECT_EQ(Values<float>(dcr.out()), Values<float>(x));
}

TEST(TensorKernelsTest, TriluAndReverseSequence) {
  Tensor m = F32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  OpResult r = RunOp("y = Trilu(x)", {m});
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(1, 2, 3, 0, 5, 6, 0, 0, 9));
  r = RunOp("y = Trilu <upper = 0> (x, k)", {m, I64({}, {-1})});
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(0, 0, 0, 4, 0, 0, 7, 8, 0));
  // [time=3, batch=2]; batch 0 reverses its first 3 steps, batch 1 its first 2.
  r = RunOp("y = ReverseSequence <batch_axis = 1, time_axis = 0> (x, l)",
            {F32({3, 2}, {1, 2, 3, 4, 5, 6}), I64({2}, {3, 2})});
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(5, 4, 3, 2, 1, 6));
}

// ---- indexing ----

TEST(TensorKernelsTest, GatherWithNegativeIndicesOnAnyAxis) {
  Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  OpResult r = RunOp("y = Gather <axis = 1> (x, i)", {x, I64({2, 2}, {0, -1, 2, 1})});
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{2, 2, 2}));
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(1, 3, 3, 2, 4, 6, 6, 5));
  r = RunOp("y = Gather(x, i)", {x, I32({}, {-1})});
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{3}));
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(4, 5, 6));
}

TEST(TensorKernelsTest, OutOfRangeIndicesAreErrorsNamingValueAndAxis) {
  Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  OpResult r = RunOp("y = Gather <axis = 1> (x, i)", {x, I64({1}, {3})});
  EXPECT_EQ(r.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status.message(), HasSubstr("index 3 is out of range for axis 1 of size 3"));
  r = RunOp("y = GatherElements(x, i)", {x, I64({1, 1}, {-3})});
  EXPECT_THAT(r.status.message(), HasSubstr("index -3 is out of range for axis 0"));
  r = RunOp("y = GatherND(x, i)", {x, I64({1, 2}, {1, 7})});
  EXPECT_THAT(r.status.message(), HasSubstr("index 7 is out of range for axis 1"));
  r = RunOp("y = ScatterElements(x, i, u)", {x, I64({1, 1}, {5}), F32({1, 1}, {0})});
  EXPECT_THAT(r.status.message(), HasSubstr("index 5 is out of range for axis 0"));
  r = RunOp("y = ScatterND(x, i, u)", {x, I64({1, 1}, {-9}), F32({1, 3}, {0, 0, 0})});
  EXPECT_THAT(r.status.message(), HasSubstr("index -9 is out of range for axis 0"));
}

TEST(TensorKernelsTest, GatherElementsAndScatterElements) {
  Tensor x = F32({2, 2}, {1, 2, 3, 4});
  OpResult r = RunOp("y = GatherElements <axis = 1> (x, i)", {x, I64({2, 2}, {0, 0, 1, 0})});
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(1, 1, 4, 3));
  // ONNX doc example: data [[1,2,3,4,5]], indices [[1,3]], updates [[1.1,2.1]], axis 1.
  r = RunOp("y = ScatterElements <axis = 1> (x, i, u)",
            {F32({1, 5}, {1, 2, 3, 4, 5}), I64({1, 2}, {1, -2}), F32({1, 2}, {1.1f, 2.1f})});
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(1, 1.1f, 3, 2.1f, 5));
  r = RunOp("y = ScatterElements <axis = 1, reduction = \"mul\"> (x, i, u)",
            {F32({1, 3}, {1, 2, 3}), I64({1, 3}, {1, 1, 2}), F32({1, 3}, {5, 7, 2})}, 16);
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(1, 70, 6));
}

TEST(TensorKernelsTest, ScatterAddOnFp16RoundsAfterEachUpdateAsTheSpecsLoopDoes) {
  // The spec's reference writes output[idx] += update in the output type, one update at a
  // time: 2048 + 1 = 2049 is a tie between FP16 2048 and 2050 -> 2048, twice. (Summing the
  // updates first in FP32 would give 2050.)
  const uint16_t h2048 = 0x6800, h1 = 0x3C00;
  OpResult r = RunOp("y = ScatterElements <reduction = \"add\"> (x, i, u)",
                     {Make<uint16_t>(DType::kFloat16, {1}, {h2048}), I64({2}, {0, 0}),
                      Make<uint16_t>(DType::kFloat16, {2}, {h1, h1})},
                     16);
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<uint16_t>(r.out()), ElementsAre(h2048));
  // BF16 add: 1 + 2^-8 is exact in FP32 and a tie in BF16 (8 bits): even -> 1.0 (0x3F80).
  r = RunOp("y = ScatterND <reduction = \"add\"> (x, i, u)",
            {Make<uint16_t>(DType::kBFloat16, {2}, {0x3F80, 0x3F80}), I64({1, 1}, {1}),
             Make<uint16_t>(DType::kBFloat16, {1}, {0x3B80})},
            16);
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<uint16_t>(r.out()), ElementsAre(0x3F80, 0x3F80));
}

TEST(TensorKernelsTest, GatherNDWithBatchDimsAndScatterND) {
  // ONNX doc examples.
  OpResult r = RunOp("y = GatherND(x, i)", {I32({2, 2}, {0, 1, 2, 3}), I64({2, 1}, {1, 0})});
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{2, 2}));
  EXPECT_THAT(Values<int32_t>(r.out()), ElementsAre(2, 3, 0, 1));
  r = RunOp("y = GatherND <batch_dims = 1> (x, i)",
            {I32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}), I64({2, 1}, {1, 0})});
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{2, 2}));
  EXPECT_THAT(Values<int32_t>(r.out()), ElementsAre(2, 3, 4, 5));
  r = RunOp("y = GatherND(x, i)", {I32({2, 2}, {0, 1, 2, 3}), I64({1, 3}, {0, 0, 0})});
  EXPECT_THAT(r.status.message(), HasSubstr("index tuples of length 3 do not fit data [2,2]"));
  r = RunOp("y = ScatterND(x, i, u)", {F32({8}, {1, 2, 3, 4, 5, 6, 7, 8}),
                                       I64({4, 1}, {4, 3, 1, 7}), F32({4}, {9, 10, 11, 12})});
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(1, 11, 3, 10, 9, 6, 7, 12));
}

TEST(TensorKernelsTest, OneHotNonZeroCompress) {
  OpResult r = RunOp("y = OneHot <axis = 0> (i, d, v)",
                     {I64({3}, {0, -1, 5}), F32({}, {3}), F32({2}, {0, 7})});
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{3, 3}));
  // Column j is index j one-hot over depth 3; 5 is out of range -> all off.
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(7, 0, 0, 0, 0, 0, 0, 7, 0));
  r = RunOp("y = NonZero(x)", {F32({2, 2}, {1, 0, -0.0f, 3})});
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().shape(), (Shape{2, 2}));
  EXPECT_THAT(Values<int64_t>(r.out()), ElementsAre(0, 1, 0, 1));
  Tensor cond = Make<bool>(DType::kBool, {2}, {false, true});
  r = RunOp("y = Compress <axis = 1> (x, c)", {F32({2, 3}, {1, 2, 3, 4, 5, 6}), cond});
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(2, 5));
  r = RunOp("y = Compress(x, c)", {F32({2, 3}, {1, 2, 3, 4, 5, 6}), cond});
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(2));
}

// ---- shapes and constants ----

TEST(TensorKernelsTest, ShapeSizeConstantRangeEyeLike) {
  Tensor x = Iota(DType::kInt8, {2, 3, 4});
  OpResult r = RunOp("y = Shape <start = -2> (x)", {x}, 15);
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<int64_t>(r.out()), ElementsAre(3, 4));
  r = RunOp("y = Size(x)", {x});
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<int64_t>(r.out()), ElementsAre(24));
  // Constant runs no kernel: the executor takes its value once (ConstantNodeValue).
  auto constant = [](const std::string& text) {
    return ConstantNodeValue(
        testing::ParseModelText(
            absl::StrCat("<ir_version: 8, opset_import: [\"\" : 17]>\ng () => () {\n  ", text,
                         "\n}\n"))
            .graph()
            .node(0));
  };
  absl::StatusOr<Tensor> c = constant("y = Constant <value_ints = [4, 5]> ()");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dtype(), DType::kInt64);
  EXPECT_THAT(Values<int64_t>(*c), ElementsAre(4, 5));
  c = constant("y = Constant <value_float = 2.5> ()");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->shape(), (Shape{}));
  EXPECT_THAT(Values<float>(*c), ElementsAre(2.5f));
  r = RunOp("y = ConstantOfShape(s)", {I64({2}, {2, 1})});
  ASSERT_RUNS(r);
  EXPECT_EQ(r.out().dtype(), DType::kFloat);
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(0, 0));
  r = RunOp("y = Range(a, b, c)", {I32({}, {10}), I32({}, {1}), I32({}, {-3})});
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<int32_t>(r.out()), ElementsAre(10, 7, 4));
  r = RunOp("y = Range(a, b, c)", {F32({}, {0}), F32({}, {1}), F32({}, {0.25f})});
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<float>(r.out()), ElementsAre(0, 0.25f, 0.5f, 0.75f));
  r = RunOp("y = Range(a, b, c)", {F32({}, {0}), I32({}, {1}), F32({}, {1})});
  EXPECT_THAT(r.status.message(), HasSubstr("differ in type"));
  // FP16/BF16 compute start + i * delta in float and round each once: above 2048 FP16 steps by
  // 2, so 2049 and 2053 tie down to even (2048, 2052) and 2051 and 2055 tie up (2052, 2056).
  const std::vector<uint16_t> fp16 = {FloatToHalf(2048), FloatToHalf(2048), FloatToHalf(2050),
                                      FloatToHalf(2052), FloatToHalf(2052), FloatToHalf(2052),
                                      FloatToHalf(2054), FloatToHalf(2056)};
  for (const std::string stash : {"", "<stash_type = 11> "}) {
    r = RunOp("y = Range " + stash + "(a, b, c)",
              {testing::Halves({}, {2048}), testing::Halves({}, {2056}), testing::Halves({}, {1})},
              27);
    ASSERT_RUNS(r);
    EXPECT_EQ(Values<uint16_t>(r.out()), fp16) << stash;
  }
  // BF16 1, 3 (0x3f80, 0x4040).
  r = RunOp("y = Range(a, b, c)",
            {Make(DType::kBFloat16, {}, std::vector<uint16_t>{0x3f80}),
             Make(DType::kBFloat16, {}, std::vector<uint16_t>{0x40a0}),
             Make(DType::kBFloat16, {}, std::vector<uint16_t>{0x4000})},
            27);
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<uint16_t>(r.out()), ElementsAre(0x3f80, 0x4040));
  r = RunOp("y = Range <stash_type = 10> (a, b, c)",
            {testing::Halves({}, {0}), testing::Halves({}, {1}), testing::Halves({}, {1})}, 27);
  EXPECT_THAT(r.status.message(), HasSubstr("stash_type 10"));
  r = RunOp("y = EyeLike <k = 1> (x)", {Iota(DType::kFloat16, {2, 3})});
  ASSERT_RUNS(r);
  EXPECT_THAT(Values<uint16_t>(r.out()), ElementsAre(0, 0x3C00, 0, 0, 0, 0x3C00));
}

// ---- whole models through a Session (shape inference, dtype constraints, views) ----

TEST(TensorKernelsTest, SessionRunsAReshapeTransposeGatherChain) {
  auto session = Session::Create(testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float16[6] x, int64[2] s, int64[2] i) => (float16[2, 3] y) {
  r = Reshape(x, s)
  t = Transpose(r)
  y = Gather(t, i)
}
)"),
                                 DefaultRegistry(), testing::TestBackend());
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<Tensor> inputs = {Iota(DType::kFloat16, {6}), I64({2}, {3, 2}), I64({2}, {1, 0})};
  auto outputs = (*session)->Run(inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  // r = [[0,1],[2,3],[4,5]]; t = [[0,2,4],[1,3,5]]; y = t[[1,0]] = [[1,3,5],[0,2,4]].
  EXPECT_EQ((*outputs)[0].shape(), (Shape{2, 3}));
  std::vector<float> got;
  for (uint16_t h : Values<uint16_t>((*outputs)[0])) got.push_back(HalfToFloat(h));
  EXPECT_THAT(got, ElementsAreArray({1, 3, 5, 0, 2, 4}));
}

TEST(TensorKernelsTest, UnsupportedIndexTypeFailsAtSessionCreation) {
  auto session = Session::Create(testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[3] x, float[1] i) => (float[1] y) {
  y = Gather(x, i)
}
)"),
                                 DefaultRegistry(), testing::TestBackend());
  EXPECT_FALSE(session.ok());
}

}  // namespace
}  // namespace ampc
