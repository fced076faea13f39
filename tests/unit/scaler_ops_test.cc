// The loss-scaling ops (ai.ampc CheckFinite, UpdateScale, UnscaleClip, with Adam and SGD for skip
// atomicity) through a Session: UpdateScale hand cases, and a scripted trajectory of thousands of
// steps with injected inf/NaN against a reference implementation of docs/training-design.md's
// update rule written here.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/optimizer_simd.h"
#include "tests/support/scaler_inputs.h"

namespace ampc {
namespace {

using testing::Bool;
using testing::Floats;
using testing::Gradient;
using testing::Int64s;
using testing::kInf;
using testing::LoadAmpcModel;
using testing::SetElement;
using testing::Step;

// ---- the reference: docs/training-design.md, "The scale update rule", line by line ----

struct ScalerConfig {
  float growth_factor = 2.0f, backoff_factor = 0.5f;
  int64_t growth_interval = 3, hysteresis = 1;
  float min_scale = 0.0f, max_scale = 0.0f;  // 0: none
  bool dynamic = true;
  float init_scale = 65536.0f;

  std::string Attributes() const {
    return "growth_factor = " + std::to_string(growth_factor) +
           ", backoff_factor = " + std::to_string(backoff_factor) +
           ", growth_interval = " + std::to_string(growth_interval) +
           ", hysteresis = " + std::to_string(hysteresis) +
           ", min_scale = " + std::to_string(min_scale) +
           ", max_scale = " + std::to_string(max_scale) + ", dynamic = " + (dynamic ? "1" : "0");
  }
};

struct ScalerState {
  float scale;
  int64_t tracker, hysteresis_left;
};

ScalerState ReferenceUpdate(ScalerState s, bool found, bool loss_bad, const ScalerConfig& c) {
  if (!c.dynamic || loss_bad) return s;  // static/none scale; a non-finite loss is not an overflow
  if (found) {
    s.tracker = 0;
    s.hysteresis_left -= 1;
    if (s.hysteresis_left == 0) {
      float next = s.scale * c.backoff_factor;
      if (next < c.min_scale) next = c.min_scale;
      if (next < FLT_MIN) next = FLT_MIN;
      s.scale = next;
      s.hysteresis_left = c.hysteresis;
    }
  } else {
    s.tracker += 1;
    if (s.tracker >= c.growth_interval) {
      const float grown = s.scale * c.growth_factor;
      if (std::isfinite(grown) && (c.max_scale == 0.0f || grown <= c.max_scale)) s.scale = grown;
      s.tracker = 0;
    }
    s.hysteresis_left = c.hysteresis;
  }
  return s;
}

// ---- hand cases ----

std::vector<Tensor> UpdateOnce(const ScalerConfig& c, ScalerState s, bool found, bool loss_bad) {
  auto session = LoadAmpcModel(
      "g (float s, int64 t, int64 h, bool f, bool l) => (float s2, int64 t2, int64 h2) {"
      " s2, t2, h2 = ai.ampc.UpdateScale<" +
      c.Attributes() + ">(s, t, h, f, l) }");
  if (session == nullptr) return {};
  return Step(*session, {Floats({}, {s.scale}), Int64s({}, {s.tracker}),
                         Int64s({}, {s.hysteresis_left}), Bool(found), Bool(loss_bad)});
}

void ExpectState(const std::vector<Tensor>& out, ScalerState want) {
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].data<float>()[0], want.scale);
  EXPECT_EQ(out[1].data<int64_t>()[0], want.tracker);
  EXPECT_EQ(out[2].data<int64_t>()[0], want.hysteresis_left);
}

TEST(UpdateScaleTest, GrowsAfterIntervalAndBacksOffOnOverflow) {
  ScalerConfig c;
  ExpectState(UpdateOnce(c, {1024.0f, 1, 1}, false, false), {1024.0f, 2, 1});
  ExpectState(UpdateOnce(c, {1024.0f, 2, 1}, false, false), {2048.0f, 0, 1});
  ExpectState(UpdateOnce(c, {1024.0f, 2, 1}, true, false), {512.0f, 0, 1});
}

TEST(UpdateScaleTest, GrowthNearFltMaxRefusedWithTrackerReset) {
  ScalerConfig c;
  const float top = std::ldexp(1.0f, 127);  // * 2 overflows
  ExpectState(UpdateOnce(c, {top, 2, 1}, false, false), {top, 0, 1});
  c.max_scale = 3000.0f;  // 2048 * 2 > max_scale: refused, tracker reset
  ExpectState(UpdateOnce(c, {2048.0f, 2, 1}, false, false), {2048.0f, 0, 1});
}

