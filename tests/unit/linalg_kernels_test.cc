// MatMul, Gemm, Conv, ConvTranspose and Einsum on the CPU backend. Inputs are multiples of 1/8 in
// [-2, 2], so every sum the kernels form is exact in FP32 and the results can be compared exactly
// with plain nested-loop references written here (in double); FP16/BF16 cases check FP32
// accumulation and the single rounding of the result.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/cpu_kernels.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/session.h"
#include "tests/support/model_text.h"

namespace ampc {
namespace {

using ::testing::HasSubstr;

Tensor Make(DType dtype, Shape shape, const std::vector<double>& values) {
  Tensor t = Tensor::Host(dtype, std::move(shape));
  Dispatch<AMPC_FLOAT_TYPES, AMPC_INT_TYPES>(dtype, [&]<typename T>() {
    for (size_t i = 0; i < values.size(); ++i) {
      t.data<T>()[i] = Compute<T>::Store(static_cast<typename Compute<T>::type>(values[i]));
    }
  });
  return t;
}

std::vector<double> Read(const Tensor& t) {
  std::vector<double> v;
  Dispatch<AMPC_FLOAT_TYPES, AMPC_INT_TYPES>(t.dtype(), [&]<typename T>() {
    for (const T& x : t.span<const T>()) v.push_back(static_cast<double>(Compute<T>::Load(x)));
  });
  return v;
}

// Deterministic multiples of 1/8 in [-2, 2].
std::vector<double> Pattern(int64_t n, int seed) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>((i * 7 + seed * 13) % 33 - 16) / 8;
  return v;
}

// Rounds each value once to `dtype` (the expected output of an exact FP32 result).
std::vector<double> RoundTo(DType dtype, const std::vector<double>& v) {
  return Read(Make(dtype, {static_cast<int64_t>(v.size())}, v));
}

std::string Dims(const Shape& s) { return absl::StrJoin(s, ","); }

// Runs a one-node model: `node` is the ONNX-text node line, inputs named a, b, c, output y.
absl::StatusOr<Tensor> RunNode(const std::string& type, const std::string& node,
                               const std::vector<Tensor>& inputs, const Shape& y_shape,
                               int opset = 17) {
  std::vector<std::string> decls;
  const char* names[] = {"a", "b", "c"};
  for (size_t i = 0; i < inputs.size(); ++i) {
    decls.push_back(absl::StrCat(type, "[", Dims(inputs[i].shape()), "] ", names[i]));
  }
  const std::string text = absl::StrCat("<ir_version: 8, opset_import: [\"\" : ", opset, "]>\ng (",
                                        absl::StrJoin(decls, ", "), ") => (", type, "[",
                                        Dims(y_shape), "] y) {\n  y = ", node, "\n}\n");
  static CpuBackend backend(2);
  AMPC_ASSIGN_OR_RETURN(auto session,
                        Session::Create(testing::ParseModelText(text), DefaultRegistry(), backend));
  AMPC_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, session->Run(inputs));
  return outputs[0];
}

// ---- MatMul ----

// y[batch, i, j] = sum_p a[batch_a, i, p] * b[batch_b, p, j] for 3-D operands whose batch dims
// broadcast (1 or equal).
std::vector<double> RefBatchedMatMul(const std::vector<double>& a, int64_t ba,
                                     const std::vector<double>& b, int64_t bb, int64_t m, int64_t k,
                                     int64_t n) {
  const int64_t batches = std::max(ba, bb);
  std::vector<double> y(batches * m * n, 0.0);
  for (int64_t t = 0; t < batches; ++t) {
    const int64_t ta = ba == 1 ? 0 : t, tb = bb == 1 ? 0 : t;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t p = 0; p < k; ++p) {
          y[(t * m + i) * n + j] += a[(ta * m + i) * k + p] * b[(tb * k + p) * n + j];
        }
      }
    }
  }
  return y;
}

TEST(MatMulTest, TwoDimensionalFloatMatchesReference) {
  const auto a = Pattern(5 * 7, 1), b = Pattern(7 * 3, 2);
  auto y = RunNode("float", "MatMul(a, b)",
                   {Make(DType::kFloat, {5, 7}, a), Make(DType::kFloat, {7, 3}, b)}, {5, 3});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Read(*y), RefBatchedMatMul(a, 1, b, 1, 5, 7, 3));
}

TEST(MatMulTest, BatchDimsBroadcastBothWays) {
  // a [2,1,3,4] x b [3,4,5] -> [2,3,3,5]: a's batch (2,1) against b's (3).
  const auto a = Pattern(2 * 3 * 4, 3), b = Pattern(3 * 4 * 5, 4);
  auto y = RunNode("float", "MatMul(a, b)",
                   {Make(DType::kFloat, {2, 1, 3, 4}, a), Make(DType::kFloat, {3, 4, 5}, b)},
                   {2, 3, 3, 5});
  ASSERT_TRUE(y.ok()) << y.status();
  std::vector<double> want;
  for (int i = 0; i < 2; ++i) {
    const std::vector<double> ai(a.begin() + i * 12, a.begin() + (i + 1) * 12);
    const auto part = RefBatchedMatMul(ai, 1, b, 3, 3, 4, 5);
    want.insert(want.end(), part.begin(), part.end());
  }
  EXPECT_EQ(y->shape(), (Shape{2, 3, 3, 5}));
  EXPECT_EQ(Read(*y), want);
}

