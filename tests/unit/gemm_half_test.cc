// The FP16 GEMM against its contract, bit for bit: each value is the FP32 sum of exact products in
// order of k, in blocks of 256, written out below as a plain loop; and against a product in double
// within FP32 accumulation's error bound. Every layout, edge size and the special values.
#include "kernels/cpu/gemm_half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/numerics/float16.h"

namespace ampc::linalg {
namespace {

std::vector<uint16_t> RandomHalfValues(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (uint16_t& x : v) x = FloatToHalf(normal(gen));
  return v;
}

struct Product {
  bool trans_a, trans_b;
  int64_t m, n, k;
};

// op(x)[r, p] of a row-major matrix stored with rows x cols = op's shape transposed when trans.
float At(const std::vector<uint16_t>& x, bool trans, int64_t rows, int64_t cols, int64_t r,
         int64_t p) {
  return HalfToFloat(trans ? x[p * rows + r] : x[r * cols + p]);
}

uint32_t Bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

// Multiplies random operands with GemmHalfValues (onto c0 when accumulate) and checks each value
// bit for bit against the contract's order, and against the sum in double within
// |error| <= (k + 2) * 2^-24 * sum |terms|.
void ExpectMatchesContract(const Product& s, bool accumulate) {
  SCOPED_TRACE(::testing::Message() << s.m << "x" << s.n << "x" << s.k << " trans " << s.trans_a
                                    << s.trans_b << " accumulate " << accumulate);
  const std::vector<uint16_t> a = RandomHalfValues(s.m * s.k, 1);
  const std::vector<uint16_t> b = RandomHalfValues(s.k * s.n, 2);
  std::vector<float> c0(static_cast<size_t>(s.m * s.n));
  for (size_t i = 0; i < c0.size(); ++i) c0[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  const int64_t lda = s.trans_a ? s.m : s.k, ldb = s.trans_b ? s.k : s.n;
  std::vector<float> c = c0;
  GemmHalfValues(s.trans_a, s.trans_b, s.m, s.n, s.k, a.data(), lda, b.data(), ldb, accumulate,
                 c.data(), s.n);
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      float expected = accumulate ? c0[i * s.n + j] : 0.0f;
      double exact = expected, magnitude = std::fabs(exact);
      for (int64_t p0 = 0; p0 < s.k; p0 += 256) {
        float block = 0.0f;
        for (int64_t p = p0; p < std::min<int64_t>(s.k, p0 + 256); ++p) {
          const float x = At(a, s.trans_a, s.m, s.k, i, p), y = At(b, s.trans_b, s.k, s.n, p, j);
          block += x * y;  // x * y is exact in float: rounding once per step either way
          exact += double{x} * y;
          magnitude += std::fabs(double{x} * y);
        }
        expected = p0 == 0 && !accumulate ? block : expected + block;
      }
      const float got = c[i * s.n + j];
      ASSERT_EQ(Bits(got), Bits(expected))
          << "at " << i << "," << j << ": " << got << " vs " << expected;
      ASSERT_NEAR(got, exact, (s.k + 2) * std::ldexp(magnitude, -24)) << "at " << i << "," << j;
    }
  }
}

class GemmHalfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HasHalfGemm()) GTEST_SKIP() << "this CPU has no AVX-512 with F16C";
  }
};

TEST_F(GemmHalfTest, EveryLayoutAndEdgeSizeFollowsTheContract) {
  // Sizes below, at and past the 8 x 32 tile, k below and past the 8-deep transpose and the
  // 256-deep k block, rows past the 128-row block and columns past the 1024-column block.
  const Product sizes[] = {{false, false, 1, 1, 1},     {false, false, 7, 31, 3},
                           {false, false, 8, 32, 8},    {false, false, 9, 33, 257},
                           {false, false, 130, 50, 17}, {false, false, 3, 1030, 5},
                           {false, false, 17, 70, 600}, {false, false, 272, 64, 64}};
  for (Product s : sizes) {
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        s.trans_a = trans_a;
        s.trans_b = trans_b;
        ExpectMatchesContract(s, false);
        ExpectMatchesContract(s, true);
      }
    }
  }
}

TEST_F(GemmHalfTest, SplittingRowsOrColumnsGivesTheSameBits) {
  // ParallelGemmHalf hands blocks of C to threads: each value's sum must not depend on the block.
  const int64_t m = 40, n = 72, k = 700;
  const std::vector<uint16_t> a = RandomHalfValues(m * k, 4), b = RandomHalfValues(k * n, 5);
  std::vector<float> whole(m * n), split(m * n);
  GemmHalfValues(false, false, m, n, k, a.data(), k, b.data(), n, false, whole.data(), n);
  GemmHalfValues(false, false, 13, n, k, a.data(), k, b.data(), n, false, split.data(), n);
  GemmHalfValues(false, false, m - 13, 40, k, a.data() + 13 * k, k, b.data(), n, false,
                 split.data() + 13 * n, n);
  GemmHalfValues(false, false, m - 13, n - 40, k, a.data() + 13 * k, k, b.data() + 40, n, false,
                 split.data() + 13 * n + 40, n);
  EXPECT_EQ(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)), 0);
}

TEST_F(GemmHalfTest, InfinitiesAndNaNPropagate) {
  const uint16_t inf = 0x7c00, minus_inf = 0xfc00, nan = 0x7e00, one = 0x3c00, zero = 0;
  // Column 0 adds a's two columns, column 1 has inf * 0 = NaN in every row; inf - inf and a NaN
  // operand give NaN in column 0 of rows 2 and 3.
  const std::vector<uint16_t> a = {inf, one, inf, zero, inf, minus_inf, nan, one};
  const std::vector<uint16_t> b = {one, zero, one, one};
  std::vector<float> c(4 * 2);
  GemmHalfValues(false, false, 4, 2, 2, a.data(), 2, b.data(), 2, false, c.data(), 2);
  const float f_inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(c[0], f_inf);
  EXPECT_EQ(c[2], f_inf);
  for (int i : {1, 3, 4, 5, 6, 7}) EXPECT_TRUE(std::isnan(c[i])) << i;
}

TEST_F(GemmHalfTest, SubnormalProductsAreExact) {
  // 2^-24 (the smallest FP16 subnormal) squared is 2^-48, a normal float: nothing is flushed.
  const std::vector<uint16_t> a = {0x0001, 0x0001}, b = {0x0001, 0x03ff};
  std::vector<float> c(1);
  GemmHalfValues(false, false, 1, 1, 2, a.data(), 2, b.data(), 1, false, c.data(), 1);
  EXPECT_EQ(c[0], std::ldexp(1.0f, -48) + std::ldexp(1023.0f, -48));
}

}  // namespace
}  // namespace ampc::linalg
