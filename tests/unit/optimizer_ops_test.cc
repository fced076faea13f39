// ai.ampc SGD and Adam through a Session against reference implementations of PyTorch's
// single-tensor torch.optim.SGD / Adam / AdamW written here from torch/optim/{sgd,adam}.py:
// Python-float scalars in double (from the float attribute values the model states), each tensor
// op in FP32 in PyTorch's order. 100 steps with a varying learning rate and some skipped steps;
// the tolerance is 0 ulps: parameters and moments must be bit-identical at every step.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/optimizer_simd.h"
#include "kernels/numerics/scaler_math.h"
#include "tests/support/scaler_inputs.h"

namespace ampc {
namespace {

using testing::Bool;
using testing::Floats;
using testing::Int64s;
using testing::LoadAmpcModel;

constexpr int kSteps = 100;
constexpr int64_t kRows = 3,
                  kCols =
                      7001;  // 21003: several threads' blocks, and a tail the vector loops leave
constexpr size_t kSize = kRows * kCols;
constexpr char kShape[] = "[3,7001]";

Tensor Param(const std::vector<float>& v) { return Floats({kRows, kCols}, v); }

std::string Text(float value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.9g", value);
  std::string text = buffer;
  if (text.find_first_of(".e") == std::string::npos) text += ".0";  // a float literal, not an int
  return text;
}

// The gradient of step k: a fixed pseudo-random sequence in [-1, 1).
std::vector<float> GradientOfStep(int k) {
  std::vector<float> g(kSize);
  uint32_t seed = 1000u + static_cast<uint32_t>(k);
  for (float& x : g) {
    seed = seed * 1664525u + 1013904223u;
    x = -1.0f + 2.0f * static_cast<float>(seed >> 8) / static_cast<float>(1u << 24);
  }
  return g;
}

float LearningRateOfStep(int k) { return 0.01f * (1.0f + 0.5f * std::cos(0.1f * k)); }
bool SkippedStep(int k) { return k % 9 == 0; }  // step 0 too: the first applied step is step 1

// Bitwise equality of an output with the reference, naming the first differing element.
void ExpectBits(const Tensor& got, const std::vector<float>& want, const char* what, int step) {
  ASSERT_EQ(static_cast<size_t>(got.size()), want.size());
  if (std::memcmp(got.data<float>(), want.data(), want.size() * sizeof(float)) == 0) return;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got.data<float>()[i], want[i]) << what << " element " << i << " at step " << step;
  }
}

std::vector<float> Initial(uint32_t seed) {
  std::vector<float> p = GradientOfStep(static_cast<int>(seed) + 5000);
  return p;
}

// ---- SGD: torch/optim/sgd.py, _single_tensor_sgd ----

struct SgdOptions {
  float momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
};

void ReferenceSgd(std::vector<float>& param, std::vector<float> grad, std::vector<float>& buf,
                  bool buf_is_none, double lr, const SgdOptions& o) {
  const double momentum = o.momentum, dampening = o.dampening, weight_decay = o.weight_decay;
  for (size_t i = 0; i < param.size(); ++i) {
    float g = grad[i];
    if (weight_decay != 0) g = g + static_cast<float>(weight_decay) * param[i];
    if (momentum != 0) {
      if (buf_is_none) {
        buf[i] = g;  // torch.clone(grad)
      } else {       // buf.mul_(momentum).add_(grad, alpha=1 - dampening)
        buf[i] = buf[i] * static_cast<float>(momentum);
        buf[i] = buf[i] + static_cast<float>(1 - dampening) * g;
      }
      g = o.nesterov ? g + static_cast<float>(momentum) * buf[i] : buf[i];
    }
    param[i] = param[i] + static_cast<float>(-lr) * g;  // param.add_(grad, alpha=-lr)
  }
}