// [batches, m, k] times a shared right operand [k, n] and times one per batch [batches, k, n].
void ExpectSharedAndPerBatchRightOperand(const std::string& type, DType dtype, int64_t batches,
                                         int64_t m, int64_t k, int64_t n, int seed) {
  const auto a = Pattern(batches * m * k, seed), b = Pattern(k * n, seed + 1);
  const auto bs = Pattern(batches * k * n, seed + 2);
  auto y = RunNode(type, "MatMul(a, b)", {Make(dtype, {batches, m, k}, a), Make(dtype, {k, n}, b)},
                   {batches, m, n});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Read(*y), RefBatchedMatMul(a, batches, b, 1, m, k, n));
  y = RunNode(type, "MatMul(a, b)",
              {Make(dtype, {batches, m, k}, a), Make(dtype, {batches, k, n}, bs)}, {batches, m, n});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Read(*y), RefBatchedMatMul(a, batches, bs, batches, m, k, n));
}

TEST(MatMulTest, SharedRightOperandAndPerBatchRightOperand) {
  ExpectSharedAndPerBatchRightOperand("double", DType::kDouble, 4, 3, 6, 2, 5);
  ExpectSharedAndPerBatchRightOperand("float", DType::kFloat, 4, 3, 6, 2, 5);
  // Above ParallelGemm's threshold: one stacked product split over the pool, and three products
  // one per task.
  ExpectSharedAndPerBatchRightOperand("float", DType::kFloat, 3, 50, 40, 60, 11);
}

TEST(MatMulTest, OneDimensionalOperandsFollowNumpy) {
  // [1,2,3] . [[1,2],[3,4],[5,6]] = [22, 28]; [[1,2,3],[4,5,6]] . [1,1,2] = [9, 21];
  // [1,2,3] . [4,5,6] = 32 (a scalar).
  auto y = RunNode(
      "float", "MatMul(a, b)",
      {Make(DType::kFloat, {3}, {1, 2, 3}), Make(DType::kFloat, {3, 2}, {1, 2, 3, 4, 5, 6})}, {2});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2}));
  EXPECT_EQ(Read(*y), (std::vector<double>{22, 28}));
  y = RunNode(
      "float", "MatMul(a, b)",
      {Make(DType::kFloat, {2, 3}, {1, 2, 3, 4, 5, 6}), Make(DType::kFloat, {3}, {1, 1, 2})}, {2});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Read(*y), (std::vector<double>{9, 21}));
  y = RunNode("float", "MatMul(a, b)",
              {Make(DType::kFloat, {3}, {1, 2, 3}), Make(DType::kFloat, {3}, {4, 5, 6})}, {});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), Shape{});
  EXPECT_EQ(Read(*y), (std::vector<double>{32}));
}

TEST(MatMulTest, Fp16AccumulatesInFp32AndRoundsOnce) {
  // Row [2048, 1, 1, 1] . ones: FP16 accumulation stalls at 2048 (2048 + 1 ties to even, back to
  // 2048); FP32 gives 2051, halfway between FP16's 2050 and 2052, rounded once to even: 2052.
  // Row [2048, 1, 1, 1, 1] (padded with 0 above): 2052 exactly.
  auto y = RunNode("float16", "MatMul(a, b)",
                   {Make(DType::kFloat16, {2, 5}, {2048, 1, 1, 1, 0, 2048, 1, 1, 1, 1}),
                    Make(DType::kFloat16, {5, 1}, {1, 1, 1, 1, 1})},
                   {2, 1});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Read(*y), (std::vector<double>{2052, 2052}));
}

TEST(MatMulTest, Bf16AccumulatesInFp32) {
  // BF16 spacing at 256 is 2: 256 + 1 + 1 accumulated in BF16 stays 256; in FP32 it is 258.
  auto y = RunNode(
      "bfloat16", "MatMul(a, b)",
      {Make(DType::kBFloat16, {1, 3}, {256, 1, 1}), Make(DType::kBFloat16, {3, 1}, {1, 1, 1})},
      {1, 1});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Read(*y), (std::vector<double>{258}));
}

TEST(MatMulTest, Int32AndInt64UseIntegerArithmetic) {
  // [[1,2],[3,4]] . [[5,6],[7,8]] = [[19,22],[43,50]]; 2^40 * 3 stays exact in int64.
  auto y = RunNode(
      "int32", "MatMul(a, b)",
      {Make(DType::kInt32, {2, 2}, {1, 2, 3, 4}), Make(DType::kInt32, {2, 2}, {5, 6, 7, 8})},
      {2, 2});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Read(*y), (std::vector<double>{19, 22, 43, 50}));
  Tensor big = Tensor::Host(DType::kInt64, {1, 1});
  big.data<int64_t>()[0] = int64_t{1} << 40;
  y = RunNode("int64", "MatMul(a, b)", {big, Make(DType::kInt64, {1, 1}, {3})}, {1, 1});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->data<int64_t>()[0], 3 * (int64_t{1} << 40));
}

TEST(MatMulTest, MismatchedInnerDimensionsIsANodeError) {
  auto y = RunNode(
      "float", "MatMul(a, b)",
      {Make(DType::kFloat, {2, 3}, Pattern(6, 0)), Make(DType::kFloat, {4, 2}, Pattern(8, 0))},
      {2, 2});
  ASSERT_FALSE(y.ok());
  EXPECT_THAT(y.status().message(), HasSubstr("MatMul node producing 'y'"));
  EXPECT_THAT(y.status().message(), HasSubstr("inner dimensions differ"));
}

