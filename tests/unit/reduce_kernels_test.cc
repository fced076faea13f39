// Reduce-family CPU kernels: reductions, ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax, CumSum,
// CumProd, TopK and the classification losses. Expected values come from reference loops written
// here (in double) or from hand computation. ONNX's own test cases run in ampc-conformance.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/session.h"
#include "tests/support/kernel_runs.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

using testing::Floats;
using testing::Halves;
using testing::Int64s;
using testing::Make;
using testing::Values;

using ::testing::HasSubstr;

float HalfAt(const Tensor& t, int64_t i) { return HalfToFloat(t.data<Half>()[i].bits); }

// 0, 1, ..., n-1 scaled and shifted so values are distinct, mixed in sign and not round.
std::vector<float> Ramp(int n, float scale = 0.37f, float shift = -2.1f) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = shift + scale * static_cast<float>((i * 7) % n);
  return v;
}

class ReduceKernelsTest : public testing::KernelTest {
 protected:
  absl::Status Create(const std::string& text) {
    return Session::Create(testing::ParseModelText(text), DefaultRegistry(), backend_).status();
  }
  // Every ReduceSum/ReduceSumSquare/ReduceL1 over every axis set of a rank-4 `shape`, FP32 and
  // FP16, bit for bit against the chunked order written out as a loop.
  void ExpectChunkedSums(const Shape& shape);
};

// A reference reduction of a [2,3,4] float input over `axes` (keepdims irrelevant to the order),
// in double: init, fold, finish.
std::vector<double> ReferenceReduce(const std::vector<float>& x, std::vector<bool> reduced,
                                    double init, std::function<double(double, double)> fold,
                                    std::function<double(double, int)> finish) {
  const int dims[3] = {2, 3, 4};
  std::vector<double> out;
  std::vector<int> counts;
  for (int a = 0; a < (reduced[0] ? 1 : 2); ++a) {
    for (int b = 0; b < (reduced[1] ? 1 : 3); ++b) {
      for (int c = 0; c < (reduced[2] ? 1 : 4); ++c) {
        double acc = init;
        int n = 0;
        for (int i = 0; i < dims[0]; ++i) {
          for (int j = 0; j < dims[1]; ++j) {
            for (int k = 0; k < dims[2]; ++k) {
              if ((!reduced[0] && i != a) || (!reduced[1] && j != b) || (!reduced[2] && k != c)) {
                continue;
              }
              acc = fold(acc, x[(i * 3 + j) * 4 + k]);
              ++n;
            }
          }
        }
        out.push_back(finish(acc, n));
      }
    }
  }
  return out;
}

struct ReduceCase {
  std::string op;
  double init;
  std::function<double(double, double)> fold;
  std::function<double(double, int)> finish;
};

TEST_F(ReduceKernelsTest, EveryReductionOverAxesZeroAndTwoMatchesAReferenceLoop) {
  auto id = [](double a, int) { return a; };
  const std::vector<ReduceCase> cases = {
      {"ReduceSum", 0, [](double a, double v) { return a + v; }, id},
      {"ReduceMean", 0, [](double a, double v) { return a + v; },
       [](double a, int n) { return a / n; }},
      {"ReduceMax", -INFINITY, [](double a, double v) { return std::max(a, v); }, id},
      {"ReduceMin", INFINITY, [](double a, double v) { return std::min(a, v); }, id},
      {"ReduceProd", 1, [](double a, double v) { return a * v; }, id},
      {"ReduceL1", 0, [](double a, double v) { return a + std::abs(v); }, id},
      {"ReduceL2", 0, [](double a, double v) { return a + v * v; },
       [](double a, int) { return std::sqrt(a); }},
      {"ReduceSumSquare", 0, [](double a, double v) { return a + v * v; }, id},
      {"ReduceLogSumExp", 0, [](double a, double v) { return a + std::exp(v); },
       [](double a, int) { return std::log(a); }},
  };
  const std::vector<float> x = Ramp(24);
  const std::vector<double> sums = ReferenceReduce(
      x, {true, false, true}, 0, [](double a, double v) { return a + std::abs(v); }, id);
  for (const ReduceCase& c : cases) {
    SCOPED_TRACE(c.op);
    auto out = Run(R"(<ir_version: 8, opset_import: ["" : 11]>
g (float[2,3,4] x) => (float[1,3,1] y) { y = )" +
                       c.op + R"(<axes = [0, -1]>(x) })",
                   {Floats({2, 3, 4}, x)});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape(), (Shape{1, 3, 1}));
    const std::vector<double> want =
        ReferenceReduce(x, {true, false, true}, c.init, c.fold, c.finish);
    const std::vector<float> got = Values<float>((*out)[0]);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-5 * std::abs(want[i]) + 1e-6);
  }
  // ReduceLogSum of |x| (LogSum needs positive sums).
  std::vector<float> positive(x.size());
  for (size_t i = 0; i < x.size(); ++i) positive[i] = std::abs(x[i]);
  auto out = Run(R"(<ir_version: 8, opset_import: ["" : 11]>
g (float[2,3,4] x) => (float[3] y) { y = ReduceLogSum<axes = [0, 2], keepdims = 0>(x) })",
                 {Floats({2, 3, 4}, positive)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{3}));
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(Values<float>((*out)[0])[i], std::log(sums[i]), 1e-5);
}