void RunSgd(const SgdOptions& o) {
  const bool momentum = o.momentum != 0;
  const std::string t = std::string("float") + kShape;
  auto session = LoadAmpcModel(
      "g (bool skip, float lr, bool first, " + t + " p, " + t + " u" +
      (momentum ? ", " + t + " buf) => (" + t + " p2, " + t + " buf2)" : ") => (" + t + " p2)") +
      " { p2" + (momentum ? ", buf2" : "") + " = ai.ampc.SGD<momentum = " + Text(o.momentum) +
      ", dampening = " + Text(o.dampening) + ", nesterov = " + (o.nesterov ? "1" : "0") +
      ", weight_decay = " + Text(o.weight_decay) + ">(skip, lr, first, p, u" +
      (momentum ? ", buf" : "") + ") }");
  ASSERT_NE(session, nullptr);
  std::vector<float> param = Initial(1), buf(kSize, 0.0f);
  Tensor p = Param(param), b = Param(buf);
  int applied = 0;
  for (int k = 0; k < kSteps; ++k) {
    const std::vector<float> grad = GradientOfStep(k);
    const float lr = LearningRateOfStep(k);
    std::vector<Tensor> inputs = {Bool(SkippedStep(k)), Floats({}, {lr}), Bool(applied == 0), p,
                                  Param(grad)};
    if (momentum) inputs.push_back(b);
    auto out = session->Run(inputs);
    ASSERT_TRUE(out.ok()) << out.status();
    if (!SkippedStep(k)) {
      ReferenceSgd(param, grad, buf, applied == 0, lr, o);
      ++applied;
    }
    ExpectBits((*out)[0], param, "param", k);
    p = (*out)[0];
    if (momentum) {
      ExpectBits((*out)[1], buf, "momentum buffer", k);
      b = (*out)[1];
    }
  }
  EXPECT_EQ(applied, kSteps - 12);
}

TEST(SgdParityTest, Plain) { RunSgd({}); }
TEST(SgdParityTest, WeightDecay) { RunSgd({.weight_decay = 0.01f}); }
TEST(SgdParityTest, Momentum) { RunSgd({.momentum = 0.9f}); }
TEST(SgdParityTest, MomentumDampeningWeightDecay) {
  RunSgd({.momentum = 0.9f, .dampening = 0.1f, .weight_decay = 5e-4f});
}
TEST(SgdParityTest, Nesterov) { RunSgd({.momentum = 0.9f, .nesterov = true}); }
TEST(SgdParityTest, NesterovWeightDecay) {
  RunSgd({.momentum = 0.8f, .weight_decay = 1e-3f, .nesterov = true});
}

// ---- Adam / AdamW: torch/optim/adam.py, _single_tensor_adam (amsgrad=False) ----

struct AdamOptions {
  float beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-8f, weight_decay = 0;
  bool decoupled = false;  // AdamW
};

// ATen's lerp (self + weight * (end - self), or its mirror for weights >= 0.5).
float Lerp(float self, float end, float weight) {
  return std::abs(weight) < 0.5f ? self + weight * (end - self)
                                 : end - (end - self) * (1.0f - weight);
}

void ReferenceAdam(std::vector<float>& param, std::vector<float> grad, std::vector<float>& m,
                   std::vector<float>& v, double lr, int step, const AdamOptions& o) {
  const double beta1 = o.beta1, beta2 = o.beta2, eps = o.epsilon, wd = o.weight_decay;
  const double bias_correction1 = 1 - std::pow(beta1, step);
  const double bias_correction2 = 1 - std::pow(beta2, step);
  const double step_size = lr / bias_correction1;
  const double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);
  for (size_t i = 0; i < param.size(); ++i) {
    float g = grad[i];
    if (wd != 0) {
      if (o.decoupled) {
        param[i] = param[i] * static_cast<float>(1 - lr * wd);  // param.mul_(1 - lr * wd)
      } else {
        g = g + static_cast<float>(wd) * param[i];  // grad.add(param, alpha=wd)
      }
    }
    m[i] = Lerp(m[i], g, static_cast<float>(1 - beta1));  // exp_avg.lerp_(grad, 1 - beta1)
    v[i] = v[i] * static_cast<float>(beta2);              // exp_avg_sq.mul_(beta2)
    v[i] = v[i] + static_cast<float>(1 - beta2) * g * g;  // .addcmul_(grad, grad, 1 - beta2)
    float denom = std::sqrt(v[i]) / static_cast<float>(bias_correction2_sqrt);
    denom = denom + static_cast<float>(eps);
    param[i] = param[i] + static_cast<float>(-step_size) * m[i] / denom;  // addcdiv_
  }
}