// ---- Gemm ----

// alpha * op(a) * op(b) + beta * c, with c given as [M,N] already broadcast.
std::vector<double> RefGemm(const std::vector<double>& a, bool ta, const std::vector<double>& b,
                            bool tb, const std::vector<double>& c, double alpha, double beta,
                            int64_t m, int64_t k, int64_t n) {
  std::vector<double> y(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        s += (ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
      }
      y[i * n + j] = alpha * s + (c.empty() ? 0.0 : beta * c[i * n + j]);
    }
  }
  return y;
}

TEST(GemmTest, TransposesAlphaBetaAndRowVectorBias) {
  const auto a = Pattern(4 * 3, 1), b = Pattern(5 * 4, 2), c = Pattern(5, 3);
  std::vector<double> c_full;
  for (int i = 0; i < 3; ++i) c_full.insert(c_full.end(), c.begin(), c.end());
  // A is [K=4, M=3] (transA), B is [N=5, K=4] (transB), C is [5] broadcast over rows.
  auto y = RunNode(
      "float", "Gemm <transA = 1, transB = 1, alpha = 0.5, beta = 2.0> (a, b, c)",
      {Make(DType::kFloat, {4, 3}, a), Make(DType::kFloat, {5, 4}, b), Make(DType::kFloat, {5}, c)},
      {3, 5});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Read(*y), RefGemm(a, true, b, true, c_full, 0.5, 2.0, 3, 4, 5));
}

TEST(GemmTest, ColumnBiasScalarBiasAndNoBias) {
  const auto a = Pattern(3 * 4, 4), b = Pattern(4 * 2, 5);
  std::vector<double> col = {1, -2, 0.5}, col_full;
  for (double v : col) col_full.insert(col_full.end(), {v, v});
  auto y = RunNode("float", "Gemm(a, b, c)",
                   {Make(DType::kFloat, {3, 4}, a), Make(DType::kFloat, {4, 2}, b),
                    Make(DType::kFloat, {3, 1}, col)},
                   {3, 2});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Read(*y), RefGemm(a, false, b, false, col_full, 1, 1, 3, 4, 2));
  y = RunNode("double", "Gemm <beta = 0.5> (a, b, c)",
              {Make(DType::kDouble, {3, 4}, a), Make(DType::kDouble, {4, 2}, b),
               Make(DType::kDouble, {}, {3})},
              {3, 2});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Read(*y), RefGemm(a, false, b, false, std::vector<double>(6, 3), 1, 0.5, 3, 4, 2));
  y = RunNode("float", "Gemm(a, b)",
              {Make(DType::kFloat, {3, 4}, a), Make(DType::kFloat, {4, 2}, b)}, {3, 2});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Read(*y), RefGemm(a, false, b, false, {}, 1, 1, 3, 4, 2));
}

TEST(GemmTest, ProductsSplitOverThePoolByRowsAndByColumnsMatchReference) {
  // Above ParallelGemm's threshold: taller than wide (split by rows, 70 = 48 + 22: a block that is
  // not a multiple of 16) and wider than tall (split by columns), every transpose combination.
  struct Size {
    int64_t m, k, n;
  };
  for (const Size s : {Size{70, 40, 33}, Size{20, 30, 90}}) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        const auto a = Pattern(s.m * s.k, 8), b = Pattern(s.k * s.n, 9), c = Pattern(s.n, 10);
        std::vector<double> c_full;
        for (int64_t i = 0; i < s.m; ++i) c_full.insert(c_full.end(), c.begin(), c.end());
        const std::string node = absl::StrCat("Gemm <transA = ", ta, ", transB = ", tb,
                                              ", alpha = 0.5, beta = 2.0> (a, b, c)");
        auto y = RunNode("float", node,
                         {Make(DType::kFloat, ta ? Shape{s.k, s.m} : Shape{s.m, s.k}, a),
                          Make(DType::kFloat, tb ? Shape{s.n, s.k} : Shape{s.k, s.n}, b),
                          Make(DType::kFloat, {s.n}, c)},
                         {s.m, s.n});
        ASSERT_TRUE(y.ok()) << node << ": " << y.status();
        EXPECT_EQ(Read(*y), RefGemm(a, ta, b, tb, c_full, 0.5, 2.0, s.m, s.k, s.n)) << node;
      }
    }
  }
}

TEST(GemmTest, Fp16AddsBiasInFp32BeforeTheOneRounding) {
  // 2048*1 + 1 + beta(1)*C(1) = 2050 exactly in FP32; rounding the product first (2049 -> 2048)
  // and adding C in FP16 (2048 + 1 -> 2048) would give 2048.
  auto y = RunNode("float16", "Gemm(a, b, c)",
                   {Make(DType::kFloat16, {1, 2}, {2048, 1}), Make(DType::kFloat16, {2, 1}, {1, 1}),
                    Make(DType::kFloat16, {1}, {1})},
                   {1, 1});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Read(*y), (std::vector<double>{2050}));
}