TEST_F(ReduceKernelsTest, DefaultAxesReduceEverythingAndKeepDims) {
  auto out = Run(R"(<ir_version: 8, opset_import: ["" : 11]>
g (float[2,3] x) => (float[1,1] y) { y = ReduceMax(x) })",
                 {Floats({2, 3}, {1, 9, -3, 4, 5, 6})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 1}));
  EXPECT_EQ(Values<float>((*out)[0]), std::vector<float>{9});
}

constexpr char kReduceSum13[] = R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x, int64[N] axes) => (float[M] y) { y = ReduceSum<keepdims = 0>(x, axes) })";

TEST_F(ReduceKernelsTest, ReduceSumTakesAxesAsAnInputFromOpset13) {
  const Tensor x = Floats({2, 3}, {1, 2, 3, 10, 20, 30});
  auto rows = Run(kReduceSum13, {x, Int64s({1}, {-1})});
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ((*rows)[0].shape(), (Shape{2}));
  EXPECT_EQ(Values<float>((*rows)[0]), (std::vector<float>{6, 60}));
  auto all = Run(kReduceSum13, {x, Int64s({0}, {})});  // empty axes: reduce all
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ((*all)[0].shape(), Shape{});
  EXPECT_EQ(Values<float>((*all)[0]), std::vector<float>{66});
}