TEST(UpdateScaleTest, HysteresisSkipsWithoutBackingOff) {
  ScalerConfig c;
  c.hysteresis = 3;
  ExpectState(UpdateOnce(c, {1024.0f, 2, 3}, true, false), {1024.0f, 0, 2});
  ExpectState(UpdateOnce(c, {1024.0f, 0, 1}, true, false), {512.0f, 0, 3});
  ExpectState(UpdateOnce(c, {1024.0f, 0, 1}, false, false), {1024.0f, 1, 3});  // refills
}

TEST(UpdateScaleTest, BackoffFlooredAtMinScaleAndSmallestNormal) {
  ScalerConfig c;
  ExpectState(UpdateOnce(c, {FLT_MIN, 0, 1}, true, false), {FLT_MIN, 0, 1});
  c.min_scale = 1.0f;
  ExpectState(UpdateOnce(c, {1.5f, 0, 1}, true, false), {1.0f, 0, 1});
}

TEST(UpdateScaleTest, LossBadAndStaticScaleLeaveStateUnchanged) {
  ScalerConfig c;
  ExpectState(UpdateOnce(c, {1024.0f, 2, 1}, true, true), {1024.0f, 2, 1});
  ExpectState(UpdateOnce(c, {1024.0f, 2, 1}, false, true), {1024.0f, 2, 1});
  c.dynamic = false;
  ExpectState(UpdateOnce(c, {1024.0f, 2, 1}, true, false), {1024.0f, 2, 1});
  ExpectState(UpdateOnce(c, {1.0f, 2, 1}, false, false), {1.0f, 2, 1});
}

// ---- UnscaleClip's pass (kernels/cpu/optimizer_simd.h) ----

// The unscaled values keep their bits; the sum of squares is within FP64 rounding of the exact
// sum (long double here), and is the 8-lane sum the comment promises.
TEST(UnscaleSquaresTest, ValuesExactAndSumOverEightLanes) {
  for (int64_t n : {0, 5, 8, 37, 1000}) {
    std::vector<float> w(n), u(n);
    uint32_t seed = 99;
    for (float& x : w) {
      seed = seed * 1664525u + 1013904223u;
      x = std::ldexp(static_cast<float>(seed >> 8) / 16777216.0f - 0.5f, (seed & 31) - 16);
    }
    const float inv = 1.0f / 1024.0f * 3.0f;
    bool bad = false;
    const double sum = optimizer_simd::UnscaleSquares(w.data(), n, inv, u.data(), &bad);
    EXPECT_FALSE(bad);
    double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    long double exact = 0;
    for (int64_t k = 0; k < n; ++k) {
      ASSERT_EQ(u[k], w[k] * inv) << k;
      lanes[k % 8] += static_cast<double>(u[k]) * u[k];
      exact += static_cast<long double>(u[k]) * u[k];
    }
    const double want = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                        ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    EXPECT_EQ(sum, want) << n;
    EXPECT_NEAR(sum, static_cast<double>(exact), 1e-15 * static_cast<double>(exact)) << n;
  }
}

TEST(UnscaleSquaresTest, FindsInfAndNanAnywhere) {
  for (float special : {kInf, -kInf, NAN}) {
    for (int64_t at = 0; at < 37; ++at) {
      std::vector<float> w(37, 1.0f), u(37);
      w[at] = special;
      bool bad = false;
      optimizer_simd::UnscaleSquares(w.data(), 37, 0.5f, u.data(), &bad);
      EXPECT_TRUE(bad) << special << " at " << at;
    }
  }
  std::vector<float> w = {3e38f, 3e38f, 3e38f, 3e38f, 3e38f, 3e38f, 3e38f, 3e38f, 3e38f}, u(9);
  bool bad = false;  // finite values whose unscaled copies overflow are not non-finite gradients
  optimizer_simd::UnscaleSquares(w.data(), 9, 4.0f, u.data(), &bad);
  EXPECT_FALSE(bad);
}

// ---- the trajectory ----

// Six gradients: {FP16, BF16, FP32} x {3 elements, 20000 elements (several threads' blocks)}.
constexpr int kSmall = 3, kLarge = 20000;
const DType kGradTypes[] = {DType::kFloat16, DType::kBFloat16, DType::kFloat};