TEST(GemmTest, BiasThatDoesNotBroadcastIsANodeError) {
  auto y =
      RunNode("float", "Gemm(a, b, c)",
              {Make(DType::kFloat, {3, 4}, Pattern(12, 0)),
               Make(DType::kFloat, {4, 2}, Pattern(8, 0)), Make(DType::kFloat, {3}, {1, 2, 3})},
              {3, 2});
  ASSERT_FALSE(y.ok());
  EXPECT_THAT(y.status().message(), HasSubstr("does not broadcast to [3,2]"));
}

// ---- Conv and ConvTranspose: direct nested-loop references over N-d index vectors ----

struct ConvCase {
  Shape x,
      w;  // X [N, C, spatial...], W (Conv: [M, C/group, k...]; ConvTranspose: [C, M/group, k...])
  Shape out;  // spatial output dims, computed by hand in each test
  std::vector<int64_t> strides, dilations, pad_begin;
  int64_t group = 1;
  bool bias = true;
};

// Steps `index` through the box `dims` in row-major order; false after the last.
bool Next(std::vector<int64_t>& index, const Shape& dims) {
  for (size_t d = index.size(); d-- > 0;) {
    if (++index[d] < dims[d]) return true;
    index[d] = 0;
  }
  return false;
}

int64_t Offset(const std::vector<int64_t>& index, const Shape& dims) {
  int64_t o = 0;
  for (size_t d = 0; d < dims.size(); ++d) o = o * dims[d] + index[d];
  return o;
}

Shape Spatial(const Shape& s) { return Shape(s.begin() + 2, s.end()); }

// y[n, m, o] = b[m] + sum over c in m's group, kernel offset k: x[n, c, o*s + k*d - pad] * w[m, c,
// k]
std::vector<double> RefConv(const ConvCase& t, const std::vector<double>& x,
                            const std::vector<double>& w, const std::vector<double>& b) {
  const int64_t batch = t.x[0], c = t.x[1], m = t.w[0], cg = c / t.group, mg = m / t.group;
  const Shape in = Spatial(t.x), kernel = Spatial(t.w);
  const int64_t isize = ElementCount(in), ksize = ElementCount(kernel), osize = ElementCount(t.out);
  std::vector<double> y(batch * m * osize);
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t oc = 0; oc < m; ++oc) {
      std::vector<int64_t> o(t.out.size(), 0);
      do {
        double s = t.bias ? b[oc] : 0.0;
        for (int64_t ic = 0; ic < cg; ++ic) {
          std::vector<int64_t> k(kernel.size(), 0);
          do {
            std::vector<int64_t> i(in.size());
            bool inside = true;
            for (size_t d = 0; d < in.size(); ++d) {
              i[d] = o[d] * t.strides[d] + k[d] * t.dilations[d] - t.pad_begin[d];
              inside = inside && i[d] >= 0 && i[d] < in[d];
            }
            if (!inside) continue;
            const int64_t channel = (oc / mg) * cg + ic;
            s += x[(n * c + channel) * isize + Offset(i, in)] *
                 w[(oc * cg + ic) * ksize + Offset(k, kernel)];
          } while (Next(k, kernel));
        }
        y[(n * m + oc) * osize + Offset(o, t.out)] = s;
      } while (Next(o, t.out));
    }
  }
  return y;
}

// Scatter form: every x[n, c, i] * w[c, m, k] lands on y[n, g*mg + m, i*s + k*d - pad] if inside.
std::vector<double> RefConvTranspose(const ConvCase& t, const std::vector<double>& x,
                                     const std::vector<double>& w, const std::vector<double>& b) {
  const int64_t batch = t.x[0], c = t.x[1], mg = t.w[1], cg = c / t.group, m = mg * t.group;
  const Shape in = Spatial(t.x), kernel = Spatial(t.w);
  const int64_t isize = ElementCount(in), ksize = ElementCount(kernel), osize = ElementCount(t.out);
  std::vector<double> y(batch * m * osize, 0.0);
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t oc = 0; oc < m; ++oc) {
      for (int64_t p = 0; p < osize; ++p) y[(n * m + oc) * osize + p] = t.bias ? b[oc] : 0.0;
    }
    for (int64_t ic = 0; ic < c; ++ic) {
      std::vector<int64_t> i(in.size(), 0);
      do {
        for (int64_t om = 0; om < mg; ++om) {
          std::vector<int64_t> k(kernel.size(), 0);
          do {
            std::vector<int64_t> o(in.size());
            bool inside = true;
            for (size_t d = 0; d < in.size(); ++d) {
              o[d] = i[d] * t.strides[d] + k[d] * t.dilations[d] - t.pad_begin[d];
              inside = inside && o[d] >= 0 && o[d] < t.out[d];
            }
            if (!inside) continue;
            const int64_t oc = (ic / cg) * mg + om;
            y[(n * m + oc) * osize + Offset(o, t.out)] +=
                x[(n * c + ic) * isize + Offset(i, in)] *
                w[(ic * mg + om) * ksize + Offset(k, kernel)];
          } while (Next(k, kernel));
        }
      } while (Next(i, in));
    }
  }
  return y;
}