TEST_F(ReduceKernelsTest, ReduceSumWithNoopForEmptyAxesReturnsTheInput) {
  auto out = Run(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x, int64[0] axes) => (float[2,3] y) {
  y = ReduceSum<noop_with_empty_axes = 1>(x, axes)
})",
                 {Floats({2, 3}, {1, 2, 3, 4, 5, 6}), Int64s({0}, {})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST_F(ReduceKernelsTest, LargeReductionsOverEitherAxisMatchAReferenceLoop) {
  // [600, 70]: reducing axis 0 walks strided columns; axis 1 contiguous rows; both run in
  // parallel chunks.
  const int rows = 600, cols = 70;
  const std::vector<float> x = Ramp(rows * cols, 0.001f, -20.0f);
  for (int axis : {0, 1}) {
    SCOPED_TRACE(axis);
    const int outputs = axis == 0 ? cols : rows;
    auto out = Run(R"(<ir_version: 8, opset_import: ["" : 11]>
g (float[600,70] x) => (float[)" +
                       std::to_string(outputs) + R"(] y) { y = ReduceSum<keepdims = 0, axes = [)" +
                       std::to_string(axis) + "]>(x) }",
                   {Floats({rows, cols}, x)});
    ASSERT_TRUE(out.ok()) << out.status();
    for (int o = 0; o < outputs; ++o) {
      double want = 0;
      for (int k = 0; k < (axis == 0 ? rows : cols); ++k) {
        want += axis == 0 ? x[k * cols + o] : x[o * cols + k];
      }
      EXPECT_NEAR(Values<float>((*out)[0])[o], want, 1e-5 * std::abs(want) + 1e-4);
    }
  }
}

// The contract every sum-like reduction keeps, whichever loop runs it (side-by-side rows when the
// kept dims are adjacent, the generic loop otherwise): each output adds its terms in the input's
// order, in FP32 sums of 4096 terms that add up in double, then rounds once. Written out here for
// all 16 axis sets of [3, 5, 4, 700] (ReduceSum over (0, 2, 3) has 8400 terms per output), in FP32
// and FP16 (widened, and the sum rounded once).
TEST_F(ReduceKernelsTest, SumsAddInInputOrderInChunksForEveryAxisSet) {
  // Rows longer than a 512-value block (chunks of 4096 within a row), and rows of 7 to 70 values
  // whose lanes are widened together.
  for (const Shape& shape : {Shape{3, 5, 4, 700}, Shape{6, 10, 3, 7}}) {
    ExpectChunkedSums(shape);
  }
}

void ReduceKernelsTest::ExpectChunkedSums(const Shape& shape) {
  const int dims[4] = {static_cast<int>(shape[0]), static_cast<int>(shape[1]),
                       static_cast<int>(shape[2]), static_cast<int>(shape[3])};
  const int count = dims[0] * dims[1] * dims[2] * dims[3];
  const std::string shape_text = absl::StrCat("[", absl::StrJoin(shape, ","), "]");
  std::vector<float> x(count);
  uint32_t seed = 5;
  for (float& v : x) {  // magnitudes 2^-8..2^8 and both signs, so the order shows in the low bits
    seed = seed * 1664525u + 1013904223u;
    v = std::ldexp(static_cast<float>(seed >> 9) * 0x1p-23f, static_cast<int>(seed % 17) - 8) *
        ((seed & 0x100) ? -1.0f : 1.0f);
  }
  const std::vector<std::pair<std::string, std::function<float(float)>>> ops = {
      {"ReduceSum", [](float v) { return v; }},
      {"ReduceSumSquare", [](float v) { return v * v; }},
      {"ReduceL1", [](float v) { return std::abs(v); }}};
  for (const bool fp16 : {false, true}) {
    if (fp16) {
      for (float& v : x) v = HalfToFloat(FloatToHalf(v));
    }
    const std::string type = fp16 ? "float16" : "float";
    for (int mask = 0; mask < 16; ++mask) {
      std::vector<int> axes, kept_dims;
      for (int d = 0; d < 4; ++d) (mask >> d & 1 ? axes : kept_dims).push_back(d);
      if (axes.empty()) continue;  // no axes: everything (mask 15's case)
      for (const auto& [op, term] : ops) {
        SCOPED_TRACE(absl::StrCat(op, " over axes mask ", mask, " in ", type, shape_text));
        auto out = Run(absl::StrCat(R"(<ir_version: 8, opset_import: ["" : 11]>
g ()",
                                    type, shape_text, " x) => (", type, " y) { y = ", op,
                                    "<keepdims = 0, axes = [", absl::StrJoin(axes, ","), "]>(x) }"),
                       {fp16 ? Halves(shape, x) : Floats(shape, x)});
        ASSERT_TRUE(out.ok()) << out.status();
        std::vector<float> got((*out)[0].size());
        for (size_t o = 0; o < got.size(); ++o) {
          got[o] = fp16 ? HalfAt((*out)[0], o) : (*out)[0].data<float>()[o];
        }
        // Output o's terms: the elements whose kept indices spell o, in the input's order.
        std::vector<double> total(got.size(), 0);
        std::vector<float> chunk(got.size(), 0);
        std::vector<int> filled(got.size(), 0);
        for (int i = 0; i < count; ++i) {
          int rest = i, index[4];
          for (int d = 3; d >= 0; --d) {
            index[d] = rest % dims[d];
            rest /= dims[d];
          }
          int o = 0;
          for (int d : kept_dims) o = o * dims[d] + index[d];
          chunk[o] += term(x[i]);
          if (++filled[o] == 4096) {
            total[o] += chunk[o];
            chunk[o] = 0;
            filled[o] = 0;
          }
        }
        ASSERT_EQ(got.size(), total.size());
        for (size_t o = 0; o < got.size(); ++o) {
          const float want = static_cast<float>(total[o] + chunk[o]);
          ASSERT_EQ(got[o], fp16 ? HalfToFloat(FloatToHalf(want)) : want) << "output " << o;
        }
      }
    }
  }
}

TEST_F(ReduceKernelsTest, ReducingAnEmptyAxisGivesTheIdentity) {
  for (auto [op, want] :
       std::vector<std::pair<std::string, float>>{{"ReduceSum", 0.0f},
                                                  {"ReduceProd", 1.0f},
                                                  {"ReduceMax", -INFINITY},
                                                  {"ReduceMin", INFINITY},
                                                  {"ReduceLogSumExp", -INFINITY}}) {
    SCOPED_TRACE(op);
    auto out = Run(R"(<ir_version: 8, opset_import: ["" : 11]>
g (float[2,0] x) => (float[2] y) { y = )" +
                       op + R"(<axes = [1], keepdims = 0>(x) })",
                   {Tensor::Host(DType::kFloat, {2, 0})});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{want, want}));
  }
}

TEST_F(ReduceKernelsTest, Fp16SumAccumulatesWideAndRoundsOnce) {
  // 4096 ones: an FP16 accumulator stops at 2048 (2048 + 1 rounds back to 2048); FP32 gives 4096.
  auto ones = Run(R"(<ir_version: 8, opset_import: ["" : 11]>
g (float16[4096] x) => (float16[1] y) { y = ReduceSum(x) })",
                  {Halves({4096}, std::vector<float>(4096, 1.0f))});
  ASSERT_TRUE(ones.ok()) << ones.status();
  EXPECT_EQ(HalfAt((*ones)[0], 0), 4096.0f);
  // 10000 x FP16(0.1) = 10000 * 819/8192 = 999.755859375, exact in FP32; FP16 has spacing 0.5
  // near 1000, so rounding once gives 1000. (An FP16 accumulator would stall at 256.)
  auto tenths = Run(R"(<ir_version: 8, opset_import: ["" : 11]>
g (float16[10000] x) => (float16[1] y) { y = ReduceSum(x) })",
                    {Halves({10000}, std::vector<float>(10000, 0.1f))});
  ASSERT_TRUE(tenths.ok()) << tenths.status();
  EXPECT_EQ(HalfAt((*tenths)[0], 0), 1000.0f);
  // Mean of the same: 0.0999755859375 is exactly FP16(0.1).
  auto mean = Run(R"(<ir_version: 8, opset_import: ["" : 11]>
g (float16[10000] x) => (float16[1] y) { y = ReduceMean(x) })",
                  {Halves({10000}, std::vector<float>(10000, 0.1f))});
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_EQ(HalfAt((*mean)[0], 0), 819.0f / 8192.0f);
}

