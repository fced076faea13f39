// kernels/numerics/scaler_math.h, the per-element arithmetic of the loss-scaling and optimizer
// kernels of both backends, applied element by element here and checked bit for bit against the
// CPU kernels (kernels/cpu/scaler_kernels.cc) run through a Session: the CUDA kernels apply the
// functions the same way, so a kernel that applies them differently (another order, a missed
// widening, a thread-count-dependent sum) fails here, without a GPU.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/numerics/scaler_math.h"
#include "tests/support/scaler_inputs.h"

namespace ampc {
namespace {

namespace math = scaler_math;

using testing::Bool;
using testing::Floats;
using testing::Gradient;
using testing::Int64s;
using testing::kInf;
using testing::LoadAmpcModel;
using testing::PseudoFloats;
using testing::SetElement;
using testing::Step;

uint32_t Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

// A float attribute value as ONNX text that parses back to the same float.
std::string Text(float value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.9g", value);
  std::string text = buffer;
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

// Bitwise equality of a float output with the expected values, naming the first difference.
void ExpectBits(const Tensor& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(static_cast<size_t>(got.size()), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(Bits(got.data<float>()[i]), Bits(want[i]))
        << what << " element " << i << ": " << got.data<float>()[i] << " vs " << want[i];
  }
}

// The element of a gradient tensor as the kernels widen it.
float Widened(const Tensor& g, int64_t i) {
  switch (g.dtype()) {
    case DType::kFloat16:
      return HalfToFloat(g.data<Half>()[i].bits);
    case DType::kBFloat16:
      return BFloat16ToFloat(g.data<BFloat16>()[i].bits);
    default:
      return g.data<float>()[i];
  }
}

bool NonFiniteAt(const Tensor& g, int64_t i) {
  switch (g.dtype()) {
    case DType::kFloat16:
      return math::NonFinite(g.data<Half>()[i]);
    case DType::kBFloat16:
      return math::NonFinite(g.data<BFloat16>()[i]);
    default:
      return math::NonFinite(g.data<float>()[i]);
  }
}

// ---- storage types ----

// (Widening is float16.h's, the one copy both backends use: tests/unit/half_test.cc checks it.)
TEST(CudaScalerMathTest, NonFiniteTestsMatchIsFiniteOnEvery16BitPattern) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    ASSERT_EQ(math::NonFinite(Half{bits}), !std::isfinite(HalfToFloat(bits))) << std::hex << b;
    ASSERT_EQ(math::NonFinite(BFloat16{bits}), !std::isfinite(BFloat16ToFloat(bits)))
        << std::hex << b;
  }
}

TEST(CudaScalerMathTest, NonFiniteFloatAndDouble) {
  for (float x : {0.0f, -0.0f, 1.0f, FLT_MAX, -FLT_MAX, FLT_MIN, 1e-45f, kInf, -kInf, NAN, -NAN}) {
    EXPECT_EQ(math::NonFinite(x), !std::isfinite(x)) << x;
    EXPECT_EQ(math::NonFinite(static_cast<double>(x)), !std::isfinite(x)) << x;
  }
  EXPECT_FALSE(math::NonFinite(1e300));  // finite in double, inf once rounded to float
}

// ---- CheckFinite and UnscaleClip ----

constexpr char kGradModel[] =
    "float16[40] a, bfloat16[7] b, float[50000] c";  // c: several CPU blocks of 16384

std::vector<Tensor> Gradients() {
  return {Gradient(DType::kFloat16, 40, 7), Gradient(DType::kBFloat16, 7, 8),
          Gradient(DType::kFloat, 50000, 9)};
}

TEST(CudaScalerMathTest, CheckFiniteMatchesTheCpuKernel) {
  auto session = LoadAmpcModel(std::string("g (") + kGradModel +
                               ") => (bool found) { found = ai.ampc.CheckFinite(a, b, c) }");
  ASSERT_NE(session, nullptr);
  std::vector<Tensor> grads = Gradients();
  for (size_t g = 0; g < grads.size(); ++g) {
    for (int64_t position : {int64_t{0}, grads[g].size() - 1}) {
      for (float bad : {kInf, -kInf, NAN, 1e6f, 0.25f}) {  // 1e6 overflows FP16 only
        SetElement(grads[g], position, bad);
        bool want = false;
        for (const Tensor& t : grads) {
          for (int64_t i = 0; i < t.size(); ++i) want = want || NonFiniteAt(t, i);
        }
        EXPECT_EQ(Step(*session, grads)[0].data<bool>()[0], want)
            << "tensor " << g << " position " << position << " value " << bad;
        SetElement(grads[g], position, 0.5f);
      }
    }
  }
}

// The unscaled, clipped gradients and the norm from scaler_math.h, in input order.
struct Unscaled {
  std::vector<std::vector<float>> u;
  float norm;
};

Unscaled UnscaleWithMath(const std::vector<Tensor>& grads, float scale, float max_norm) {
  Unscaled r;
  const float inv = math::InverseScale(scale);
  double sum = 0.0;
  for (const Tensor& g : grads) {
    std::vector<float> u(static_cast<size_t>(g.size()));
    for (int64_t i = 0; i < g.size(); ++i) {
      u[i] = math::Unscale(Widened(g, i), inv);
      sum = rounded::Add(sum, math::Square(u[i]));
    }
    r.u.push_back(std::move(u));
  }
  r.norm = math::NormOf(sum);
  if (max_norm > 0.0f) {
    const float coef = math::ClipCoefficient(r.norm, max_norm);
    for (auto& u : r.u) {
      for (float& x : u) x = rounded::Multiply(x, coef);
    }
  }
  return r;
}

void ExpectUnscaleClipMatches(float scale, float max_norm, bool inject_inf) {
  auto session = LoadAmpcModel(std::string("g (float s, ") + kGradModel +
                               ") => (float[40] ua, float[7] ub, float[50000] uc, float n) "
                               "{ ua, ub, uc, n = ai.ampc.UnscaleClip<max_norm = " +
                               Text(max_norm) + ">(s, a, b, c) }");
  ASSERT_NE(session, nullptr);
  std::vector<Tensor> grads = Gradients();
  if (inject_inf) SetElement(grads[2], 123, kInf);
  const Unscaled want = UnscaleWithMath(grads, scale, max_norm);
  std::vector<Tensor> inputs = {Floats({}, {scale})};
  inputs.insert(inputs.end(), grads.begin(), grads.end());
  const std::vector<Tensor> out = Step(*session, inputs);
  ASSERT_EQ(out.size(), 4u);
  const std::string what = "scale " + Text(scale) + " max_norm " + Text(max_norm);
  for (int i = 0; i < 3; ++i) ExpectBits(out[i], want.u[i], what + " output " + std::to_string(i));
  EXPECT_EQ(Bits(out[3].data<float>()[0]), Bits(want.norm)) << what;
}

TEST(CudaScalerMathTest, UnscaleMatchesTheCpuKernel) {
  ExpectUnscaleClipMatches(3.0f, 0.0f, false);  // 1/3 is inexact: g * (1/s) differs from g / s
  ExpectUnscaleClipMatches(65536.0f, 0.0f, false);
  ExpectUnscaleClipMatches(0.1f, 0.0f, false);
}

TEST(CudaScalerMathTest, ClipMatchesTheCpuKernel) {
  ExpectUnscaleClipMatches(1024.0f, 0.005f, false);  // clips
  ExpectUnscaleClipMatches(3.0f, 1e6f, false);       // coefficient 1, still multiplied
  ExpectUnscaleClipMatches(3.0f, 0.5f, true);        // an inf norm: coefficient 0
}

// ---- UpdateScale ----

TEST(CudaScalerMathTest, UpdateScaleMatchesTheCpuKernel) {
  std::vector<math::ScaleAttrs> configs(6);
  configs[1].growth_interval = 3;
  configs[2].growth_interval = 1;
  configs[2].max_scale = 3000.0f;
  configs[3].hysteresis = 3;
  configs[3].min_scale = 1.0f;
  configs[4].growth_factor = 1.5f;
  configs[4].backoff_factor = 0.3f;
  configs[5].dynamic = false;
  const math::ScaleState states[] = {
      {1024.0f, 0, 1}, {1024.0f, 2, 1}, {2048.0f, 1999, 1}, {std::ldexp(1.0f, 127), 2, 1},
      {FLT_MIN, 0, 1}, {1.5f, 0, 1},    {1024.0f, 2, 3},    {3.0e-38f, 5, 2}};
  for (const math::ScaleAttrs& c : configs) {
    const std::string attributes = "dynamic = " + std::string(c.dynamic ? "1" : "0") +
                                   ", hysteresis = " + std::to_string(c.hysteresis) +
                                   ", growth_interval = " + std::to_string(c.growth_interval) +
                                   ", growth_factor = " + Text(c.growth_factor) +
                                   ", backoff_factor = " + Text(c.backoff_factor) +
                                   ", min_scale = " + Text(c.min_scale) +
                                   ", max_scale = " + Text(c.max_scale);
    auto session = LoadAmpcModel(
        "g (float s, int64 t, int64 h, bool f, bool l) => (float s2, int64 t2, int64 h2) {"
        " s2, t2, h2 = ai.ampc.UpdateScale<" +
        attributes + ">(s, t, h, f, l) }");
    ASSERT_NE(session, nullptr);
    for (const math::ScaleState& s : states) {
      for (bool found : {false, true}) {
        for (bool loss_bad : {false, true}) {
          const std::vector<Tensor> out =
              Step(*session, {Floats({}, {s.scale}), Int64s({}, {s.tracker}),
                              Int64s({}, {s.hysteresis_left}), Bool(found), Bool(loss_bad)});
          ASSERT_EQ(out.size(), 3u);
          const math::ScaleState want = math::UpdateScale(s, found, loss_bad, c);
          const std::string what = attributes + " state " + Text(s.scale) + "," +
                                   std::to_string(s.tracker) + "," +
                                   std::to_string(s.hysteresis_left) + " found " +
                                   std::to_string(found) + " loss_bad " + std::to_string(loss_bad);
          EXPECT_EQ(Bits(out[0].data<float>()[0]), Bits(want.scale)) << what;
          EXPECT_EQ(out[1].data<int64_t>()[0], want.tracker) << what;
          EXPECT_EQ(out[2].data<int64_t>()[0], want.hysteresis_left) << what;
        }
      }
    }
  }
}

// ---- SGD and Adam ----

constexpr int64_t kParams = 20000;  // several CPU blocks
constexpr char kShape[] = "float[20000]";

TEST(CudaScalerMathTest, SgdMatchesTheCpuKernel) {
  std::vector<math::SgdAttrs> configs(6);
  configs[1].weight_decay = 0.01f;
  configs[2].momentum = 0.9f;
  configs[3].momentum = 0.9f;
  configs[3].dampening = 0.1f;
  configs[3].weight_decay = 5e-4f;
  configs[4].momentum = 0.9f;
  configs[4].nesterov = true;
  configs[5].momentum = 0.8f;
  configs[5].weight_decay = 1e-3f;
  configs[5].nesterov = true;
  const std::vector<float> p = PseudoFloats(kParams, 1, -1.0f, 1.0f);
  const std::vector<float> g = PseudoFloats(kParams, 2, -1.0f, 1.0f);
  const std::vector<float> buf = PseudoFloats(kParams, 3, -0.5f, 0.5f);
  for (const math::SgdAttrs& c : configs) {
    const bool momentum = c.momentum != 0.0f;
    const std::string t = kShape;
    auto session = LoadAmpcModel(
        "g (bool skip, float lr, bool first, " + t + " p, " + t + " u" +
        (momentum ? ", " + t + " buf) => (" + t + " p2, " + t + " buf2)" : ") => (" + t + " p2)") +
        " { p2" + (momentum ? ", buf2" : "") + " = ai.ampc.SGD<momentum = " + Text(c.momentum) +
        ", dampening = " + Text(c.dampening) + ", nesterov = " + (c.nesterov ? "1" : "0") +
        ", weight_decay = " + Text(c.weight_decay) + ">(skip, lr, first, p, u" +
        (momentum ? ", buf" : "") + ") }");
    ASSERT_NE(session, nullptr);
    for (float lr : {0.01f, 0.3f, 1.7e-3f}) {
      for (bool first : {true, false}) {
        std::vector<Tensor> inputs = {Bool(false), Floats({}, {lr}), Bool(first),
                                      Floats({kParams}, p), Floats({kParams}, g)};
        if (momentum) inputs.push_back(Floats({kParams}, buf));
        const std::vector<Tensor> out = Step(*session, inputs);
        ASSERT_EQ(out.size(), momentum ? 2u : 1u);
        const math::SgdScalars s = math::SgdScalarsFor(c, lr, first);
        std::vector<float> want_p(kParams), want_buf(kParams);
        for (int64_t i = 0; i < kParams; ++i) {
          want_p[i] = math::SgdElement(s, p[i], g[i], buf[i], &want_buf[i]);
        }
        const std::string what =
            "momentum " + Text(c.momentum) + " lr " + Text(lr) + " first " + std::to_string(first);
        ExpectBits(out[0], want_p, what + " param");
        if (momentum) ExpectBits(out[1], want_buf, what + " buf");
      }
    }
  }
}

TEST(CudaScalerMathTest, AdamMatchesTheCpuKernel) {
  std::vector<math::AdamAttrs> configs(4);
  configs[1].beta2 = 0.99f;
  configs[1].weight_decay = 0.01f;
  configs[2].weight_decay = 0.01f;
  configs[2].decoupled = true;
  configs[3].beta1 = 0.3f;  // lerp's other formula (weight 1 - beta1 >= 0.5)
  configs[3].epsilon = 1e-6f;
  configs[3].weight_decay = 0.1f;
  configs[3].decoupled = true;
  const std::vector<float> p = PseudoFloats(kParams, 4, -1.0f, 1.0f);
  const std::vector<float> g = PseudoFloats(kParams, 5, -1.0f, 1.0f);
  const std::vector<float> m = PseudoFloats(kParams, 6, -0.1f, 0.1f);
  const std::vector<float> v = PseudoFloats(kParams, 7, 0.0f, 0.01f);
  const std::string t = kShape;
  for (const math::AdamAttrs& c : configs) {
    auto session = LoadAmpcModel(
        "g (bool skip, float lr, int64 step, " + t + " p, " + t + " u, " + t + " m, " + t +
        " v) => (" + t + " p2, " + t + " m2, " + t +
        " v2) { p2, m2, v2 = ai.ampc.Adam<beta1 = " + Text(c.beta1) + ", beta2 = " + Text(c.beta2) +
        ", epsilon = " + Text(c.epsilon) + ", weight_decay = " + Text(c.weight_decay) +
        ", decoupled = " + (c.decoupled ? "1" : "0") + ">(skip, lr, step, p, u, m, v) }");
    ASSERT_NE(session, nullptr);
    for (float lr : {1e-3f, 0.0123f}) {
      for (int64_t step : {int64_t{1}, int64_t{2}, int64_t{17}, int64_t{1000}, int64_t{123457}}) {
        const std::vector<Tensor> out =
            Step(*session, {Bool(false), Floats({}, {lr}), Int64s({}, {step}), Floats({kParams}, p),
                            Floats({kParams}, g), Floats({kParams}, m), Floats({kParams}, v)});
        ASSERT_EQ(out.size(), 3u);
        const math::AdamScalars s = math::AdamScalarsFor(c, lr, step);
        std::vector<float> want_p(kParams), want_m(kParams), want_v(kParams);
        for (int64_t i = 0; i < kParams; ++i) {
          const math::AdamElementResult r = math::AdamElement(s, p[i], g[i], m[i], v[i]);
          want_p[i] = r.p;
          want_m[i] = r.m;
          want_v[i] = r.v;
        }
        const std::string what = "beta1 " + Text(c.beta1) + " decoupled " +
                                 std::to_string(c.decoupled) + " lr " + Text(lr) + " step " +
                                 std::to_string(step);
        ExpectBits(out[0], want_p, what + " param");
        ExpectBits(out[1], want_m, what + " exp_avg");
        ExpectBits(out[2], want_v, what + " exp_avg_sq");
      }
    }
  }
}

}  // namespace
}  // namespace ampc