std::string StepModel(const ScalerConfig& c) {
  return R"(g (float16[3] h0, float16[20000] h1, bfloat16[3] b0, bfloat16[20000] b1, float[3] f0,
   float[20000] f1, float scale, int64 tracker, int64 hyst, bool loss_bad, int64 step,
   float[3] p, float[3] m, float[3] v, float[3] q, float[3] buf)
  => (bool found, float scale2, int64 tracker2, int64 hyst2, int64 step2, float[3] p2,
      float[3] m2, float[3] v2, float[3] q2, float[3] buf2) {
  found = ai.ampc.CheckFinite(h0, h1, b0, b1, f0, f1)
  scale2, tracker2, hyst2 = ai.ampc.UpdateScale<)" +
         c.Attributes() + R"(>(scale, tracker, hyst, found, loss_bad)
  skip = Or(found, loss_bad)
  u_f, u_h, norm = ai.ampc.UnscaleClip<max_norm = 1.0>(scale, f0, h0)
  lr = Constant<value_float = 0.01>()
  one = Constant<value_int = 1>()
  zero = Constant<value_int = 0>()
  next = Add(step, one)
  p2, m2, v2 = ai.ampc.Adam<beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8, weight_decay = 0.01,
      decoupled = 1>(skip, lr, next, p, u_f, m, v)
  first = Equal(step, zero)
  q2, buf2 = ai.ampc.SGD<momentum = 0.9, dampening = 0.0, nesterov = 0, weight_decay = 0.0>(
      skip, lr, first, q, u_h, buf)
  applied = Not(skip)
  inc = Cast<to = 7>(applied)
  step2 = Add(step, inc)
})";
}

struct Coverage {
  std::set<std::tuple<int, int, int, int>> injected;  // (dtype, size, position, value kind)
  int growths = 0, refused_at_max = 0, backoffs = 0, floored = 0, held_by_hysteresis = 0;
  int loss_bad_with_found = 0, skipped = 0, applied = 0;
};

// Runs `steps` steps of a scripted pattern: phases of clean steps (the scale climbs to FLT_MAX),
// light, heavy (it falls to the floor) and sparse overflow; non-finite losses throughout.
Coverage RunTrajectory(const ScalerConfig& c, int steps) {
  Coverage cov;
  auto session = LoadAmpcModel(StepModel(c));
  if (session == nullptr) return cov;
  std::vector<Tensor> grads;
  for (DType dtype : kGradTypes) {
    grads.push_back(Gradient(dtype, kSmall, 1 + static_cast<uint32_t>(grads.size())));
    grads.push_back(Gradient(dtype, kLarge, 1 + static_cast<uint32_t>(grads.size())));
  }
  ScalerState ref{c.init_scale, 0, c.hysteresis};
  std::vector<Tensor> state = {Floats({}, {ref.scale}), Int64s({}, {0}), Int64s({}, {c.hysteresis}),
                               Int64s({}, {0})};
  for (int i = 0; i < 5; ++i) state.push_back(Floats({3}, {0.5f, -0.25f, 1.0f}));
  const int phase_length[] = {400, 300, 600, 300};
  const uint32_t phase_odds[] = {0, 35, 90, 8};  // percent of steps with an injection
  uint32_t rng = 12345;
  auto next = [&rng](uint32_t n) {
    rng = rng * 1664525u + 1013904223u;
    return (rng >> 8) % n;
  };
  int phase = 0, phase_left = phase_length[0];
  for (int step = 0; step < steps; ++step) {
    if (--phase_left < 0) {
      phase = (phase + 1) % 4;
      phase_left = phase_length[phase] - 1;
    }
    const bool inject = next(100) < phase_odds[phase];
    const bool loss_bad = next(100) < 3;
    int g = 0;
    int64_t position = 0;
    if (inject) {
      const int dtype = static_cast<int>(next(3)), large = static_cast<int>(next(2));
      const int last = static_cast<int>(next(2)), kind = static_cast<int>(next(3));
      g = 2 * dtype + large;
      position = last ? grads[g].size() - 1 : 0;
      SetElement(grads[g], position, kind == 0 ? kInf : kind == 1 ? -kInf : NAN);
      cov.injected.insert({dtype, large, last, kind});
    }
    std::vector<Tensor> inputs = grads;
    inputs.push_back(state[0]);
    inputs.push_back(state[1]);
    inputs.push_back(state[2]);
    inputs.push_back(Bool(loss_bad));
    for (size_t i = 3; i < state.size(); ++i) inputs.push_back(state[i]);
    const std::vector<Tensor> out = Step(*session, inputs);
    if (inject) SetElement(grads[g], position, 1.0f);
    if (out.size() != 10 || out[0].empty()) return cov;

    const ScalerState want = ReferenceUpdate(ref, inject, loss_bad, c);
    if (!inject && !loss_bad && c.dynamic && ref.tracker + 1 >= c.growth_interval) {
      ++(want.scale != ref.scale ? cov.growths : cov.refused_at_max);
    }
    if (inject && !loss_bad && c.dynamic) {
      if (want.hysteresis_left != c.hysteresis) {
        ++cov.held_by_hysteresis;
      } else {
        ++(want.scale < ref.scale ? cov.backoffs : cov.floored);
      }
    }
    cov.loss_bad_with_found += inject && loss_bad;
    EXPECT_EQ(out[0].data<bool>()[0], inject) << "step " << step;
    EXPECT_EQ(out[1].data<float>()[0], want.scale) << "step " << step;
    EXPECT_EQ(out[2].data<int64_t>()[0], want.tracker) << "step " << step;
    EXPECT_EQ(out[3].data<int64_t>()[0], want.hysteresis_left) << "step " << step;
    const bool skip = inject || loss_bad;
    ++(skip ? cov.skipped : cov.applied);
    const int64_t step_count = state[3].data<int64_t>()[0];
    EXPECT_EQ(out[4].data<int64_t>()[0], step_count + (skip ? 0 : 1)) << "step " << step;
    if (skip) {  // parameters and moments: the very input buffers, so bit-identical
      for (int i = 0; i < 5; ++i) {
        EXPECT_EQ(out[5 + i].buffer(), state[4 + i].buffer())
            << "step " << step << " output " << 5 + i;
      }
    }
    for (int i = 0; i < 4; ++i) state[i] = out[1 + i];
    for (int i = 0; i < 5; ++i) state[4 + i] = out[5 + i];
    ref = want;
    if (::testing::Test::HasFailure()) return cov;  // one divergence, not thousands of lines
  }
  return cov;
}