TEST_F(ReduceKernelsTest, Bf16SumAccumulatesWide) {
  // BF16 has 8 significant bits: a BF16 accumulator stops at 256; 1000 is exact in BF16.
  Tensor x = Tensor::Host(DType::kBFloat16, {1000});
  for (int i = 0; i < 1000; ++i) x.data<BFloat16>()[i] = BFloat16{FloatToBFloat16(1.0f)};
  auto out = Run(R"(<ir_version: 8, opset_import: ["" : 11]>
g (bfloat16[1000] x) => (bfloat16[1] y) { y = ReduceSum(x) })",
                 {x});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(BFloat16ToFloat((*out)[0].data<BFloat16>()[0].bits), 1000.0f);
}

TEST_F(ReduceKernelsTest, Fp32SumsDoNotDriftOverMillionsOfTerms) {
  // 2^24 + 8192 ones: a float running sum stops at 2^24 (2^24 + 1 rounds back to it); the sum,
  // 16785408, is a float. Global average pooling sums the same way.
  constexpr int64_t kCount = (int64_t{1} << 24) + 8192;
  const std::vector<float> ones(kCount, 1.0f);
  for (const char* op : {"ReduceSum", "ReduceMean"}) {
    auto out = Run(absl::StrCat(R"(<ir_version: 8, opset_import: ["" : 11]>
g (float[16785408] x) => (float[1] y) { y = )",
                                op, "(x) }"),
                   {Floats({kCount}, ones)});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Values<float>((*out)[0])[0],
              std::string(op) == "ReduceSum" ? static_cast<float>(kCount) : 1.0f)
        << op;
  }
  auto pooled = Run(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 1, 1, 16785408] x) => (float[1, 1, 1, 1] y) { y = GlobalAveragePool(x) })",
                    {Floats({1, 1, 1, kCount}, ones)});
  ASSERT_TRUE(pooled.ok()) << pooled.status();
  EXPECT_EQ(Values<float>((*pooled)[0])[0], 1.0f);
}

TEST_F(ReduceKernelsTest, IntegerReductions) {
  const Tensor x = Make<int32_t>(DType::kInt32, {2, 3}, {1, -2, 3, 4, 5, -7});
  for (auto [op, want] :
       std::vector<std::pair<std::string, std::vector<int32_t>>>{{"ReduceSum", {2, 2}},
                                                                 {"ReduceMax", {3, 5}},
                                                                 {"ReduceMin", {-2, -7}},
                                                                 {"ReduceProd", {-6, -140}},
                                                                 {"ReduceMean", {0, 0}}}) {
    SCOPED_TRACE(op);
    auto out = Run(R"(<ir_version: 8, opset_import: ["" : 11]>
g (int32[2,3] x) => (int32[2] y) { y = )" +
                       op + R"(<axes = [1], keepdims = 0>(x) })",
                   {x});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Values<int32_t>((*out)[0]), want);
  }
  auto mean = Run(R"(<ir_version: 8, opset_import: ["" : 11]>
g (int64[2,2] x) => (int64[2] y) { y = ReduceMean<axes = [0], keepdims = 0>(x) })",
                  {Int64s({2, 2}, {7, 100, 2, 1})});
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_EQ(Values<int64_t>((*mean)[0]), (std::vector<int64_t>{4, 50}));  // 9/2, 101/2 truncated
}