// Runs `op <attributes> (a, b[, c])` on the case's tensors in `dtype` and compares with the
// reference rounded once to `dtype`.
void ExpectConv(const std::string& op, const std::string& attributes, const ConvCase& t,
                DType dtype = DType::kFloat, const std::string& type = "float") {
  const bool transpose = op == "ConvTranspose";
  const int64_t m = transpose ? t.w[1] * t.group : t.w[0];
  const auto x = Pattern(ElementCount(t.x), 1), w = Pattern(ElementCount(t.w), 2);
  const auto b = Pattern(m, 3);
  std::vector<Tensor> inputs = {Make(dtype, t.x, x), Make(dtype, t.w, w)};
  if (t.bias) inputs.push_back(Make(dtype, {m}, b));
  Shape y_shape = {t.x[0], m};
  y_shape.insert(y_shape.end(), t.out.begin(), t.out.end());
  const std::string node = absl::StrCat(op, " <", attributes, "> (a, b", t.bias ? ", c" : "", ")");
  auto y = RunNode(type, node, inputs, y_shape);
  ASSERT_TRUE(y.ok()) << node << ": " << y.status();
  EXPECT_EQ(y->shape(), y_shape) << node;
  const auto want = transpose ? RefConvTranspose(t, x, w, b) : RefConv(t, x, w, b);
  EXPECT_EQ(Read(*y), RoundTo(dtype, want)) << node;
}

TEST(ConvTest, TwoDimensionalWithPadsStridesDilationsGroupsAndBias) {
  // in 7x6, k 3x2, dilations 2x1, strides 2x3, pads (1,0 | 2,1), group 2:
  // out = floor((7+1+2-5)/2)+1 = 3, floor((6+0+1-2)/3)+1 = 2.
  ConvCase t{{2, 4, 7, 6}, {6, 2, 3, 2}, {3, 2}, {2, 3}, {2, 1}, {1, 0}, 2};
  ExpectConv("Conv", "strides = [2, 3], dilations = [2, 1], pads = [1, 0, 2, 1], group = 2", t);
}

TEST(ConvTest, OneAndThreeDimensionalAndPointwise) {
  // 1-D: in 9, k 3, stride 2, pads (1, 1): out = floor((9+2-3)/2)+1 = 5.
  ExpectConv("Conv", "strides = [2], pads = [1, 1]",
             ConvCase{{1, 3, 9}, {2, 3, 3}, {5}, {2}, {1}, {1}});
  // 3-D: in 4x5x3, k 2x3x2, no pads: out 3x3x2.
  ExpectConv(
      "Conv", "kernel_shape = [2, 3, 2]",
      ConvCase{{1, 2, 4, 5, 3}, {3, 2, 2, 3, 2}, {3, 3, 2}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}});
  // 1x1 kernel, no bias: out = in.
  ExpectConv("Conv", "group = 1",
             ConvCase{{2, 3, 4, 5}, {4, 3, 1, 1}, {4, 5}, {1, 1}, {1, 1}, {0, 0}, 1, false});
  // Depthwise: group = C = 3.
  ExpectConv("Conv", "group = 3, pads = [1, 1, 1, 1]",
             ConvCase{{1, 3, 5, 5}, {3, 1, 3, 3}, {5, 5}, {1, 1}, {1, 1}, {1, 1}, 3});
}

TEST(ConvTest, SeveralImagesGoThroughOneGemm) {
  // group 1: the patches of all images side by side in one column matrix. The 2-D case of the
  // first test with 3 images and one group: out 3x2.
  ExpectConv("Conv", "strides = [2, 3], dilations = [2, 1], pads = [1, 0, 2, 1]",
             ConvCase{{3, 4, 7, 6}, {5, 4, 3, 2}, {3, 2}, {2, 3}, {2, 1}, {1, 0}});
  // 1-D, in 3, k 3, dilation 3, pads (4, 4): some taps read only padding, some the whole row.
  // out = 3 + 8 - 7 + 1 = 5; with stride 2, floor(4 / 2) + 1 = 3.
  ExpectConv("Conv", "dilations = [3], pads = [4, 4]",
             ConvCase{{2, 2, 3}, {3, 2, 3}, {5}, {1}, {3}, {4}});
  ExpectConv("Conv", "strides = [2], dilations = [3], pads = [4, 4]",
             ConvCase{{2, 2, 3}, {3, 2, 3}, {3}, {2}, {3}, {4}});
  // 3-D, pads (1, 0, 1 | 0, 1, 0): out 4x4x3, two images, no bias.
  ExpectConv(
      "Conv", "pads = [1, 0, 1, 0, 1, 0]",
      ConvCase{
          {2, 2, 4, 5, 3}, {3, 2, 2, 3, 2}, {4, 4, 3}, {1, 1, 1}, {1, 1, 1}, {1, 0, 1}, 1, false});
  // Stride 1 with output size = input size (each patch row is the shifted plane): dilated with
  // pads 2 all round, and with all padding at the end; 5x5 in, 5x5 out.
  ExpectConv("Conv", "dilations = [2, 2], pads = [2, 2, 2, 2]",
             ConvCase{{2, 2, 5, 5}, {3, 2, 3, 3}, {5, 5}, {1, 1}, {2, 2}, {2, 2}});
  ExpectConv("Conv", "pads = [0, 0, 2, 2]",
             ConvCase{{2, 2, 5, 5}, {3, 2, 3, 3}, {5, 5}, {1, 1}, {1, 1}, {0, 0}});
  // FP16 through the same path: widened with the bulk conversions, rounded once.
  ExpectConv("Conv", "pads = [1, 1, 1, 1]",
             ConvCase{{3, 4, 6, 6}, {3, 4, 3, 3}, {6, 6}, {1, 1}, {1, 1}, {1, 1}}, DType::kFloat16,
             "float16");
}

