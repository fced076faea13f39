// The Attention kernel run through a Session. Expected values are hand arithmetic or float64
// numpy loops written straight from the ONNX definition (softmax(Q K^T * scale + bias) V), their
// numbers pasted here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/numerics/half.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/session.h"
#include "tests/support/kernel_runs.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

using testing::Floats;
using testing::Halves;
using testing::Int64s;

std::vector<float> ValuesOf(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.size()));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = t.dtype() == DType::kFloat16 ? HalfToFloat(t.data<Half>()[i].bits) : t.data<float>()[i];
  }
  return v;
}

Tensor Bools(Shape shape, const std::vector<bool>& values) {
  Tensor t = Tensor::Host(DType::kBool, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.data<bool>()[i] = values[i];
  return t;
}

using testing::RunModel;

// Row 0 sees key 0 (causal); row 1 keys 0 and 1, but the mask hides key 1; row 2 keys 0 and 2,
// scores 0.25 and 0.5 (scale 0.5): y = v0 + (v2 - v0) * e^0.25 / (1 + e^0.25).
TEST(AttentionTest, BoolMaskAndCausalCombine) {
  auto out = RunModel(
      R"(
<ir_version: 10, opset_import: ["" : 23]>
g (float[1, 1, 3, 2] q, float[1, 1, 3, 2] k, float[1, 1, 3, 2] v, bool[3] m) => (float[1, 1, 3, 2] y) {
  y = Attention<is_causal = 1, scale = 0.5>(q, k, v, m)
}
)",
      {Floats({1, 1, 3, 2}, {1, 2, 3, -1, 0.5, 0.5}), Floats({1, 1, 3, 2}, {1, 0, 0, 1, 1, 1}),
       Floats({1, 1, 3, 2}, {1, 2, 3, 4, 5, 6}), Bools({3}, {true, false, true})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(
      ValuesOf((*out)[0]),
      Pointwise(FloatNear(1e-6f), std::vector<float>{1, 2, 1, 2, 3.2487060035f, 4.2487060035f}));
}

// 3-D inputs, two query heads sharing one KV head, a cache of one position: present_key and
// present_value are the cache then the new key, bit for bit; mode 0 gives the scaled Q K^T.
TEST(AttentionTest, GroupedQueryHeadsWithPastAndPresent) {
  auto out = RunModel(
      R"(
<ir_version: 10, opset_import: ["" : 23]>
g (float[1, 1, 4] q, float[1, 1, 2] k, float[1, 1, 2] v, float[1, 1, 1, 2] pk, float[1, 1, 1, 2] pv)
    => (float[1, 1, 4] y, float[1, 1, 2, 2] present_k, float[1, 1, 2, 2] present_v,
        float[1, 2, 1, 2] qk) {
  y, present_k, present_v, qk = Attention<q_num_heads = 2, kv_num_heads = 1>(q, k, v, , pk, pv)
}
)",
      {Floats({1, 1, 4}, {1, 0, 0, 2}), Floats({1, 1, 2}, {1, 1}), Floats({1, 1, 2}, {2, -2}),
       Floats({1, 1, 1, 2}, {0.5f, -1}), Floats({1, 1, 1, 2}, {4, 0})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(ValuesOf((*out)[0]),
              Pointwise(FloatNear(1e-6f), std::vector<float>{2.8250419983f, -1.1749580017f,
                                                             2.1116144384f, -1.8883855616f}));
  EXPECT_THAT(ValuesOf((*out)[1]), ElementsAre(0.5f, -1, 1, 1));
  EXPECT_THAT(ValuesOf((*out)[2]), ElementsAre(4, 0, 2, -2));
  EXPECT_THAT(ValuesOf((*out)[3]),
              Pointwise(FloatNear(1e-6f), std::vector<float>{0.3535533906f, 0.7071067812f,
                                                             -1.4142135624f, 1.4142135624f}));
}

// Batch 0 has 2 valid keys of 3, batch 1 all 3; causal is bottom-right aligned to them, so the
// one query sees keys {0, 1} and {0, 1, 2}: y = sum(v_j e^j) / sum(e^j).
TEST(AttentionTest, NonpadKvSeqlenWithCausalAlignsToTheValidKeys) {
  auto out = RunModel(R"(
<ir_version: 10, opset_import: ["" : 24]>
g (float[2, 1, 1, 1] q, float[2, 1, 3, 1] k, float[2, 1, 3, 1] v, int64[2] n) => (float[2, 1, 1, 1] y) {
  y = Attention<is_causal = 1, scale = 1.0>(q, k, v, , , , n)
}
)",
                      {Floats({2, 1, 1, 1}, {1, 1}), Floats({2, 1, 3, 1}, {1, 2, 3, 1, 2, 3}),
                       Floats({2, 1, 3, 1}, {10, 20, 30, 10, 20, 30}), Int64s({2}, {2, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(ValuesOf((*out)[0]),
              Pointwise(FloatNear(1e-5f), std::vector<float>{17.3105857863f, 25.7521038260f}));
}

// softcap 2: scores 2 tanh(2 / 2) and 2 tanh(6 / 2), then the additive float mask; mode 2 gives
// those sums.
TEST(AttentionTest, SoftcapComesBeforeTheFloatMask) {
  auto out = RunModel(R"(
<ir_version: 10, opset_import: ["" : 23]>
g (float[1, 1, 1, 1] q, float[1, 1, 2, 1] k, float[1, 1, 2, 1] v, float[1, 2] m)
    => (float[1, 1, 1, 1] y, float[1, 1, 1, 2] qk) {
  y, , , qk = Attention<scale = 1.0, softcap = 2.0, qk_matmul_output_mode = 2>(q, k, v, m)
}
)",
                      {Floats({1, 1, 1, 1}, {2}), Floats({1, 1, 2, 1}, {1, 3}),
                       Floats({1, 1, 2, 1}, {1, -1}), Floats({1, 2}, {0.5f, -0.25f})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(ValuesOf((*out)[0]), Pointwise(FloatNear(1e-6f), std::vector<float>{0.1406017434f}));
  EXPECT_THAT(ValuesOf((*out)[1]),
              Pointwise(FloatNear(1e-6f), std::vector<float>{2.0231883119f, 1.7401095074f}));
}

// A query whose mask hides every key attends to nothing: Y and the mode-3 probabilities are 0,
// not NaN; the other query is unaffected (one key, so y = v0).
TEST(AttentionTest, FullyMaskedRowGivesZeros) {
  auto out = RunModel(R"(
<ir_version: 10, opset_import: ["" : 23]>
g (float[1, 1, 2, 1] q, float[1, 1, 2, 1] k, float[1, 1, 2, 1] v, bool[2, 2] m)
    => (float[1, 1, 2, 1] y, float[1, 1, 2, 2] p) {
  y, , , p = Attention<qk_matmul_output_mode = 3>(q, k, v, m)
}
)",
                      {Floats({1, 1, 2, 1}, {1, 1}), Floats({1, 1, 2, 1}, {1, 1}),
                       Floats({1, 1, 2, 1}, {7, 9}), Bools({2, 2}, {true, false, false, false})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(ValuesOf((*out)[0]), ElementsAre(7, 0));
  EXPECT_THAT(ValuesOf((*out)[1]), ElementsAre(1, 0, 0, 0));
}

// Scores of 131072 and 130560 are beyond FP16's range (65504): an FP16 MatMul would give inf and
// the softmax NaN. In FP32 the second key's weight is e^-512 = 0, so y is v0 exactly.
TEST(AttentionTest, Fp16ScoresBeyondFp16RangeStayFinite) {
  auto out = RunModel(R"(
<ir_version: 10, opset_import: ["" : 23]>
g (float16[1, 1, 1, 2] q, float16[1, 1, 2, 2] k, float16[1, 1, 2, 2] v) => (float16[1, 1, 1, 2] y) {
  y = Attention<scale = 1.0>(q, k, v)
}
)",
                      {Halves({1, 1, 1, 2}, {256, 256}), Halves({1, 1, 2, 2}, {256, 256, 255, 255}),
                       Halves({1, 1, 2, 2}, {0.1f, -3, 5, 5})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(ValuesOf((*out)[0]), ElementsAre(HalfToFloat(FloatToHalf(0.1f)), -3));
}

TEST(AttentionTest, ThreeDInputsNeedHeadCounts) {
  auto out = RunModel(R"(
<ir_version: 10, opset_import: ["" : 23]>
g (float[1, 1, 4] q, float[1, 1, 4] k, float[1, 1, 4] v) => (float[1, 1, 4] y) {
  y = Attention(q, k, v)
}
)",
                      {Floats({1, 1, 4}, {1, 2, 3, 4}), Floats({1, 1, 4}, {1, 2, 3, 4}),
                       Floats({1, 1, 4}, {1, 2, 3, 4})});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("q_num_heads and kv_num_heads"));
}

}  // namespace
}  // namespace ampc