TEST_F(ReduceKernelsTest, LogSumExpOfLargeValuesDoesNotOverflow) {
  // log(e^1000 + e^1000) = 1000 + log 2.
  auto out = Run(R"(<ir_version: 8, opset_import: ["" : 11]>
g (float[2] x) => (float[1] y) { y = ReduceLogSumExp(x) })",
                 {Floats({2}, {1000, 1000})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FLOAT_EQ(Values<float>((*out)[0])[0], 1000.0f + std::log(2.0f));
}

TEST_F(ReduceKernelsTest, BadAxesAreErrorsNamingTheNode) {
  auto out_of_range = Run(R"(<ir_version: 8, opset_import: ["" : 11]>
g (float[2,3] x) => (float[2] y) { y = ReduceSum<axes = [2]>(x) })",
                          {Floats({2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_THAT(out_of_range.status().message(),
              HasSubstr("ReduceSum node producing 'y': axes value 2 is out of range"));
  auto repeated = Run(kReduceSum13, {Floats({2, 3}, {1, 2, 3, 4, 5, 6}), Int64s({2}, {1, -1})});
  ASSERT_FALSE(repeated.ok());
  EXPECT_THAT(repeated.status().message(), HasSubstr("repeated"));
}

TEST_F(ReduceKernelsTest, ArgMaxAndArgMinPickFirstOrLastOfTies) {
  const Tensor x = Floats({2, 4}, {3, 7, 7, 1, 5, 5, 2, 2});
  struct Case {
    std::string op, attributes;
    std::vector<int64_t> want;
    Shape shape;
  };
  for (const Case& c :
       std::vector<Case>{{"ArgMax", "axis = 1", {1, 0}, {2, 1}},
                         {"ArgMax", "axis = 1, select_last_index = 1", {2, 1}, {2, 1}},
                         {"ArgMin", "axis = -1, keepdims = 0", {3, 2}, {2}},
                         {"ArgMin", "axis = 1, keepdims = 0, select_last_index = 1", {3, 3}, {2}},
                         {"ArgMax", "axis = 0, keepdims = 0", {1, 0, 0, 1}, {4}}}) {
    SCOPED_TRACE(c.op + " " + c.attributes);
    auto out = Run(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,4] x) => (int64)" +
                       ShapeString(c.shape) + " y) { y = " + c.op + "<" + c.attributes + ">(x) }",
                   {x});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape(), c.shape);
    EXPECT_EQ(Values<int64_t>((*out)[0]), c.want);
  }
  auto ints = Run(R"(<ir_version: 8, opset_import: ["" : 13]>
g (int32[3] x) => (int64[1] y) { y = ArgMax(x) })",
                  {Make<int32_t>(DType::kInt32, {3}, {-5, 8, 2})});
  ASSERT_TRUE(ints.ok()) << ints.status();
  EXPECT_EQ(Values<int64_t>((*ints)[0]), std::vector<int64_t>{1});
}

TEST_F(ReduceKernelsTest, SoftmaxOfLargeLogitsIsStable) {
  // Rows shifted by 1000 and by -1000 give the softmax of [0, 1, 2]: e^k / (1 + e + e^2).
  auto out = Run(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x) => (float[2,3] y, float[2,3] z) { y = Softmax(x)  z = LogSoftmax(x) })",
                 {Floats({2, 3}, {1000, 1001, 1002, -1000, -999, -998})});
  ASSERT_TRUE(out.ok()) << out.status();
  const double sum = 1 + std::exp(1.0) + std::exp(2.0);
  for (int r = 0; r < 2; ++r) {
    for (int k = 0; k < 3; ++k) {
      EXPECT_NEAR(Values<float>((*out)[0])[r * 3 + k], std::exp(k) / sum, 1e-6);
      EXPECT_NEAR(Values<float>((*out)[1])[r * 3 + k], k - std::log(sum), 1e-5);
    }
  }
  // FP16 at the edge of its range: exp(65504) would be inf without subtracting the max.
  auto half = Run(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float16[2] x) => (float16[2] y) { y = Softmax(x) })",
                  {Halves({2}, {65504, 65504})});
  ASSERT_TRUE(half.ok()) << half.status();
  EXPECT_EQ(HalfAt((*half)[0], 0), 0.5f);
  EXPECT_EQ(HalfAt((*half)[0], 1), 0.5f);
}

TEST_F(ReduceKernelsTest, SoftmaxBeforeOpset13CoercesTo2dAfterItsSingleAxis) {
  // x = [[[0, 1], [2, 3]]]; opset 11 axis 1: one row of all four; opset 13 axis 1: pairs (0, 2)
  // and (1, 3) along the middle dim.
  const Tensor x = Floats({1, 2, 2}, {0, 1, 2, 3});
  auto old_softmax = Run(R"(<ir_version: 8, opset_import: ["" : 11]>
g (float[1,2,2] x) => (float[1,2,2] y) { y = Softmax<axis = 1>(x) })",
                         {x});
  ASSERT_TRUE(old_softmax.ok()) << old_softmax.status();
  const double all = 1 + std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  for (int k = 0; k < 4; ++k) {
    EXPECT_NEAR(Values<float>((*old_softmax)[0])[k], std::exp(k) / all, 1e-6);
  }
  auto new_softmax = Run(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,2] x) => (float[1,2,2] y) { y = Softmax<axis = 1>(x) })",
                         {x});
  ASSERT_TRUE(new_softmax.ok()) << new_softmax.status();
  const double low = 1 / (1 + std::exp(2.0)), high = 1 - low;  // softmax([0, 2])
  EXPECT_THAT(
      Values<float>((*new_softmax)[0]),
      ::testing::Pointwise(::testing::FloatNear(1e-6),
                           std::vector<float>{float(low), float(low), float(high), float(high)}));
}