TEST(ConvTest, DepthwiseWithoutGemm) {
  // One channel per group (linalg::DepthwiseConv): 3x3 and strided 5x5 whose taps mostly read
  // padding, with and without bias; a channel multiplier of 2 takes the GEMM path instead.
  ExpectConv("Conv", "group = 4, pads = [1, 1, 1, 1]",
             ConvCase{{3, 4, 6, 5}, {4, 1, 3, 3}, {6, 5}, {1, 1}, {1, 1}, {1, 1}, 4});
  ExpectConv("Conv", "group = 3, strides = [2, 2], pads = [2, 2, 2, 2]",
             ConvCase{{2, 3, 4, 4}, {3, 1, 5, 5}, {2, 2}, {2, 2}, {1, 1}, {2, 2}, 3, false});
  ExpectConv("Conv", "group = 3, pads = [1, 1, 1, 1]",
             ConvCase{{2, 3, 5, 5}, {6, 1, 3, 3}, {5, 5}, {1, 1}, {1, 1}, {1, 1}, 3});
  ExpectConv("Conv", "group = 2, pads = [1, 1, 1, 1]",
             ConvCase{{2, 2, 4, 4}, {2, 1, 3, 3}, {4, 4}, {1, 1}, {1, 1}, {1, 1}, 2},
             DType::kBFloat16, "bfloat16");
}

TEST(ConvTest, OutputPlanesOverTheTableLimitCopyByRows) {
  // More than PatchTable::kMaxPositions (256) output positions: Im2Col's per-row copies (the
  // same-size shift, and the general strided, dilated path), one group and two.
  ExpectConv("Conv", "pads = [1, 1, 1, 1]",
             ConvCase{{2, 3, 17, 17}, {4, 3, 3, 3}, {17, 17}, {1, 1}, {1, 1}, {1, 1}});
  ExpectConv("Conv", "strides = [2, 1], dilations = [1, 2], pads = [1, 1, 1, 1]",
             ConvCase{{2, 2, 40, 21}, {3, 2, 3, 3}, {20, 19}, {2, 1}, {1, 2}, {1, 1}});
  ExpectConv("Conv", "group = 2, pads = [1, 1, 1, 1]",
             ConvCase{{1, 4, 17, 17}, {4, 2, 3, 3}, {17, 17}, {1, 1}, {1, 1}, {1, 1}, 2});
}

TEST(ConvTest, ImageBlocksAndSplitGemmsMatchReference) {
  // 5 images of 5x5 outputs: blocks of 3 and 2 images share a column matrix (the product is
  // copied out per image); with and without bias.
  ExpectConv("Conv", "pads = [1, 1, 1, 1]",
             ConvCase{{5, 3, 5, 5}, {4, 3, 3, 3}, {5, 5}, {1, 1}, {1, 1}, {1, 1}});
  ExpectConv("Conv", "pads = [1, 1, 1, 1]",
             ConvCase{{5, 3, 5, 5}, {4, 3, 3, 3}, {5, 5}, {1, 1}, {1, 1}, {1, 1}, 1, false});
  // One image, 40 x 256 x 27: the GEMM itself is split over the pool (by columns).
  ExpectConv("Conv", "pads = [1, 1, 1, 1]",
             ConvCase{{1, 3, 16, 16}, {40, 3, 3, 3}, {16, 16}, {1, 1}, {1, 1}, {1, 1}});
  // Groups and 1x1 kernels, one task per image and group, large enough to split too.
  ExpectConv("Conv", "group = 2",
             ConvCase{{3, 8, 20, 20}, {64, 4, 1, 1}, {20, 20}, {1, 1}, {1, 1}, {0, 0}, 2});
}

TEST(ConvTest, AutoPadSameUpperSameLowerAndValid) {
  // in 7, k 4, stride 2: out = ceil(7/2) = 4, total pad = (4-1)*2 + 4 - 7 = 3: SAME_UPPER puts
  // 1 at the start (2 at the end), SAME_LOWER 2 at the start. VALID: out = floor((7-4)/2)+1 = 2.
  const Shape x = {1, 2, 7, 7}, w = {2, 2, 4, 4};
  ExpectConv("Conv", "auto_pad = \"SAME_UPPER\", strides = [2, 2]",
             ConvCase{x, w, {4, 4}, {2, 2}, {1, 1}, {1, 1}});
  ExpectConv("Conv", "auto_pad = \"SAME_LOWER\", strides = [2, 2]",
             ConvCase{x, w, {4, 4}, {2, 2}, {1, 1}, {2, 2}});
  ExpectConv("Conv", "auto_pad = \"VALID\", strides = [2, 2]",
             ConvCase{x, w, {2, 2}, {2, 2}, {1, 1}, {0, 0}});
}

TEST(ConvTest, Fp16AndBf16RoundTheFp32ResultOnce) {
  // The reference sums are exact in FP32 (multiples of 1/64 below 2^10) and mostly not
  // representable in FP16/BF16 with 3x3x4 = 36 terms: the kernel must round only the final value.
  ConvCase t{{1, 4, 6, 6}, {3, 4, 3, 3}, {4, 4}, {1, 1}, {1, 1}, {0, 0}};
  ExpectConv("Conv", "group = 1", t, DType::kFloat16, "float16");
  ExpectConv("Conv", "group = 1", t, DType::kBFloat16, "bfloat16");
  ExpectConv("Conv", "group = 1", t, DType::kDouble, "double");
}