void RunAdam(const AdamOptions& o) {
  const std::string t = std::string("float") + kShape;
  auto session = LoadAmpcModel(
      "g (bool skip, float lr, int64 step, " + t + " p, " + t + " u, " + t + " m, " + t +
      " v) => (" + t + " p2, " + t + " m2, " + t + " v2) {" +
      " p2, m2, v2 = ai.ampc.Adam<beta1 = " + Text(o.beta1) + ", beta2 = " + Text(o.beta2) +
      ", epsilon = " + Text(o.epsilon) + ", weight_decay = " + Text(o.weight_decay) +
      ", decoupled = " + (o.decoupled ? "1" : "0") + ">(skip, lr, step, p, u, m, v) }");
  ASSERT_NE(session, nullptr);
  std::vector<float> param = Initial(2), m(kSize, 0.0f), v(kSize, 0.0f);
  Tensor p = Param(param), mt = Param(m), vt = Param(v);
  int applied = 0;
  for (int k = 0; k < kSteps; ++k) {
    const std::vector<float> grad = GradientOfStep(k);
    const float lr = LearningRateOfStep(k);
    auto out = session->Run(std::vector<Tensor>{Bool(SkippedStep(k)), Floats({}, {lr}),
                                                Int64s({}, {applied + 1}), p, Param(grad), mt, vt});
    ASSERT_TRUE(out.ok()) << out.status();
    if (!SkippedStep(k)) ReferenceAdam(param, grad, m, v, lr, ++applied, o);
    ExpectBits((*out)[0], param, "param", k);
    ExpectBits((*out)[1], m, "exp_avg", k);
    ExpectBits((*out)[2], v, "exp_avg_sq", k);
    p = (*out)[0];
    mt = (*out)[1];
    vt = (*out)[2];
  }
}

TEST(AdamParityTest, Adam) { RunAdam({}); }
TEST(AdamParityTest, AdamL2WeightDecay) { RunAdam({.beta2 = 0.99f, .weight_decay = 0.01f}); }
TEST(AdamParityTest, AdamW) { RunAdam({.weight_decay = 0.01f, .decoupled = true}); }
TEST(AdamParityTest, AdamWSmallBeta1) {  // lerp's other formula (weight 1 - beta1 >= 0.5)
  RunAdam({.beta1 = 0.3f, .epsilon = 1e-6f, .weight_decay = 0.1f, .decoupled = true});
}

