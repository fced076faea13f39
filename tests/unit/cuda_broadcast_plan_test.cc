// The CUDA launchers' index plans (kernels/cuda/broadcast_plan.h), checked on the host: broadcast
// offsets against the CPU backend's BroadcastIndex, strided (transpose) offsets against naive
// indexing, and the simplifications (dropped and merged dims, flat inputs, 32-bit indexing).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "kernels/cpu/broadcast.h"
#include "kernels/cuda/broadcast_plan.h"

namespace ampc::cuda {
namespace {

using Dims = std::vector<int64_t>;

// Every output element's input offsets from the CPU's BroadcastIndex, input-major.
std::vector<std::vector<int64_t>> CpuOffsets(const Dims& out, const std::vector<Dims>& inputs) {
  std::vector<const Shape*> shapes;
  for (const Dims& d : inputs) shapes.push_back(&d);
  BroadcastIndex index(out, shapes);
  std::vector<std::vector<int64_t>> offsets(inputs.size());
  index.ForRange(0, ElementCount(out), [&](int64_t, std::span<const int64_t> o) {
    for (size_t k = 0; k < inputs.size(); ++k) offsets[k].push_back(o[k]);
  });
  return offsets;
}

template <int kInputs, typename Index>
std::vector<std::vector<int64_t>> PlanOffsetsOf(const IndexPlan& plan) {
  std::vector<std::vector<int64_t>> offsets(kInputs);
  for (int64_t i = 0; i < plan.count; ++i) {
    Index o[kInputs];
    PlanOffsets<kInputs>(plan, static_cast<Index>(i), o);
    for (int k = 0; k < kInputs; ++k) offsets[k].push_back(static_cast<int64_t>(o[k]));
  }
  return offsets;
}

template <int kInputs>
void ExpectMatchesCpu(const std::vector<Dims>& inputs) {
  std::vector<const Shape*> shapes;
  for (const Dims& d : inputs) shapes.push_back(&d);
  const std::optional<Shape> out = BroadcastShapes(shapes);
  ASSERT_TRUE(out.has_value());
  IndexPlan plan;
  ASSERT_TRUE(PlanBroadcast(*out, inputs, &plan)) << ShapeString(*out);
  EXPECT_EQ(plan.count, ElementCount(*out));
  EXPECT_LE(plan.rank, static_cast<int>(out->size()));
  EXPECT_EQ(plan.num_inputs, kInputs);
  const auto expected = CpuOffsets(*out, inputs);
  std::string label = "out " + ShapeString(*out);
  for (const Dims& d : inputs) label += " in " + ShapeString(d);
  EXPECT_EQ((PlanOffsetsOf<kInputs, uint32_t>(plan)), expected) << label;
  EXPECT_EQ((PlanOffsetsOf<kInputs, int64_t>(plan)), expected) << label;
}

// An output shape of rank 0..6 and inputs that broadcast to it: each input keeps a suffix of the
// output's dims with some of them set to 1.
std::vector<Dims> RandomInputs(int count, std::mt19937& rng) {
  const int rank = std::uniform_int_distribution<int>(0, 6)(rng);
  Dims out(rank);
  for (int64_t& d : out) d = std::uniform_int_distribution<int>(1, 4)(rng);
  std::vector<Dims> inputs;
  for (int k = 0; k < count; ++k) {
    const int r = std::uniform_int_distribution<int>(0, rank)(rng);
    Dims in(out.end() - r, out.end());
    for (int64_t& d : in) {
      if (rng() % 3 == 0) d = 1;
    }
    inputs.push_back(in);
  }
  return inputs;
}

TEST(CudaBroadcastPlanTest, TwoInputOffsetsEqualCpuBroadcastIndex) {
  std::mt19937 rng(1);
  for (int trial = 0; trial < 2000; ++trial) {
    ExpectMatchesCpu<2>(RandomInputs(2, rng));
    if (HasFailure()) return;
  }
}

TEST(CudaBroadcastPlanTest, ThreeInputOffsetsEqualCpuBroadcastIndex) {
  std::mt19937 rng(2);
  for (int trial = 0; trial < 2000; ++trial) {
    ExpectMatchesCpu<3>(RandomInputs(3, rng));
    if (HasFailure()) return;
  }
}

TEST(CudaBroadcastPlanTest, ListedShapesEqualCpuBroadcastIndex) {
  const std::vector<std::vector<Dims>> cases = {
      {{}, {}},                // scalars
      {{2, 3, 4}, {}},         // scalar broadcast
      {{2, 3, 4}, {4}},        // row
      {{2, 3, 4}, {3, 1}},     // column
      {{2, 1, 4}, {1, 3, 1}},  // both ways
      {{5, 1}, {1, 7}},        // outer product
      {{1, 1, 1}, {1}},        // all ones
      {{2, 3, 4}, {2, 3, 4}},  // same shape
      {{3, 1, 5, 1, 2}, {5, 4, 1}},
  };
  for (const std::vector<Dims>& inputs : cases) ExpectMatchesCpu<2>(inputs);
}

TEST(CudaBroadcastPlanTest, ShapesThatDoNotBroadcastAreRejected) {
  IndexPlan plan;
  EXPECT_FALSE(PlanBroadcast({2, 3}, {{2, 3}, {3, 2}}, &plan));
  EXPECT_FALSE(PlanBroadcast({3}, {{3}, {2, 3}}, &plan));  // input rank above the output's
  EXPECT_FALSE(PlanBroadcast({4}, {{2}}, &plan));
  EXPECT_TRUE(PlanBroadcast({4}, {{1}}, &plan));
  EXPECT_FALSE(PlanStrided({2}, {}, &plan));                    // no input
  EXPECT_FALSE(PlanStrided({2}, {{1}, {1}, {1}, {1}}, &plan));  // more than three
  EXPECT_FALSE(PlanStrided({2}, {{-1}}, &plan));
  EXPECT_FALSE(PlanStrided({2, 2}, {{1}}, &plan));  // strides of the wrong rank
}

TEST(CudaBroadcastPlanTest, SameShapeAndSingleElementInputsAreFlat) {
  IndexPlan plan;
  bool scalar = false;
  ASSERT_TRUE(PlanBroadcast({4, 5, 6}, {{4, 5, 6}, {4, 5, 6}}, &plan));
  EXPECT_EQ(plan.rank, 1);
  EXPECT_EQ(plan.dims[0], 120);
  EXPECT_TRUE(IsFlatInput(plan, 0, &scalar));
  EXPECT_FALSE(scalar);
  EXPECT_TRUE(IsFlatInput(plan, 1, &scalar));
  EXPECT_FALSE(scalar);

  ASSERT_TRUE(PlanBroadcast({4, 5, 6}, {{4, 5, 6}, {1, 1, 1}}, &plan));
  EXPECT_TRUE(IsFlatInput(plan, 1, &scalar));
  EXPECT_TRUE(scalar);
  ASSERT_TRUE(PlanBroadcast({4, 5, 6}, {{}, {4, 5, 6}}, &plan));
  EXPECT_TRUE(IsFlatInput(plan, 0, &scalar));
  EXPECT_TRUE(scalar);

  ASSERT_TRUE(PlanBroadcast({4, 5, 6}, {{4, 5, 6}, {6}}, &plan));
  EXPECT_EQ(plan.rank, 2);  // [20, 6]: the row input repeats
  EXPECT_FALSE(IsFlatInput(plan, 1, &scalar));

  ASSERT_TRUE(PlanBroadcast({}, {{}, {}}, &plan));
  EXPECT_EQ(plan.rank, 0);
  EXPECT_EQ(plan.count, 1);
  EXPECT_TRUE(IsFlatInput(plan, 0, &scalar));
  EXPECT_TRUE(scalar);
}

TEST(CudaBroadcastPlanTest, EmptyOutputHasNoElements) {
  IndexPlan plan;
  ASSERT_TRUE(PlanBroadcast({3, 0}, {{3, 0}, {1, 0}}, &plan));
  EXPECT_EQ(plan.count, 0);
  EXPECT_EQ(InputExtent(plan, 0), 0);
}

// Transpose: output dim d reads input dim perm[d]; checked against unravelling each index.
TEST(CudaBroadcastPlanTest, PermutedStridesEqualNaiveTransposeIndexing) {
  std::mt19937 rng(4);
  for (int trial = 0; trial < 1000; ++trial) {
    const int rank = std::uniform_int_distribution<int>(1, 6)(rng);
    Dims in(rank);
    for (int64_t& d : in) d = std::uniform_int_distribution<int>(1, 4)(rng);
    Dims in_strides(rank, 1);
    for (int d = rank - 2; d >= 0; --d) in_strides[d] = in_strides[d + 1] * in[d + 1];
    std::vector<int> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    Dims out(rank), strides(rank);
    for (int d = 0; d < rank; ++d) {
      out[d] = in[perm[d]];
      strides[d] = in_strides[perm[d]];
    }
    IndexPlan plan;
    ASSERT_TRUE(PlanStrided(out, {strides}, &plan));
    const int64_t count = ElementCount(out);
    ASSERT_EQ(plan.count, count);
    for (int64_t i = 0; i < count; ++i) {
      int64_t rest = i, expected = 0;
      for (int d = rank - 1; d >= 0; --d) {
        expected += (rest % out[d]) * strides[d];
        rest /= out[d];
      }
      uint32_t o32[1];
      int64_t o64[1];
      PlanOffsets<1>(plan, static_cast<uint32_t>(i), o32);
      PlanOffsets<1>(plan, i, o64);
      ASSERT_EQ(o32[0], expected) << "trial " << trial << " index " << i;
      ASSERT_EQ(o64[0], expected) << "trial " << trial << " index " << i;
    }
  }
}

// Applies a one-input plan on the host: out[i] = in[offset of i].
std::vector<int64_t> CopyByPlan(const IndexPlan& plan, const std::vector<int64_t>& in) {
  std::vector<int64_t> out(static_cast<size_t>(plan.count));
  for (int64_t i = 0; i < plan.count; ++i) {
    int64_t o[1];
    PlanOffsets<1>(plan, i, o);
    out[i] = in[o[0]];
  }
  return out;
}

TEST(CudaBroadcastPlanTest, LayoutSwapsEqualNaiveNhwcIndexingAndRoundTrip) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int spatial = std::uniform_int_distribution<int>(1, 3)(rng);
    Dims dims(spatial + 2);
    for (int64_t& d : dims) d = std::uniform_int_distribution<int>(1, 5)(rng);
    const int64_t n = dims[0], c = dims[1], count = ElementCount(dims), space = count / (n * c);
    std::vector<int64_t> nchw(count);
    std::iota(nchw.begin(), nchw.end(), 0);
    // NHWC by hand: element (b, ch, s) of NCHW, s the flattened spatial index, goes to
    // (b * space + s) * c + ch.
    std::vector<int64_t> nhwc(count);
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t ch = 0; ch < c; ++ch) {
        for (int64_t sp = 0; sp < space; ++sp) {
          nhwc[(b * space + sp) * c + ch] = nchw[(b * c + ch) * space + sp];
        }
      }
    }
    IndexPlan to_nhwc, to_nchw;
    ASSERT_TRUE(PlanLayoutSwap(dims, /*from_nchw=*/true, &to_nhwc));
    ASSERT_TRUE(PlanLayoutSwap(dims, /*from_nchw=*/false, &to_nchw));
    EXPECT_EQ(CopyByPlan(to_nhwc, nchw), nhwc) << ShapeString(dims);
    EXPECT_EQ(CopyByPlan(to_nchw, nhwc), nchw) << ShapeString(dims);
  }
  IndexPlan plan;
  EXPECT_FALSE(PlanLayoutSwap({4}, true, &plan));
}