TEST_F(ReduceKernelsTest, HardmaxMarksTheFirstMaximum) {
  auto out = Run(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x) => (float[2,3] y) { y = Hardmax(x) })",
                 {Floats({2, 3}, {1, 4, 4, -1, -2, -3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{0, 1, 0, 1, 0, 0}));
}

TEST_F(ReduceKernelsTest, SoftmaxOnIntegersFailsAtSessionCreation) {
  absl::Status status = Create(R"(<ir_version: 8, opset_import: ["" : 13]>
g (int32[2] x) => (int32[2] y) { y = Softmax(x) })");
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("int32"));
}

TEST_F(ReduceKernelsTest, CumSumExclusiveAndReverse) {
  const Tensor x = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  struct Case {
    std::string attributes;
    int64_t axis;
    std::vector<float> want;
  };
  for (const Case& c : std::vector<Case>{{"exclusive = 0", 1, {1, 3, 6, 4, 9, 15}},
                                         {"exclusive = 1", 1, {0, 1, 3, 0, 4, 9}},
                                         {"reverse = 1", -1, {6, 5, 3, 15, 11, 6}},
                                         {"exclusive = 1, reverse = 1", 1, {5, 3, 0, 11, 6, 0}},
                                         {"exclusive = 0", 0, {1, 2, 3, 5, 7, 9}}}) {
    SCOPED_TRACE(c.attributes + " axis " + std::to_string(c.axis));
    auto out = Run(R"(<ir_version: 8, opset_import: ["" : 14]>
g (float[2,3] x, int64[] axis) => (float[2,3] y) { y = CumSum<)" +
                       c.attributes + ">(x, axis) }",
                   {x, Int64s({}, {c.axis})});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Values<float>((*out)[0]), c.want);
  }
}

TEST_F(ReduceKernelsTest, CumSumInFp16AccumulatesInFp32) {
  // Running sums of 3000 ones: FP16 storage rounds each (2049 -> 2048, 2051 -> 2052) but the
  // accumulator keeps counting, so the last is 3000 (an FP16 accumulator would stay at 2048).
  auto out =
      Run(R"(<ir_version: 8, opset_import: ["" : 14]>
g (float16[3000] x, int32[] axis) => (float16[3000] y) { y = CumSum(x, axis) })",
          {Halves({3000}, std::vector<float>(3000, 1.0f)), Make<int32_t>(DType::kInt32, {}, {0})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(HalfAt((*out)[0], 2999), 3000.0f);
  EXPECT_EQ(HalfAt((*out)[0], 2048), 2048.0f);  // 2049 ties to even
  EXPECT_EQ(HalfAt((*out)[0], 2050), 2052.0f);  // 2051 ties to even
}

TEST_F(ReduceKernelsTest, CumProdExclusiveAndReverse) {
  const Tensor x = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  struct Case {
    std::string attributes;
    int64_t axis;
    std::vector<float> want;
  };
  for (const Case& c : std::vector<Case>{{"exclusive = 0", 1, {1, 2, 6, 4, 20, 120}},
                                         {"exclusive = 1", 1, {1, 1, 2, 1, 4, 20}},
                                         {"reverse = 1", -1, {6, 6, 3, 120, 30, 6}},
                                         {"exclusive = 1, reverse = 1", 1, {6, 3, 1, 30, 6, 1}},
                                         {"exclusive = 0", 0, {1, 2, 3, 4, 10, 18}}}) {
    SCOPED_TRACE(c.attributes + " axis " + std::to_string(c.axis));
    auto out = Run(R"(<ir_version: 10, opset_import: ["" : 26]>
g (float[2,3] x, int64[] axis) => (float[2,3] y) { y = CumProd<)" +
                       c.attributes + ">(x, axis) }",
                   {x, Int64s({}, {c.axis})});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Values<float>((*out)[0]), c.want);
  }
}

TEST_F(ReduceKernelsTest, CumProdOfInt32WrapsAsInt32Does) {
  // 65536 * 65537 = 2^32 + 65536, which wraps to 65536; times -1 is -65536.
  auto out = Run(R"(<ir_version: 10, opset_import: ["" : 26]>
g (int32[3] x, int32[] axis) => (int32[3] y) { y = CumProd(x, axis) })",
                 {Make<int32_t>(DType::kInt32, {3}, {65536, 65537, -1}),
                  Make<int32_t>(DType::kInt32, {}, {0})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{65536, 65536, -65536}));
}

