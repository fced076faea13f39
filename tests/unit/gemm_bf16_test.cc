// The BF16 dot-product GEMM against a product in double: each sum must lie within FP32
// accumulation's error bound of the exact one, on every layout, edge size and the special values.
#include "kernels/cpu/gemm_bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace ampc::linalg {
namespace {

float ToBFloat16Value(float v) {  // truncation: any BF16 value will do as an operand
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  u &= 0xffff0000u;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

std::vector<float> RandomBFloat16Values(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = ToBFloat16Value(normal(gen));
  return v;
}

struct Product {
  bool trans_a, trans_b;
  int64_t m, n, k;
};

// op(x)[r, p] of a row-major matrix stored with rows x cols = op's shape transposed when trans.
float At(const std::vector<float>& x, bool trans, int64_t rows, int64_t cols, int64_t r,
         int64_t p) {
  return trans ? x[p * rows + r] : x[r * cols + p];
}

// Multiplies random operands with GemmBFloat16Values (onto c0 when accumulate) and checks each
// value against the sum in double: |error| <= k * 2^-23 * sum |terms| + the exact sum's rounding.
void ExpectMatchesDouble(const Product& s, bool accumulate) {
  SCOPED_TRACE(::testing::Message() << s.m << "x" << s.n << "x" << s.k << " trans " << s.trans_a
                                    << s.trans_b << " accumulate " << accumulate);
  const std::vector<float> a = RandomBFloat16Values(s.m * s.k, 1);
  const std::vector<float> b = RandomBFloat16Values(s.k * s.n, 2);
  const std::vector<float> c0 = RandomBFloat16Values(s.m * s.n, 3);
  const int64_t lda = s.trans_a ? s.m : s.k, ldb = s.trans_b ? s.k : s.n;
  ASSERT_TRUE(BFloat16DotTakes(s.trans_a, s.trans_b, s.m, s.n, s.k, a.data(), lda, b.data(), ldb));
  std::vector<float> c = c0;
  GemmBFloat16Values(s.trans_a, s.trans_b, s.m, s.n, s.k, a.data(), lda, b.data(), ldb, accumulate,
                     c.data(), s.n);
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      double exact = accumulate ? c0[i * s.n + j] : 0.0, magnitude = std::fabs(exact);
      for (int64_t p = 0; p < s.k; ++p) {
        const double term =
            double{At(a, s.trans_a, s.m, s.k, i, p)} * At(b, s.trans_b, s.k, s.n, p, j);
        exact += term;
        magnitude += std::fabs(term);
      }
      const double bound = (s.k + 2) * std::ldexp(magnitude, -23);
      ASSERT_NEAR(c[i * s.n + j], exact, bound) << "at " << i << "," << j;
    }
  }
}

class GemmBFloat16Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HasBFloat16Dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16 dot products";
  }
};

TEST_F(GemmBFloat16Test, EveryLayoutAndEdgeSizeMatchesDouble) {
  // Sizes below, at and past the 8 x 32 tile, k odd (a half-filled last pair) and past the
  // 256-deep k block, rows past the 128-row block and columns past the 1024-column block.
  const Product sizes[] = {{false, false, 1, 1, 1},     {false, false, 7, 31, 3},
                           {false, false, 8, 32, 2},    {false, false, 9, 33, 257},
                           {false, false, 130, 50, 17}, {false, false, 3, 1030, 5},
                           {false, false, 17, 70, 600}};
  for (Product s : sizes) {
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        s.trans_a = trans_a;
        s.trans_b = trans_b;
        ExpectMatchesDouble(s, false);
        ExpectMatchesDouble(s, true);
      }
    }
  }
}

TEST_F(GemmBFloat16Test, SplittingRowsOrColumnsGivesTheSameBits) {
  // ParallelGemm hands blocks of C to threads: each value's sum must not depend on the block.
  const int64_t m = 40, n = 72, k = 700;
  const std::vector<float> a = RandomBFloat16Values(m * k, 4), b = RandomBFloat16Values(k * n, 5);
  std::vector<float> whole(m * n), split(m * n);
  GemmBFloat16Values(false, false, m, n, k, a.data(), k, b.data(), n, false, whole.data(), n);
  GemmBFloat16Values(false, false, 13, n, k, a.data(), k, b.data(), n, false, split.data(), n);
  GemmBFloat16Values(false, false, m - 13, 40, k, a.data() + 13 * k, k, b.data(), n, false,
                     split.data() + 13 * n, n);
  GemmBFloat16Values(false, false, m - 13, n - 40, k, a.data() + 13 * k, k, b.data() + 40, n, false,
                     split.data() + 13 * n + 40, n);
  EXPECT_EQ(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)), 0);
}

TEST_F(GemmBFloat16Test, InfinitiesAndNaNPropagate) {
  const float inf = std::numeric_limits<float>::infinity();
  // Column 0 adds a's two columns, column 1 has inf * 0 = NaN in every row; inf - inf and a NaN
  // operand give NaN in column 0 of rows 2 and 3.
  const std::vector<float> a = {inf, 1, inf, 0, inf, -inf, std::nanf(""), 1};
  const std::vector<float> b = {1, 0, 1, 1};
  std::vector<float> c(4 * 2);
  ASSERT_TRUE(BFloat16DotTakes(false, false, 4, 2, 2, a.data(), 2, b.data(), 2));
  GemmBFloat16Values(false, false, 4, 2, 2, a.data(), 2, b.data(), 2, false, c.data(), 2);
  EXPECT_EQ(c[0], inf);
  EXPECT_EQ(c[2], inf);
  for (int i : {1, 3, 4, 5, 6, 7}) EXPECT_TRUE(std::isnan(c[i])) << i;
}

TEST_F(GemmBFloat16Test, SubnormalOperandsAreLeftToTheFp32Path) {
  // The instruction reads a subnormal as zero: 2^-130 * 2^100 would vanish instead of 2^-30.
  std::vector<float> a = {1, 2, 3, 4}, b = {1, 2, 3, 4};
  EXPECT_TRUE(BFloat16DotTakes(false, false, 2, 2, 2, a.data(), 2, b.data(), 2));
  a[3] = std::ldexp(1.0f, -130);
  EXPECT_FALSE(BFloat16DotTakes(false, false, 2, 2, 2, a.data(), 2, b.data(), 2));
  EXPECT_FALSE(BFloat16DotTakes(true, false, 2, 2, 2, a.data(), 2, b.data(), 2));
  a[3] = 4;
  b[0] = -std::ldexp(1.0f, -127);
  EXPECT_FALSE(BFloat16DotTakes(false, true, 2, 2, 2, a.data(), 2, b.data(), 2));
  b[0] = -0.0f;  // zeros of both signs are not subnormal
  EXPECT_TRUE(BFloat16DotTakes(false, true, 2, 2, 2, a.data(), 2, b.data(), 2));
}

}  // namespace
}  // namespace ampc::linalg
