// The ai.ampc schemas (checker, strict type and shape inference) and function bodies: each body,
// expanded by libonnx's FunctionExpandHelper into standard ops, computes bit for bit what the
// op's CPU kernel computes, on the same inputs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/defs/function.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "passes/opset/training_ops.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/session.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

using testing::Floats;
using testing::Halves;
using ::testing::HasSubstr;
using testing::Int64s;
using testing::Make;

constexpr char kHeader[] = R"(<ir_version: 8, opset_import: ["" : 17, "ai.ampc" : 1]>)";

Tensor Bools(bool value) { return Make(DType::kBool, {}, std::vector<bool>{value}); }
Tensor Scalar(float value) { return Floats({}, {value}); }
Tensor Int64Scalar(int64_t value) { return Int64s({}, {value}); }

Tensor BFloats(Shape shape, const std::vector<float>& values) {
  std::vector<BFloat16> v;
  for (float x : values) v.push_back(BFloat16{FloatToBFloat16(x)});
  return Make(DType::kBFloat16, std::move(shape), v);
}

std::vector<float> Pseudo(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = -2.0f + 4.0f * static_cast<float>(seed >> 8) / static_cast<float>(1u << 24);
  }
  return v;
}

std::vector<Tensor> Run(const onnx::ModelProto& model, const std::vector<Tensor>& inputs) {
  static CpuBackend* backend = new CpuBackend(2);
  auto session = Session::Create(model, DefaultRegistry(), *backend);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return {};
  auto outputs = (*session)->Run(inputs);
  EXPECT_TRUE(outputs.ok()) << outputs.status();
  return outputs.ok() ? *outputs : std::vector<Tensor>{};
}

// The model with every ai.ampc node replaced by its function body (standard ops only).
onnx::ModelProto Expanded(const onnx::ModelProto& model) {
  onnx::ModelProto out = model;
  out.mutable_graph()->clear_node();
  int k = 0;
  for (const onnx::NodeProto& node : model.graph().node()) {
    if (node.domain() != kAmpcDomain) {
      *out.mutable_graph()->add_node() = node;
      continue;
    }
    auto body = AmpcFunctionBody(node.op_type(), node.input_size(), node.output_size());
    EXPECT_TRUE(body.ok()) << body.status();
    if (body.ok())
      onnx::FunctionExpandHelper(node, *body, *out.mutable_graph(),
                                 "f" + std::to_string(k++) + "_");
  }
  return out;
}

// Runs the model and its expansion; every output must match bit for bit.
void ExpectBodyMatchesKernel(const std::string& text, const std::vector<Tensor>& inputs) {
  RegisterAmpcSchemas();
  const onnx::ModelProto model = testing::ParseModelText(text);
  const std::vector<Tensor> kernel = Run(model, inputs);
  const std::vector<Tensor> body = Run(Expanded(model), inputs);
  ASSERT_EQ(kernel.size(), body.size());
  for (size_t i = 0; i < kernel.size(); ++i) {
    SCOPED_TRACE(model.graph().output(static_cast<int>(i)).name());
    ASSERT_EQ(kernel[i].dtype(), body[i].dtype());
    ASSERT_EQ(kernel[i].shape(), body[i].shape());
    EXPECT_EQ(0, std::memcmp(kernel[i].raw(), body[i].raw(), kernel[i].bytes()));
  }
}

// ---- schemas ----

constexpr char kStepModel[] = R"(
g (float16[3] a, bfloat16[2,2] b, float[5] c, float scale, int64 tracker, int64 hyst,
   bool loss_bad, float lr, bool first, int64 step, float[5] p, float[5] buf, float[5] m,
   float[5] v)
  => (bool found, float scale2, int64 tracker2, int64 hyst2, float[5] p1, float[5] buf2,
      float[5] p2, float[5] m2, float[5] v2, float norm, float[3] ua, float[2,2] ub) {
  found = ai.ampc.CheckFinite(a, b, c)
  scale2, tracker2, hyst2 = ai.ampc.UpdateScale<growth_factor = 2.0, backoff_factor = 0.5,
      growth_interval = 3, hysteresis = 1, min_scale = 0.0, max_scale = 0.0, dynamic = 1>(
      scale, tracker, hyst, found, loss_bad)
  skip = Or(found, loss_bad)
  ua, ub, uc, norm = ai.ampc.UnscaleClip<max_norm = 1.0>(scale, a, b, c)
  p1, buf2 = ai.ampc.SGD<momentum = 0.9, dampening = 0.0, nesterov = 1, weight_decay = 0.0>(
      skip, lr, first, p, uc, buf)
  p2, m2, v2 = ai.ampc.Adam<beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8, weight_decay = 0.01,
      decoupled = 1>(skip, lr, step, p, uc, m, v)
}
)";

