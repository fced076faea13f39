// The CPU kernels of the training step give the same bits at any thread count (DESIGN.md's
// numerics model: each output value computed by one thread in a fixed order), and their blocked
// FP16/BF16 paths (vector conversions) give the bits of the scalar reference: ConvGrad (images
// batched into one GEMM per block), elementwise maps, Cast.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "kernels/numerics/cast_math.h"
#include "tests/support/grad_op_check.h"

namespace ampc {
namespace {

using testing::Dims;
using testing::ModelOf;
using testing::Pseudo;
using testing::ToDoubles;
using testing::ToTensor;
using testing::Value;

// Runs the model of `body` for `dtype` on a CPU backend with `threads` threads.
std::vector<Tensor> RunWith(int threads, const onnx::ModelProto& model,
                            const std::vector<Tensor>& inputs) {
  CpuBackend backend(threads);
  RegisterGradientOpSchemas();
  auto session = Session::Create(model, DefaultRegistry(), backend);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return {};
  auto out = (*session)->Run(inputs);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  std::vector<Tensor> host;  // copies: the backend goes away
  for (const Tensor& t : *out) {
    Tensor h = Tensor::Host(t.dtype(), t.shape());
    std::memcpy(h.raw(), t.raw(), t.bytes());
    host.push_back(std::move(h));
  }
  return host;
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

// Runs at 1, 2 and 3 threads and expects every output bit for bit equal; returns the 1-thread
// outputs.
std::vector<Tensor> ExpectThreadIndependent(const onnx::ModelProto& model,
                                            const std::vector<Tensor>& inputs) {
  std::vector<Tensor> one = RunWith(1, model, inputs);
  for (int threads : {2, 3}) {
    std::vector<Tensor> other = RunWith(threads, model, inputs);
    EXPECT_EQ(one.size(), other.size());
    for (size_t i = 0; i < one.size() && i < other.size(); ++i) {
      EXPECT_TRUE(SameBits(one[i], other[i])) << "output " << i << " at " << threads << " threads";
    }
  }
  return one;
}

onnx::ModelProto ConvGradModel(const Shape& x, const Shape& w, const Shape& y,
                               const std::string& attributes, DType dtype) {
  return ModelOf(absl::Substitute(
                     "g ($$T[$3] dy, $$T[$0] x, $$T[$1] w) => ($$T[$0] dx, $$T[$1] dw, $$T[$2] db) "
                     "{\n  dx, dw, db = ai.ampc.ConvGrad<$4>(dy, x, w)\n}",
                     Dims(x), Dims(w), w[0], Dims(y), attributes),
                 dtype);
}

// dx, dw, db of a 2-D Conv (dilation 1) by their definitions, in double.
std::vector<std::vector<double>> ConvGradReference(const std::vector<double>& dy,
                                                   const std::vector<double>& x,
                                                   const std::vector<double>& w, const Shape& xs,
                                                   const Shape& ws, const Shape& ys, int64_t stride,
                                                   int64_t pad, int64_t group) {
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3], m = ws[0], cg = ws[1], kh = ws[2],
                kw = ws[3], oh = ys[2], ow = ys[3], mg = m / group;
  std::vector<double> dx(x.size(), 0.0), dw(w.size(), 0.0), db(static_cast<size_t>(m), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < m; ++o)
      for (int64_t p = 0; p < oh; ++p)
        for (int64_t q = 0; q < ow; ++q) {
          const double g = dy[((i * m + o) * oh + p) * ow + q];
          db[o] += g;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t b = 0; b < kw; ++b) {
                const int64_t r = p * stride + a - pad, t = q * stride + b - pad;
                if (r < 0 || r >= h || t < 0 || t >= wd) continue;
                const int64_t xi = ((i * c + (o / mg) * cg + ci) * h + r) * wd + t;
                const int64_t wi = ((o * cg + ci) * kh + a) * kw + b;
                dw[wi] += g * x[xi];
                dx[xi] += g * w[wi];
              }
        }
  return {dx, dw, db};
}

// ConvGrad with 20 images of 32x16x16: 14 images per GEMM block (GradImagesPerBlock), so two
// blocks, dw summed over both; a strided, padded layer with few positions per image; grouped and
// depthwise; and output planes large enough to bypass the PatchTable.
struct ConvGradShape {
  Shape x, w, y;
  std::string attributes;
  int64_t stride, pad, group;
};
const ConvGradShape kConvGradShapes[] = {
    {{20, 32, 16, 16}, {16, 32, 3, 3}, {20, 16, 16, 16}, "pads = [1, 1, 1, 1]", 1, 1, 1},
    {{7, 24, 6, 6},
     {40, 24, 3, 3},
     {7, 40, 3, 3},
     "strides = [2, 2], pads = [1, 1, 1, 1]",
     2,
     1,
     1},
    {{5, 8, 7, 7}, {8, 2, 3, 3}, {5, 8, 7, 7}, "group = 4, pads = [1, 1, 1, 1]", 1, 1, 4},
    // Depthwise (one channel per group): linalg::DepthwiseConvGrad, 3x3 and strided 5x5.
    {{5, 8, 7, 7}, {8, 1, 3, 3}, {5, 8, 7, 7}, "group = 8, pads = [1, 1, 1, 1]", 1, 1, 8},
    {{3, 6, 4, 4},
     {6, 1, 5, 5},
     {3, 6, 2, 2},
     "group = 6, strides = [2, 2], pads = [2, 2, 2, 2]",
     2,
     2,
     6},
    // Over PatchTable::kMaxPositions (256) output positions: the per-row Im2Col and Col2Im.
    {{3, 4, 18, 18}, {6, 4, 3, 3}, {3, 6, 18, 18}, "pads = [1, 1, 1, 1]", 1, 1, 1},
    {{2, 3, 37, 35},
     {4, 3, 3, 3},
     {2, 4, 19, 18},
     "strides = [2, 2], pads = [1, 1, 1, 1]",
     2,
     1,
     1},
};

TEST(CpuThreadsTest, ConvGradIsThreadIndependentAndMatchesDouble) {
  for (const ConvGradShape& s : kConvGradShapes) {
    for (DType dtype : {DType::kFloat, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " x ", Dims(s.x), " ", s.attributes));
      const std::vector<Value> in = {Pseudo(dtype, s.y, -1, 1, 3), Pseudo(dtype, s.x, -1, 1, 5),
                                     Pseudo(dtype, s.w, -1, 1, 7)};
      std::vector<Tensor> tensors;
      for (const Value& v : in) tensors.push_back(ToTensor(v));
      const std::vector<Tensor> got =
          ExpectThreadIndependent(ConvGradModel(s.x, s.w, s.y, s.attributes, dtype), tensors);
      // The definitions in FP64 on the same (exactly widened) inputs: each output within FP32
      // accumulation error plus one rounding to the output type.
      const std::vector<std::vector<double>> want = ConvGradReference(
          in[0].values, in[1].values, in[2].values, s.x, s.w, s.y, s.stride, s.pad, s.group);
      ASSERT_EQ(got.size(), 3u);
      const double rounding = dtype == DType::kFloat     ? 1e-6
                              : dtype == DType::kFloat16 ? 1e-3
                                                         : 8e-3;
      for (size_t o = 0; o < 3; ++o) {
        const std::vector<double> g = ToDoubles(got[o]), &e = want[o];
        ASSERT_EQ(g.size(), e.size());
        double scale = 0;
        for (double v : e) scale = std::max(scale, std::abs(v));
        for (size_t i = 0; i < g.size(); ++i) {
          ASSERT_NEAR(g[i], e[i], rounding * std::abs(e[i]) + 1e-5 * scale)
              << "output " << o << " element " << i;
        }
      }
    }
  }
}