TEST(ScalerTrajectoryTest, DynamicScaleFollowsTheRuleOver6400Steps) {
  const Coverage cov = RunTrajectory(ScalerConfig{}, 6400);
  EXPECT_EQ(cov.injected.size(), 36u);  // every dtype, tensor size, position and value
  EXPECT_GT(cov.growths, 100);
  EXPECT_GT(cov.refused_at_max, 0);  // at 2^127
  EXPECT_GT(cov.backoffs, 100);
  EXPECT_GT(cov.floored, 0);  // at FLT_MIN
  EXPECT_GT(cov.loss_bad_with_found, 0);
  EXPECT_GT(cov.skipped, 1000);
  EXPECT_GT(cov.applied, 1000);
}

TEST(ScalerTrajectoryTest, HysteresisThreeOver6400Steps) {
  ScalerConfig c;
  c.hysteresis = 3;
  const Coverage cov = RunTrajectory(c, 6400);
  EXPECT_GT(cov.held_by_hysteresis, 100);  // an overflow that neither backs off nor grows
  EXPECT_GT(cov.backoffs, 50);
  EXPECT_GT(cov.growths, 50);
}

TEST(ScalerTrajectoryTest, MinAndMaxScaleBoundTheTrajectory) {
  ScalerConfig c;
  c.min_scale = 1.0f;
  c.max_scale = std::ldexp(1.0f, 40);
  const Coverage cov = RunTrajectory(c, 3200);
  EXPECT_GT(cov.refused_at_max, 0);
  EXPECT_GT(cov.backoffs, 0);
}

TEST(ScalerTrajectoryTest, StaticAndNoScaleStillSkipNonFinite) {
  for (float scale : {1024.0f, 1.0f}) {  // --loss-scale=static:1024 and none (BF16's default)
    ScalerConfig c;
    c.dynamic = false;
    c.init_scale = scale;
    const Coverage cov = RunTrajectory(c, 1600);
    EXPECT_EQ(cov.growths + cov.backoffs + cov.refused_at_max, 0);
    EXPECT_GT(cov.skipped, 100);
  }
}

}  // namespace
}  // namespace ampc