TEST(CudaBroadcastPlanTest, MoreThanEightDimsOnlyWhenTheyMerge) {
  IndexPlan plan;
  // Ten dims, contiguous: one dim after merging.
  const Dims ten = {2, 1, 2, 2, 1, 2, 2, 2, 1, 2};
  ASSERT_TRUE(PlanBroadcast(ten, {ten, ten}, &plan));
  EXPECT_EQ(plan.rank, 1);
  EXPECT_EQ(plan.dims[0], 128);
  // Nine dims that alternate between read and broadcast cannot merge.
  const Dims out(9, 2);
  const Dims alternating = {2, 1, 2, 1, 2, 1, 2, 1, 2};
  EXPECT_FALSE(PlanBroadcast(out, {out, alternating}, &plan));
  // Eight such dims fit.
  const Dims out8(8, 2);
  const Dims alternating8 = {2, 1, 2, 1, 2, 1, 2, 1};
  ASSERT_TRUE(PlanBroadcast(out8, {out8, alternating8}, &plan));
  EXPECT_EQ(plan.rank, 8);
}

TEST(CudaBroadcastPlanTest, ThirtyTwoBitIndexingOnlyBelowTwoToThe31) {
  IndexPlan plan;
  const int64_t limit = int64_t{1} << 31;
  ASSERT_TRUE(PlanStrided({limit - 1}, {{1}}, &plan));
  EXPECT_TRUE(FitsIndex32(plan));
  ASSERT_TRUE(PlanStrided({limit}, {{1}}, &plan));
  EXPECT_FALSE(FitsIndex32(plan));
  // Few outputs, but the input reaches past 2^31 elements.
  ASSERT_TRUE(PlanStrided({2}, {{limit}}, &plan));
  EXPECT_EQ(InputExtent(plan, 0), limit + 1);
  EXPECT_FALSE(FitsIndex32(plan));
}

}  // namespace
}  // namespace ampc::cuda