// MatMul and Gemm (the transposed products of the backward pass too) at shapes ParallelGemm
// splits, in FP32 and BF16 (widened to FP32).
TEST(CpuThreadsTest, MatMulAndGemmAreThreadIndependent) {
  for (DType dtype : {DType::kFloat, DType::kBFloat16}) {
    SCOPED_TRACE(DTypeName(dtype));
    const onnx::ModelProto model = ModelOf(
        "g ($T[3,200,300] a, $T[300,150] b, $T[150,300] c) => ($T[3,200,150] y, $T[300,300] z, "
        "$T[150,150] t) {\n  y = MatMul(a, b)\n  z = Gemm<transA = 1>(c, c)\n"
        "  t = Gemm<transB = 1>(c, c)\n}",
        dtype);
    ExpectThreadIndependent(model, {ToTensor(Pseudo(dtype, {3, 200, 300}, -1, 1, 1)),
                                    ToTensor(Pseudo(dtype, {300, 150}, -1, 1, 2)),
                                    ToTensor(Pseudo(dtype, {150, 300}, -1, 1, 4))});
  }
}

// Values with the edge cases of the conversions: zeros of both signs, subnormals of FP16 and
// BF16, the largest finite values, infinities, NaN, and values between representable ones.
std::vector<float> EdgeFloats(size_t n) {
  const float specials[] = {0.0f,
                            -0.0f,
                            1e-7f,
                            -3e-8f,
                            6.1e-5f,
                            1e-40f,
                            -1e-39f,
                            65504,
                            65520,
                            -7e4f,
                            3e38f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            1.0009765625f,
                            2.00048828125f};
  std::vector<float> v(n);
  uint32_t seed = 11;
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = i % 7 == 0 ? specials[(i / 7) % std::size(specials)]
                      : (static_cast<float>(seed >> 8) / (1u << 24) - 0.5f) * 8.0f;
  }
  return v;
}