TEST_F(ReduceKernelsTest, ReduceMaxAndMinOfBool) {
  // Rows TT, TF, FT, FF: max (any) T, T, T, F; min (all) T, F, F, F.
  auto out =
      Run(R"(<ir_version: 10, opset_import: ["" : 20]>
g (bool[4,2] x, int64[1] axes) => (bool[4,1] hi, bool[4,1] lo) {
  hi = ReduceMax(x, axes)
  lo = ReduceMin(x, axes)
})",
          {Make<bool>(DType::kBool, {4, 2}, {true, true, true, false, false, true, false, false}),
           Int64s({1}, {1})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<bool>((*out)[0]), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(Values<bool>((*out)[1]), (std::vector<bool>{true, false, false, false}));
}

TEST_F(ReduceKernelsTest, ReduceMaxAndMinOfEmptyBoolAreFalseAndTrue) {
  auto out = Run(R"(<ir_version: 10, opset_import: ["" : 20]>
g (bool[2,0,2] x, int64[1] axes) => (bool[2,1,2] hi, bool[2,1,2] lo) {
  hi = ReduceMax(x, axes)
  lo = ReduceMin(x, axes)
})",
                 {Make<bool>(DType::kBool, {2, 0, 2}, {}), Int64s({1}, {1})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 1, 2}));
  EXPECT_EQ(Values<bool>((*out)[0]), std::vector<bool>(4, false));
  EXPECT_EQ(Values<bool>((*out)[1]), std::vector<bool>(4, true));
}

TEST_F(ReduceKernelsTest, TopKBreaksTiesByLowerIndex) {
  const Tensor x = Floats({2, 4}, {3, 9, 3, 9, 1, 1, 1, 0});
  auto largest = Run(R"(<ir_version: 8, opset_import: ["" : 11]>
g (float[2,4] x, int64[1] k) => (float[2,3] v, int64[2,3] i) { v, i = TopK(x, k) })",
                     {x, Int64s({1}, {3})});
  ASSERT_TRUE(largest.ok()) << largest.status();
  EXPECT_EQ(Values<float>((*largest)[0]), (std::vector<float>{9, 9, 3, 1, 1, 1}));
  EXPECT_EQ(Values<int64_t>((*largest)[1]), (std::vector<int64_t>{1, 3, 0, 0, 1, 2}));
  auto smallest = Run(R"(<ir_version: 8, opset_import: ["" : 11]>
g (float[2,4] x, int64[1] k) => (float[1,4] v, int64[1,4] i) {
  v, i = TopK<axis = 0, largest = 0>(x, k)
})",
                      {x, Int64s({1}, {1})});
  ASSERT_TRUE(smallest.ok()) << smallest.status();
  EXPECT_EQ(Values<float>((*smallest)[0]), (std::vector<float>{1, 1, 1, 0}));
  EXPECT_EQ(Values<int64_t>((*smallest)[1]), (std::vector<int64_t>{1, 1, 1, 1}));
  auto too_many = Run(R"(<ir_version: 8, opset_import: ["" : 11]>
g (float[2,4] x, int64[1] k) => (float[2,5] v, int64[2,5] i) { v, i = TopK(x, k) })",
                      {x, Int64s({1}, {5})});
  ASSERT_FALSE(too_many.ok());
  EXPECT_THAT(too_many.status().message(), HasSubstr("k = 5 is out of range"));
}

// Reference softmax cross-entropy over [N, C, D] in double, as in ONNX's reference.
struct LossReference {
  std::vector<double> log_prob, loss;  // loss per (n, d), weighted, 0 where ignored
  double sum = 0, weight_sum = 0;
};
LossReference ReferenceSce(const std::vector<float>& x, int n, int c, int d,
                           const std::vector<int64_t>& labels, const std::vector<float>& weights,
                           int64_t ignore) {
  LossReference ref;
  ref.log_prob.resize(x.size());
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) {
      double max = -INFINITY, total = 0;
      for (int k = 0; k < c; ++k) max = std::max(max, double(x[(i * c + k) * d + j]));
      for (int k = 0; k < c; ++k) total += std::exp(double(x[(i * c + k) * d + j]) - max);
      for (int k = 0; k < c; ++k) {
        ref.log_prob[(i * c + k) * d + j] = double(x[(i * c + k) * d + j]) - max - std::log(total);
      }
      const int64_t label = labels[i * d + j];
      const double w = label == ignore ? 0 : (weights.empty() ? 1 : weights[label]);
      const double loss = label == ignore ? 0 : -w * ref.log_prob[(i * c + label) * d + j];
      ref.loss.push_back(loss);
      ref.sum += loss;
      ref.weight_sum += w;
    }
  }
  return ref;
}

TEST_F(ReduceKernelsTest, SoftmaxCrossEntropyMeanWithWeightsAndIgnoreIndex) {
  // N=2, C=3, D=2; the label at (1, 0) is ignore_index (-1).
  const std::vector<float> x = Ramp(12, 0.9f, -3.0f);
  const std::vector<float> weights = {0.5f, 2.0f, 1.5f};
  const LossReference ref = ReferenceSce(x, 2, 3, 2, {2, 0, -1, 1}, weights, -1);
  auto out = Run(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3,2] x, int64[2,2] t, float[3] w) => (float[] loss, float[2,3,2] lp) {
  loss, lp = SoftmaxCrossEntropyLoss<ignore_index = -1>(x, t, w)
})",
                 {Floats({2, 3, 2}, x), Int64s({2, 2}, {2, 0, -1, 1}), Floats({3}, weights)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), Shape{});
  EXPECT_NEAR(Values<float>((*out)[0])[0], ref.sum / ref.weight_sum, 1e-5);
  for (size_t i = 0; i < ref.log_prob.size(); ++i) {
    EXPECT_NEAR(Values<float>((*out)[1])[i], ref.log_prob[i], 1e-5);
  }
}