TEST(AmpcSchemasTest, StepModelPassesCheckerAndStrictInference) {
  RegisterAmpcSchemas();
  RegisterAmpcSchemas();  // idempotent
  for (const char* op : {"CheckFinite", "UpdateScale", "UnscaleClip", "SGD", "Adam"}) {
    EXPECT_NE(onnx::OpSchemaRegistry::Schema(op, 1, kAmpcDomain), nullptr) << op;
  }
  onnx::ModelProto model = testing::ParseModelText(std::string(kHeader) + kStepModel);
  EXPECT_NO_THROW(onnx::checker::check_model(model));
  onnx::ShapeInferenceOptions strict{/*check_type=*/true, /*error_mode=*/1, false};
  EXPECT_NO_THROW(
      onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), strict));
  // uc, an intermediate, is typed float[5] by UnscaleClip's inference.
  bool typed = false;
  for (const auto& info : model.graph().value_info()) {
    if (info.name() != "uc") continue;
    typed = info.type().tensor_type().elem_type() == onnx::TensorProto::FLOAT &&
            info.type().tensor_type().shape().dim_size() == 1 &&
            info.type().tensor_type().shape().dim(0).dim_value() == 5;
  }
  EXPECT_TRUE(typed);
}

TEST(AmpcSchemasTest, RegistrationIsThreadSafe) {
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([] { RegisterAmpcSchemas(); });
  for (auto& t : threads) t.join();
  EXPECT_NE(onnx::OpSchemaRegistry::Schema("Adam", 1, kAmpcDomain), nullptr);
}

TEST(AmpcSchemasTest, StrictInferenceRejectsMismatches) {
  RegisterAmpcSchemas();
  onnx::ShapeInferenceOptions strict{true, 1, false};
  for (const char* body : {
           // UnscaleClip with two gradients needs three outputs
           "(float s, float[2] a, float[3] b) => (float[2] u) { u, n = ai.ampc.UnscaleClip(s, a, "
           "b) }",
           // Adam's moment of another shape
           "(bool k, float r, int64 t, float[4] p, float[4] u, float[5] m, float[4] v) => "
           "(float[4] "
           "q) { q, m2, v2 = ai.ampc.Adam(k, r, t, p, u, m, v) }",
           // a gradient of an integer type
           "(int32[2] a) => (bool f) { f = ai.ampc.CheckFinite(a) }",
       }) {
    onnx::ModelProto model = testing::ParseModelText(std::string(kHeader) + "g " + body);
    EXPECT_ANY_THROW(
        onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), strict))
        << body;
  }
}

TEST(AmpcFunctionsTest, ModelWithLocalFunctionsPassesChecker) {
  RegisterAmpcSchemas();
  onnx::ModelProto model = testing::ParseModelText(std::string(kHeader) + kStepModel);
  auto functions = AmpcFunctionBodies(model.graph());
  ASSERT_TRUE(functions.ok()) << functions.status();
  ASSERT_EQ(functions->size(), 5u);
  for (const auto& f : *functions) *model.add_functions() = f;
  EXPECT_NO_THROW(onnx::checker::check_model(model));
}