TEST(ConvTest, ChannelsThatDoNotFitTheGroupAreANodeError) {
  auto y = RunNode("float", "Conv <group = 2> (a, b)",
                   {Make(DType::kFloat, {1, 3, 4, 4}, Pattern(48, 0)),
                    Make(DType::kFloat, {2, 2, 3, 3}, Pattern(36, 0))},
                   {1, 2, 2, 2});
  ASSERT_FALSE(y.ok());
  EXPECT_THAT(y.status().message(), HasSubstr("Conv node producing 'y'"));
  EXPECT_THAT(y.status().message(), HasSubstr("do not fit group 2"));
}

TEST(ConvTransposeTest, TwoDimensionalWithStridesPadsOutputPaddingDilationsAndGroups) {
  // in 3x4, k 3x2, strides 2x3, dilations 1x2, pads (1,0 | 0,2), output_padding (1, 2), group 2:
  // out = 2*(3-1) + 1 + 3 - 1 - 0 = 7 and 3*(4-1) + 2 + 3 - 0 - 2 = 12.
  ConvCase t{{2, 4, 3, 4}, {4, 3, 3, 2}, {7, 12}, {2, 3}, {1, 2}, {1, 0}, 2};
  ExpectConv("ConvTranspose",
             "strides = [2, 3], dilations = [1, 2], pads = [1, 0, 0, 2], "
             "output_padding = [1, 2], group = 2",
             t);
}

TEST(ConvTransposeTest, OneAndThreeDimensional) {
  // 1-D: in 5, k 3, stride 2: out = 2*4 + 3 = 11.
  ExpectConv("ConvTranspose", "strides = [2]", ConvCase{{1, 2, 5}, {2, 3, 3}, {11}, {2}, {1}, {0}});
  // 3-D: in 2x3x2, k 2x2x3, no bias: out 3x4x4.
  ExpectConv(
      "ConvTranspose", "group = 1",
      ConvCase{
          {1, 2, 2, 3, 2}, {2, 2, 2, 2, 3}, {3, 4, 4}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, 1, false});
}

TEST(ConvTransposeTest, OutputShapeAndAutoPadSetThePadding) {
  // in 3, k 3, stride 2: full size 2*2 + 3 = 7.
  // output_shape 6: total padding 1, split (1 at the start, 0 at the end) unless SAME_UPPER
  // (0 at the start).
  const Shape x = {1, 2, 3, 3}, w = {2, 2, 3, 3};
  ExpectConv("ConvTranspose", "strides = [2, 2], output_shape = [6, 6]",
             ConvCase{x, w, {6, 6}, {2, 2}, {1, 1}, {1, 1}});
  ExpectConv("ConvTranspose", "strides = [2, 2], output_shape = [6, 6], auto_pad = \"SAME_UPPER\"",
             ConvCase{x, w, {6, 6}, {2, 2}, {1, 1}, {0, 0}});
  // output_shape 8 > 7: total padding -1, floor(-1/2) = -1, so the start pad is -1 - (-1) = 0 and
  // the extra row is at the end (bias only).
  ExpectConv("ConvTranspose", "strides = [2, 2], output_shape = [8, 8]",
             ConvCase{x, w, {8, 8}, {2, 2}, {1, 1}, {0, 0}});
  // SAME_LOWER without output_shape: out = 3*2 = 6, total 1, start pad 1.
  ExpectConv("ConvTranspose", "strides = [2, 2], auto_pad = \"SAME_LOWER\"",
             ConvCase{x, w, {6, 6}, {2, 2}, {1, 1}, {1, 1}});
}

TEST(ConvTransposeTest, Fp16RoundsTheFp32ResultOnce) {
  ConvCase t{{1, 6, 4, 4}, {6, 2, 3, 3}, {9, 9}, {2, 2}, {1, 1}, {0, 0}};
  ExpectConv("ConvTranspose", "strides = [2, 2]", t, DType::kFloat16, "float16");
}

// ---- Einsum ----

TEST(EinsumTest, BatchMatMulMatchesReference) {
  const auto a = Pattern(3 * 2 * 4, 1), b = Pattern(3 * 4 * 5, 2);
  auto y =
      RunNode("float", "Einsum <equation = \"bij,bjk->bik\"> (a, b)",
              {Make(DType::kFloat, {3, 2, 4}, a), Make(DType::kFloat, {3, 4, 5}, b)}, {3, 2, 5});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Read(*y), RefBatchedMatMul(a, 3, b, 3, 2, 4, 5));
}