template <typename T>
constexpr DType LowDType() {
  return std::is_same_v<T, Half> ? DType::kFloat16 : DType::kBFloat16;
}

template <typename T>
Tensor LowTensor(const std::vector<float>& v) {
  Tensor t = Tensor::Host(LowDType<T>(), {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<T>()[i] = Compute<T>::Store(v[i]);
  return t;
}

// 40,001 values: several parallel chunks, blocks of 512 and a ragged end.
constexpr size_t kN = 40001;

template <typename T>
void CheckElementwise() {
  const DType dtype = LowDType<T>();
  const std::string n = std::to_string(kN);
  const onnx::ModelProto model =
      ModelOf("g ($T[" + n + "] a, $T[" + n + "] b, $T[1] s) => ($T[" + n + "] mul, $T[" + n +
                  "] add_s, $T[" + n + "] sig, $T[" + n +
                  "] sub) {\n  mul = Mul(a, b)\n  add_s = "
                  "Add(s, a)\n  sig = Sigmoid(b)\n  sub = Sub(a, s)\n}",
              dtype);
  const std::vector<float> av = EdgeFloats(kN), bv = EdgeFloats(kN + 3);
  std::vector<float> b_trim(bv.begin() + 3, bv.end());
  const std::vector<Tensor> inputs = {LowTensor<T>(av), LowTensor<T>(b_trim), LowTensor<T>({0.3f})};
  const std::vector<Tensor> got = ExpectThreadIndependent(model, inputs);
  ASSERT_EQ(got.size(), 4u);
  const T *a = inputs[0].data<T>(), *b = inputs[1].data<T>(), s = inputs[2].data<T>()[0];
  auto load = [](T v) { return Compute<T>::Load(v); };
  for (size_t i = 0; i < kN; ++i) {  // the scalar reference, element by element
    const T want[] = {Compute<T>::Store(load(a[i]) * load(b[i])),
                      Compute<T>::Store(load(s) + load(a[i])),
                      Compute<T>::Store(1.0f / (1.0f + std::exp(-load(b[i])))),
                      Compute<T>::Store(load(a[i]) - load(s))};
    for (size_t o = 0; o < 4; ++o) {
      if (o == 2) continue;  // Sigmoid: thread independence only (its formula is the kernel's)
      const uint16_t g = got[o].data<T>()[i].bits, w = want[o].bits;
      const bool both_nan = std::isnan(load(got[o].data<T>()[i])) && std::isnan(load(want[o]));
      ASSERT_TRUE(g == w || both_nan) << "output " << o << " element " << i;
    }
  }
}

TEST(CpuThreadsTest, Fp16ElementwiseIsThreadIndependentAndMatchesScalar) {
  CheckElementwise<Half>();
}

TEST(CpuThreadsTest, Bf16ElementwiseIsThreadIndependentAndMatchesScalar) {
  CheckElementwise<BFloat16>();
}

template <typename T>
void CheckCast() {
  const std::string n = std::to_string(kN);
  const int to = LowDType<T>() == DType::kFloat16 ? 10 : 16;
  const onnx::ModelProto model =
      ModelOf("g (float[" + n + "] x) => ($T[" + n + "] low, float[" + n + "] back) {\n" +
                  "  low = Cast<to = " + std::to_string(to) + ">(x)\n  back = Cast<to = 1>(low)\n}",
              LowDType<T>());
  const std::vector<float> xv = EdgeFloats(kN);
  Tensor x = Tensor::Host(DType::kFloat, {static_cast<int64_t>(kN)});
  for (size_t i = 0; i < kN; ++i) x.data<float>()[i] = xv[i];
  const std::vector<Tensor> got = ExpectThreadIndependent(model, {x});
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < kN; ++i) {
    const T want = ConvertElement<float, T>(xv[i]);
    const T low = got[0].data<T>()[i];
    ASSERT_TRUE(low.bits == want.bits || (std::isnan(xv[i]) && std::isnan(Compute<T>::Load(low))))
        << i << ": " << xv[i];
    const float back = got[1].data<float>()[i], want_back = ConvertElement<T, float>(low);
    ASSERT_TRUE(std::memcmp(&back, &want_back, 4) == 0 || std::isnan(back)) << i;
  }
}

TEST(CpuThreadsTest, CastToAndFromFp16MatchesScalar) { CheckCast<Half>(); }
TEST(CpuThreadsTest, CastToAndFromBf16MatchesScalar) { CheckCast<BFloat16>(); }

}  // namespace
}  // namespace ampc