TEST(AmpcFunctionsTest, NamesTheNodeOnArityClashOrMissingAttribute) {
  onnx::ModelProto model = testing::ParseModelText(std::string(kHeader) + R"(
g (bool k, float r, bool f, float[2] p, float[2] u, float[2] b) => (float[2] q, float[2] w) {
  q = ai.ampc.SGD<momentum = 0.0, dampening = 0.0, nesterov = 0, weight_decay = 0.0>(k, r, f, p, u)
  w, b2 = ai.ampc.SGD<momentum = 0.9, dampening = 0.0, nesterov = 0, weight_decay = 0.0>(k, r, f, p, u, b)
})");
  model.mutable_graph()->mutable_node(1)->set_name("sgd_bias");
  auto clash = AmpcFunctionBodies(model.graph());
  EXPECT_THAT(clash.status().message(), HasSubstr("node 'sgd_bias' (ai.ampc.SGD)"));
  model.mutable_graph()->mutable_node()->RemoveLast();
  model.mutable_graph()->mutable_node(0)->mutable_attribute()->RemoveLast();
  auto missing = AmpcFunctionBodies(model.graph());
  EXPECT_THAT(missing.status().message(), HasSubstr("attribute 'weight_decay' must be stated"));
  EXPECT_EQ(AmpcFunctionBody("Nope", 1, 1).status().code(), absl::StatusCode::kNotFound);
}

// ---- bodies against kernels ----

TEST(AmpcFunctionsTest, CheckFiniteBodyMatchesKernel) {
  const std::string text = std::string(kHeader) + R"(
g (float16[4] a, bfloat16[3] b, float[2] c) => (bool found) { found = ai.ampc.CheckFinite(a, b, c) })";
  const float inf = std::numeric_limits<float>::infinity();
  ExpectBodyMatchesKernel(
      text, {Halves({4}, {1, 2, 3, 4}), BFloats({3}, {1, 2, 3}), Floats({2}, {1, 2})});
  ExpectBodyMatchesKernel(
      text, {Halves({4}, {1, 2, 3, 70000}), BFloats({3}, {1, 2, 3}), Floats({2}, {1, 2})});
  ExpectBodyMatchesKernel(
      text, {Halves({4}, {1, 2, 3, 4}), BFloats({3}, {-inf, 2, 3}), Floats({2}, {1, 2})});
  ExpectBodyMatchesKernel(
      text, {Halves({4}, {1, 2, 3, 4}), BFloats({3}, {1, 2, 3}), Floats({2}, {1, NAN})});
}