TEST(EinsumTest, ImplicitOutputDiagonalEllipsisAndTranspose) {
  // Implicit "ij,jk": output labels used once, sorted: "ik" (a plain matrix product).
  const auto a = Pattern(2 * 3, 3), b = Pattern(3 * 2, 4);
  auto y = RunNode("float", "Einsum <equation = \"ij,jk\"> (a, b)",
                   {Make(DType::kFloat, {2, 3}, a), Make(DType::kFloat, {3, 2}, b)}, {2, 2});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Read(*y), RefBatchedMatMul(a, 1, b, 1, 2, 3, 2));
  // "...ii->...i": the diagonal of each of 2 matrices [[1,2],[3,4]], [[5,6],[7,8]].
  y = RunNode("float", "Einsum <equation = \"...ii->...i\"> (a)",
              {Make(DType::kFloat, {2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8})}, {2, 2});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Read(*y), (std::vector<double>{1, 4, 5, 8}));
  // "ij->ji" and "ij->" (the sum, 21).
  y = RunNode("float", "Einsum <equation = \"ij->ji\"> (a)",
              {Make(DType::kFloat, {2, 3}, {1, 2, 3, 4, 5, 6})}, {3, 2});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Read(*y), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  y = RunNode("float", "Einsum <equation = \"ij->\"> (a)",
              {Make(DType::kFloat, {2, 3}, {1, 2, 3, 4, 5, 6})}, {});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Read(*y), (std::vector<double>{21}));
}

TEST(EinsumTest, Fp16InnerProductAccumulatesInFp32) {
  // 2048 followed by four 1s, dotted with ones: 2052 in FP32 (FP16 accumulation stays at 2048).
  auto y = RunNode(
      "float16", "Einsum <equation = \"i,i\"> (a, b)",
      {Make(DType::kFloat16, {5}, {2048, 1, 1, 1, 1}), Make(DType::kFloat16, {5}, {1, 1, 1, 1, 1})},
      {});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Read(*y), (std::vector<double>{2052}));
}

TEST(EinsumTest, TermCountOrRankMismatchIsANodeError) {
  auto y = RunNode("float", "Einsum <equation = \"ijk->i\"> (a)",
                   {Make(DType::kFloat, {2, 3}, Pattern(6, 0))}, {2});
  ASSERT_FALSE(y.ok());
  EXPECT_THAT(y.status().message(), HasSubstr("does not fit an operand of rank 2"));
}

// ---- Col2Im ----

absl::StatusOr<Tensor> RunCol2Im(const std::string& attributes, const Tensor& x, const Shape& image,
                                 const Shape& block, const Shape& y_shape) {
  const std::string text =
      absl::StrCat("<ir_version: 8, opset_import: [\"\" : 18]>\ng (float[", Dims(x.shape()),
                   "] a, int64[", image.size(), "] i, int64[", block.size(), "] b) => (float[",
                   Dims(y_shape), "] y) {\n  y = Col2Im <", attributes, "> (a, i, b)\n}\n");
  static CpuBackend backend(2);
  AMPC_ASSIGN_OR_RETURN(auto session,
                        Session::Create(testing::ParseModelText(text), DefaultRegistry(), backend));
  std::vector<Tensor> inputs = {x,
                                Tensor::Host(DType::kInt64, {static_cast<int64_t>(image.size())}),
                                Tensor::Host(DType::kInt64, {static_cast<int64_t>(block.size())})};
  for (size_t d = 0; d < image.size(); ++d) inputs[1].data<int64_t>()[d] = image[d];
  for (size_t d = 0; d < block.size(); ++d) inputs[2].data<int64_t>()[d] = block[d];
  AMPC_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, session->Run(inputs));
  return outputs[0];
}

TEST(Col2ImTest, SumsEachTapIntoItsImageElementAndDropsThePadding) {
  // A 2x3 image, 2x2 blocks, one column of padding on the left: 1 x 3 block positions starting at
  // columns -1, 0, 1. Taps (0,0), (0,1), (1,0), (1,1) are the rows [1 2 3], [4 5 6], [7 8 9],
  // [10 11 12]. Image row 0: col 0 = 2 + 4, col 1 = 3 + 5, col 2 = 6; row 1: 8 + 10, 9 + 11, 12
  // (1 and 7, the first block's taps at column -1, fall in the padding).
  auto y = RunCol2Im("pads = [0, 1, 0, 0]",
                     Make(DType::kFloat, {1, 4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}),
                     {2, 3}, {2, 2}, {1, 1, 2, 3});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{1, 1, 2, 3}));
  EXPECT_EQ(Read(*y), (std::vector<double>{6, 8, 6, 18, 20, 12}));
}

TEST(Col2ImTest, DilationsAndStridesPlaceTheTapsApart) {
  // A 1x5 image, 1x2 blocks with dilation 2 and stride 2: block positions at columns 0 and 2,
  // taps at +0 and +2. Tap 0 reads [1 2] at the two positions, tap 1 [3 4]: col 0 = 1,
  // col 2 = 2 + 3, col 4 = 4; columns 1 and 3 get nothing.
  auto y = RunCol2Im("dilations = [1, 2], strides = [1, 2]",
                     Make(DType::kFloat, {1, 2, 2}, {1, 2, 3, 4}), {1, 5}, {1, 2}, {1, 1, 1, 5});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Read(*y), (std::vector<double>{1, 0, 5, 0, 4}));
}

TEST(Col2ImTest, ABlockCountThatDoesNotMatchIsANodeError) {
  auto y = RunCol2Im("strides = [1, 1]", Make(DType::kFloat, {1, 4, 5}, Pattern(20, 0)), {2, 3},
                     {2, 2}, {1, 1, 2, 3});
  ASSERT_FALSE(y.ok());
  EXPECT_THAT(y.status().message(), HasSubstr("is not [N, C * 4, 2]"));
}

}  // namespace
}  // namespace ampc
