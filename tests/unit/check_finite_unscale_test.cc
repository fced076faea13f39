// ai.ampc CheckFinite and UnscaleClip through a Session: expected values from plain loops here
// (the reciprocal in double applied in float, the norm in double, clip_grad_norm_'s coefficient).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/scaler_inputs.h"

namespace ampc {
namespace {

using testing::Floats;
using testing::Gradient;
using testing::kInf;
using testing::SetElement;
using testing::Step;

constexpr int kSmall = 3, kLarge = 20000;
const DType kGradTypes[] = {DType::kFloat16, DType::kBFloat16, DType::kFloat};

// ---- UnscaleClip ----

constexpr int kBig = 50000;

struct Unscaled {
  std::vector<float> widened;  // the gradients as FP32, in input order
  std::vector<Tensor> out;
};

Unscaled RunUnscaleClip(float scale, const std::string& max_norm) {
  Unscaled r;
  auto session = testing::LoadAmpcModel(
      "g (float s, float16[40] a, bfloat16[7] b, float[50000] c) => (float[40] ua, float[7] ub, "
      "float[50000] uc, float n) { ua, ub, uc, n = ai.ampc.UnscaleClip<max_norm = " +
      max_norm + ">(s, a, b, c) }");
  if (session == nullptr) return r;
  const Tensor a = Gradient(DType::kFloat16, 40, 7), b = Gradient(DType::kBFloat16, 7, 8);
  const Tensor c = Gradient(DType::kFloat, kBig, 9);
  for (int i = 0; i < 40; ++i) r.widened.push_back(HalfToFloat(a.data<Half>()[i].bits));
  for (int i = 0; i < 7; ++i) r.widened.push_back(BFloat16ToFloat(b.data<BFloat16>()[i].bits));
  for (int i = 0; i < kBig; ++i) r.widened.push_back(c.data<float>()[i]);
  r.out = Step(*session, {Floats({}, {scale}), a, b, c});
  return r;
}

std::vector<float> Concat(const std::vector<Tensor>& out) {
  std::vector<float> all;
  for (int i = 0; i < 3; ++i) {
    for (int64_t k = 0; k < out[i].size(); ++k) all.push_back(out[i].data<float>()[k]);
  }
  return all;
}

TEST(UnscaleClipTest, ReciprocalInDoubleAppliedInFloatNormInDouble) {
  const Unscaled r = RunUnscaleClip(3.0f, "0.0");
  ASSERT_EQ(r.out.size(), 4u);
  const float inv = static_cast<float>(1.0 / 3.0);
  const std::vector<float> u = Concat(r.out);
  ASSERT_EQ(u.size(), r.widened.size());
  double sum = 0.0;
  int differs_from_division = 0;
  for (size_t i = 0; i < u.size(); ++i) {
    const float want = r.widened[i] * inv;
    ASSERT_EQ(u[i], want) << i;
    differs_from_division += want != r.widened[i] / 3.0f;
    sum += static_cast<double>(want) * static_cast<double>(want);
  }
  EXPECT_GT(differs_from_division, 100);  // the test tells g * (1/s) from g / s
  EXPECT_EQ(r.out[3].data<float>()[0], static_cast<float>(std::sqrt(sum)));
}

TEST(UnscaleClipTest, ClipsByTheGlobalNormOfUnscaledGradients) {
  const float inv = static_cast<float>(1.0 / 1024.0);
  const Unscaled r = RunUnscaleClip(1024.0f, "0.005");
  ASSERT_EQ(r.out.size(), 4u);
  double sum = 0.0;
  for (float g : r.widened) sum += static_cast<double>(g * inv) * static_cast<double>(g * inv);
  const float norm = static_cast<float>(std::sqrt(sum));
  EXPECT_EQ(r.out[3].data<float>()[0], norm);  // reported before clipping
  ASSERT_GT(norm, 0.005f);
  const float coef = std::min(1.0f, 0.005f / (norm + 1e-6f));
  const std::vector<float> u = Concat(r.out);
  double clipped = 0.0;
  for (size_t i = 0; i < u.size(); ++i) {
    ASSERT_EQ(u[i], (r.widened[i] * inv) * coef) << i;
    clipped += static_cast<double>(u[i]) * u[i];
  }
  EXPECT_NEAR(std::sqrt(clipped), 0.005, 0.005 * 1e-3);
  // A threshold above the norm leaves the gradients as unscaled.
  const std::vector<float> loose = Concat(RunUnscaleClip(1024.0f, "1e6").out);
  for (size_t i = 0; i < loose.size(); ++i) ASSERT_EQ(loose[i], r.widened[i] * inv) << i;
}

TEST(UnscaleClipTest, ANanNormClipsEveryGradientToNanAsTorchDoes) {
  // clip_grad_norm_'s clamp(max_norm / (norm + 1e-6), max=1) keeps NaN; std::min kept 1.
  auto session = testing::LoadAmpcModel(
      "g (float s, float[3] a) => (float[3] ua, float n) { ua, n = "
      "ai.ampc.UnscaleClip<max_norm = 1.0>(s, a) }");
  ASSERT_NE(session, nullptr);
  const std::vector<Tensor> out = Step(*session, {Floats({}, {1.0f}), Floats({3}, {1, NAN, 3})});
  ASSERT_EQ(out.size(), 2u);
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(std::isnan(out[0].data<float>()[k])) << k;
}

TEST(CheckFiniteTest, OneBadElementAnywhereIsFound) {
  auto session = testing::LoadAmpcModel(
      "g (float16[3] h0, float16[20000] h1, bfloat16[3] b0, bfloat16[20000] b1, float[3] f0, "
      "float[20000] f1) => (bool found) { found = ai.ampc.CheckFinite(h0, h1, b0, b1, f0, f1) }");
  ASSERT_NE(session, nullptr);
  std::vector<Tensor> grads;
  for (DType dtype : kGradTypes) {
    grads.push_back(Gradient(dtype, kSmall, 3));
    grads.push_back(Gradient(dtype, kLarge, 4));
  }
  EXPECT_FALSE(Step(*session, grads)[0].data<bool>()[0]);
  for (size_t g = 0; g < grads.size(); ++g) {
    for (int64_t position : {int64_t{0}, grads[g].size() / 2, grads[g].size() - 1}) {
      for (float bad : {kInf, -kInf, NAN, 1e6f}) {  // 1e6 overflows FP16 (and only FP16)
        SetElement(grads[g], position, bad);
        const bool want = !std::isfinite(bad) || grads[g].dtype() == DType::kFloat16;
        EXPECT_EQ(Step(*session, grads)[0].data<bool>()[0], want)
            << "tensor " << g << " position " << position << " value " << bad;
        SetElement(grads[g], position, 0.5f);
      }
    }
  }
}

TEST(ScalerOpsTest, KernelCreationRejectsNonFloatGradientsNamingTheNode) {
  // (A Session's checker and strict inference reject this model first, with the schema's types.)
  static CpuBackend* backend = new CpuBackend(1);
  onnx::NodeProto node;
  node.set_name("check");
  node.set_op_type("CheckFinite");
  node.set_domain(kAmpcDomain);
  node.add_input("a");
  node.add_output("f");
  const KernelInfo info{node, 1, {DType::kInt32}, {DType::kBool}, *backend, {}, {}};
  auto kernel = DefaultRegistry().Create(info);
  ASSERT_FALSE(kernel.ok());
  EXPECT_THAT(
      kernel.status().message(),
      ::testing::HasSubstr("node 'check' (ai.ampc.CheckFinite): input 0 ('a') is int32, expected "
                           "a float type"));
}

}  // namespace
}  // namespace ampc