TEST_F(ReduceKernelsTest, SoftmaxCrossEntropyNoneAndSumWithoutWeights) {
  const std::vector<float> x = {1000, 1001, 999, -5, 0, 5};  // large logits stay finite
  const LossReference ref = ReferenceSce(x, 2, 3, 1, {1, 2}, {}, -100);
  auto none = Run(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x, int32[2] t) => (float[2] loss) {
  loss = SoftmaxCrossEntropyLoss<reduction = "none">(x, t)
})",
                  {Floats({2, 3}, x), Make<int32_t>(DType::kInt32, {2}, {1, 2})});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ((*none)[0].shape(), Shape{2});
  EXPECT_NEAR(Values<float>((*none)[0])[0], ref.loss[0], 1e-5);
  EXPECT_NEAR(Values<float>((*none)[0])[1], ref.loss[1], 1e-5);
  auto sum = Run(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x, int32[2] t) => (float[] loss) {
  loss = SoftmaxCrossEntropyLoss<reduction = "sum">(x, t)
})",
                 {Floats({2, 3}, x), Make<int32_t>(DType::kInt32, {2}, {1, 2})});
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_NEAR(Values<float>((*sum)[0])[0], ref.sum, 1e-5);
}

TEST_F(ReduceKernelsTest, NegativeLogLikelihoodLossReductions) {
  // input [N=3, C=2]; target [1, 0, 1]; weights [2, 3]: losses -3*x01, -2*x10, -3*x21.
  const Tensor x = Floats({3, 2}, {-0.5f, -1.5f, -2.0f, -0.25f, -1.0f, -3.0f});
  const Tensor t = Int64s({3}, {1, 0, 1});
  const Tensor w = Floats({2}, {2, 3});
  const std::vector<float> losses = {4.5f, 4.0f, 9.0f};
  for (auto [reduction, want] :
       std::vector<std::pair<std::string, float>>{{"sum", 17.5f}, {"mean", 17.5f / 8.0f}}) {
    SCOPED_TRACE(reduction);
    auto out = Run(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[3,2] x, int64[3] t, float[2] w) => (float[] loss) {
  loss = NegativeLogLikelihoodLoss<reduction = ")" +
                       reduction + R"(">(x, t, w)
})",
                   {x, t, w});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_FLOAT_EQ(Values<float>((*out)[0])[0], want);
  }
  auto none = Run(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[3,2] x, int64[3] t, float[2] w) => (float[3] loss) {
  loss = NegativeLogLikelihoodLoss<reduction = "none">(x, t, w)
})",
                  {x, t, w});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(Values<float>((*none)[0]), losses);
  // Mean without weights, with target 0 ignored: (-x01 - x21) / 2 = (1.5 + 3.0) / 2.
  auto ignored = Run(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[3,2] x, int64[3] t) => (float[] loss) {
  loss = NegativeLogLikelihoodLoss<ignore_index = 0>(x, t)
})",
                     {x, t});
  ASSERT_TRUE(ignored.ok()) << ignored.status();
  EXPECT_FLOAT_EQ(Values<float>((*ignored)[0])[0], 2.25f);
}

TEST_F(ReduceKernelsTest, LossLabelOutOfRangeIsAnError) {
  auto out = Run(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x, int64[2] t) => (float[] loss) { loss = NegativeLogLikelihoodLoss(x, t) })",
                 {Floats({2, 3}, {1, 2, 3, 4, 5, 6}), Int64s({2}, {0, 3})});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(),
              HasSubstr("label 3 at flat position 1 is out of range [0, 3)"));
}

TEST_F(ReduceKernelsTest, Fp16SoftmaxCrossEntropyComputesInFp32) {
  // 4 rows of 5000 equal logits: log_prob = -log(5000) = -8.51719..., so every loss is 8.51719;
  // the mean rounds once to FP16 (spacing 1/128 in [8, 16)): 1090/128 = 8.515625. An FP16 sum
  // of the 5000 exp(0) would stall at 2048 and give log(2048) = 7.625.
  const int classes = 5000;
  auto out = Run(
      R"(<ir_version: 8, opset_import: ["" : 13]>
g (float16[4,5000] x, int64[4] t) => (float16[] loss) { loss = SoftmaxCrossEntropyLoss(x, t) })",
      {Halves({4, classes}, std::vector<float>(4 * classes, 3.0f)), Int64s({4}, {0, 1, 4999, 7})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(HalfAt((*out)[0], 0), 1090.0f / 128.0f);
}

}  // namespace
}  // namespace ampc