// The vector loop (kernels/cpu/optimizer_simd.h) against the scalar formula on values the
// parity runs do not reach: zeros, subnormals, huge moments, negative and large parameters.
TEST(OptimizerOpsTest, VectorAdamHasTheScalarBits) {
  std::vector<float> p, g, m, v;
  uint32_t seed = 7;
  auto next = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return seed;
  };
  const float specials[] = {0.0f, -0.0f, 1e-40f, -3e-39f, 1e-30f, 3e38f, -2.5f, 1e10f};
  for (int i = 0; i < 1000; ++i) {
    auto value = [&](bool non_negative) {
      const uint32_t r = next();
      float x =
          (r & 7) < 3 ? specials[(r >> 3) & 7] : std::ldexp((r >> 8) / 16777216.0f, (r & 63) - 40);
      return non_negative ? std::abs(x) : ((r >> 7) & 1 ? -x : x);
    };
    p.push_back(value(false));
    g.push_back(value(false));
    m.push_back(value(false));
    v.push_back(value(true));
  }
  const scaler_math::AdamAttrs variants[] = {
      {}, {.weight_decay = 0.01f}, {.weight_decay = 0.1f, .decoupled = true}, {.beta1 = 0.3f}};
  for (const scaler_math::AdamAttrs& attrs : variants) {
    const scaler_math::AdamScalars s = scaler_math::AdamScalarsFor(attrs, 0.003f, 5);
    const int64_t n = static_cast<int64_t>(p.size());
    std::vector<float> po(n), mo(n), vo(n);
    const int64_t done = optimizer_simd::AdamBlock(s, p.data(), g.data(), m.data(), v.data(),
                                                   po.data(), mo.data(), vo.data(), n);
    if (__builtin_cpu_supports("avx")) {
      EXPECT_EQ(done, n / 8 * 8);
    }
    for (int64_t k = 0; k < done; ++k) {
      const scaler_math::AdamElementResult r = scaler_math::AdamElement(s, p[k], g[k], m[k], v[k]);
      ASSERT_EQ(std::bit_cast<uint32_t>(po[k]), std::bit_cast<uint32_t>(r.p)) << k;
      ASSERT_EQ(std::bit_cast<uint32_t>(mo[k]), std::bit_cast<uint32_t>(r.m)) << k;
      ASSERT_EQ(std::bit_cast<uint32_t>(vo[k]), std::bit_cast<uint32_t>(r.v)) << k;
    }
  }
}

TEST(OptimizerOpsTest, SkipReturnsTheInputBuffers) {
  auto session = LoadAmpcModel(
      "g (bool skip, float lr, int64 step, float[4] p, float[4] u, float[4] m, float[4] v) => "
      "(float[4] p2, float[4] m2, float[4] v2) { p2, m2, v2 = ai.ampc.Adam(skip, lr, step, p, u, "
      "m, v) }");
  ASSERT_NE(session, nullptr);
  const std::vector<Tensor> in = {Bool(true),
                                  Floats({}, {0.1f}),
                                  Int64s({}, {3}),
                                  Floats({4}, {1, 2, 3, 4}),
                                  Floats({4}, {NAN, 1, 1, 1}),
                                  Floats({4}, {0.1f, 0, 0, 0}),
                                  Floats({4}, {0.2f, 0, 0, 0})};
  auto out = session->Run(in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].buffer(), in[3].buffer());
  EXPECT_EQ((*out)[1].buffer(), in[5].buffer());
  EXPECT_EQ((*out)[2].buffer(), in[6].buffer());
}

TEST(OptimizerOpsTest, ErrorsNameTheNodeAndTheProblem) {
  RegisterAmpcSchemas();
  static CpuBackend* backend = new CpuBackend(1);
  // momentum != 0 without a buffer
  auto session = Session::Create(
      testing::ParseModelText(R"(<ir_version: 8, opset_import: ["" : 17, "ai.ampc" : 1]>
g (bool k, float r, bool f, float[2] p, float[2] u) => (float[2] q) {
  q = ai.ampc.SGD<momentum = 0.9>(k, r, f, p, u)
})"),
      DefaultRegistry(), *backend);
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("momentum != 0"), std::string::npos)
      << session.status();
  // Adam's step counts from 1
  auto adam = LoadAmpcModel(
      "g (bool k, float r, int64 t, float[2] p, float[2] u, float[2] m, float[2] v) => (float[2] "
      "q) { q, m2, v2 = ai.ampc.Adam(k, r, t, p, u, m, v) }");
  ASSERT_NE(adam, nullptr);
  auto out = adam->Run(std::vector<Tensor>{Bool(false), Floats({}, {0.1f}), Int64s({}, {0}),
                                           Floats({2}, {1, 2}), Floats({2}, {1, 2}),
                                           Floats({2}, {0, 0}), Floats({2}, {0, 0})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("step is 0; it counts from 1"), std::string::npos)
      << out.status();
}

}  // namespace
}  // namespace ampc