TEST(AmpcFunctionsTest, UpdateScaleBodyMatchesKernel) {
  const float big = std::ldexp(1.0f, 127);
  struct Case {
    float scale;
    int64_t tracker, hyst;
    bool found, loss_bad;
    const char* attrs;
  } cases[] = {
      {65536.0f, 0, 1, false, false,
       "hysteresis = 1, min_scale = 0.0, max_scale = 0.0, dynamic = 1"},
      {65536.0f, 2, 1, false, false,
       "hysteresis = 1, min_scale = 0.0, max_scale = 0.0, dynamic = 1"},
      {big, 2, 1, false, false, "hysteresis = 1, min_scale = 0.0, max_scale = 0.0, dynamic = 1"},
      {1024.0f, 2, 1, false, false,
       "hysteresis = 1, min_scale = 0.0, max_scale = 1500.0, dynamic = 1"},
      {65536.0f, 1, 1, true, false,
       "hysteresis = 1, min_scale = 0.0, max_scale = 0.0, dynamic = 1"},
      {65536.0f, 1, 3, true, false,
       "hysteresis = 3, min_scale = 0.0, max_scale = 0.0, dynamic = 1"},
      {1e-38f, 1, 1, true, false, "hysteresis = 1, min_scale = 0.0, max_scale = 0.0, dynamic = 1"},
      {2.0f, 1, 1, true, false, "hysteresis = 2, min_scale = 1.5, max_scale = 0.0, dynamic = 1"},
      {8.0f, 1, 1, true, true, "hysteresis = 1, min_scale = 0.0, max_scale = 0.0, dynamic = 1"},
      {8.0f, 2, 1, false, false, "hysteresis = 1, min_scale = 0.0, max_scale = 0.0, dynamic = 0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.attrs);
    ExpectBodyMatchesKernel(
        std::string(kHeader) +
            "g (float s, int64 t, int64 h, bool f, bool l) => (float s2, int64 t2, "
            "int64 h2) { s2, t2, h2 = ai.ampc.UpdateScale<growth_factor = 2.0, "
            "backoff_factor = 0.5, growth_interval = 3, " +
            c.attrs + ">(s, t, h, f, l) }",
        {Scalar(c.scale), Int64Scalar(c.tracker), Int64Scalar(c.hyst), Bools(c.found),
         Bools(c.loss_bad)});
  }
}

TEST(AmpcFunctionsTest, UnscaleClipBodyMatchesKernel) {
  for (const char* max_norm : {"0.0", "1.0", "1e9"}) {
    SCOPED_TRACE(max_norm);
    ExpectBodyMatchesKernel(
        std::string(kHeader) +
            "g (float s, float16[40] a, bfloat16[7] b, float[3,11] c) => (float[40] "
            "ua, float[7] ub, float[3,11] uc, float n) { ua, ub, uc, n = "
            "ai.ampc.UnscaleClip<max_norm = " +
            max_norm + ">(s, a, b, c) }",
        {Scalar(3.0f), Halves({40}, Pseudo(40, 1)), BFloats({7}, Pseudo(7, 2)),
         Floats({3, 11}, Pseudo(33, 3))});
  }
}

TEST(AmpcFunctionsTest, SgdBodyMatchesKernel) {
  const std::vector<Tensor> common = {Scalar(0.05f), Floats({6}, Pseudo(6, 4)),
                                      Floats({6}, Pseudo(6, 5)), Floats({6}, Pseudo(6, 6))};
  for (bool skip : {false, true}) {
    for (bool first : {false, true}) {
      std::vector<Tensor> in = {Bools(skip), common[0], Bools(first), common[1], common[2]};
      ExpectBodyMatchesKernel(
          std::string(kHeader) +
              "g (bool k, float r, bool f, float[6] p, float[6] u) => (float[6] q) "
              "{ q = ai.ampc.SGD<momentum = 0.0, dampening = 0.0, nesterov = 0, "
              "weight_decay = 0.1>(k, r, f, p, u) }",
          in);
      in.push_back(common[3]);
      for (const char* attrs : {"dampening = 0.2, nesterov = 0, weight_decay = 0.0",
                                "dampening = 0.0, nesterov = 1, weight_decay = 0.01"}) {
        ExpectBodyMatchesKernel(
            std::string(kHeader) +
                "g (bool k, float r, bool f, float[6] p, float[6] u, float[6] b) => (float[6] q, "
                "float[6] b2) { q, b2 = ai.ampc.SGD<momentum = 0.9, " +
                attrs + ">(k, r, f, p, u, b) }",
            in);
      }
    }
  }
}

TEST(AmpcFunctionsTest, AdamBodyMatchesKernel) {
  std::vector<float> v = Pseudo(9, 9);
  for (float& x : v) x = x * x;
  for (bool skip : {false, true}) {
    for (const char* attrs :
         {"beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8, weight_decay = 0.0, decoupled = 0",
          "beta1 = 0.9, beta2 = 0.99, epsilon = 1e-6, weight_decay = 0.1, decoupled = 0",
          "beta1 = 0.3, beta2 = 0.999, epsilon = 1e-8, weight_decay = 0.05, decoupled = 1"}) {
      SCOPED_TRACE(attrs);
      ExpectBodyMatchesKernel(
          std::string(kHeader) +
              "g (bool k, float r, int64 t, float[9] p, float[9] u, float[9] m, float[9] v) => "
              "(float[9] p2, float[9] m2, float[9] v2) { p2, m2, v2 = ai.ampc.Adam<" +
              attrs + ">(k, r, t, p, u, m, v) }",
          {Bools(skip), Scalar(1e-3f), Int64Scalar(7), Floats({9}, Pseudo(9, 7)),
           Floats({9}, Pseudo(9, 8)), Floats({9}, Pseudo(9, 10)), Floats({9}, v)});
    }
  }
}

}  // namespace
}  // namespace ampc
