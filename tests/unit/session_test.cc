#include "runtime/session.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/cpu_backend.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

using testing::Floats;
using testing::Values;

using ::testing::HasSubstr;

constexpr char kChain[] = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 3] x, float[3] b) => (float[N, 3] y) {
  s = Add(x, b)
  r = Relu(s)
  n = Neg(r)
  y = Abs(n)
}
)";

TEST(SessionTest, RunsAChainWithBroadcasting) {
  CpuBackend backend(2);
  auto session = Session::Create(testing::ParseModelText(kChain), DefaultRegistry(), backend);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<Tensor> inputs = {Floats({2, 3}, {1, -2, 3, -4, 5, -6}),
                                Floats({3}, {0.5f, 0.5f, -10})};
  auto outputs = (*session)->Run(inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), 1u);
  EXPECT_EQ((*outputs)[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(Values<float>((*outputs)[0]), (std::vector<float>{1.5f, 0, 0, 0, 5.5f, 0}));
}

TEST(SessionTest, FreesValuesAfterTheirLastUseSoBuffersAreReused) {
  CpuBackend backend(1);
  auto session = Session::Create(testing::ParseModelText(kChain), DefaultRegistry(), backend);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<Tensor> inputs = {Tensor::Host(DType::kFloat, {1024, 3}),
                                Tensor::Host(DType::kFloat, {3})};
  ASSERT_TRUE((*session)->Run(inputs).ok());
  const MemoryStats stats = backend.memory_stats();
  // Four values of 12 KiB are produced; with liveness at most two are alive at once, and the
  // third and fourth reuse the first two's buffers.
  EXPECT_EQ(stats.allocations, 4u);
  EXPECT_EQ(stats.reuses, 2u);
  EXPECT_LE(stats.peak_bytes, 2u * 1024 * 3 * 4 + 4096);
}

TEST(SessionTest, UnsupportedOpFailsAtCreationNamingNodeAndOp) {
  CpuBackend backend(1);
  auto session = Session::Create(testing::ParseModelText(R"(
<ir_version: 9, opset_import: ["" : 20]>
g (uint8[N] encoded) => (uint8[H, W, 3] y) {
  y = ImageDecoder(encoded)
}
)"),
                                 DefaultRegistry(), backend);
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(session.status().message(), HasSubstr("ImageDecoder node producing 'y'"));
}

// Swish-24 has no kernel; ONNX defines it as a function, so it runs as its body (inlined).
TEST(SessionTest, AnOpWithoutAKernelRunsAsItsSchemaFunction) {
  CpuBackend backend(1);
  auto session = Session::Create(testing::ParseModelText(R"(
<ir_version: 12, opset_import: ["" : 24]>
g (float[4] x) => (float[4] y) {
  y = Swish <alpha = 0.5> (x)
}
)"),
                                 DefaultRegistry(), backend);
  ASSERT_TRUE(session.ok()) << session.status();
  const std::vector<float> x = {-3.0f, -0.5f, 0.25f, 2.0f};
  const std::vector<Tensor> inputs = {Floats({4}, x)};
  auto outputs = (*session)->Run(inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  const std::vector<float> y = Values<float>((*outputs)[0]);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(y[i], x[i] / (1 + std::exp(-0.5 * x[i])), 2e-6) << x[i];
  }
}

// Gelu-20 in both forms (a kernel: one rounding, as a GPU's fused Gelu).
TEST(SessionTest, GeluRunsBothForms) {
  CpuBackend backend(1);
  for (const char* approximate : {"none", "tanh"}) {
    SCOPED_TRACE(approximate);
    auto session = Session::Create(testing::ParseModelText(absl::StrCat(R"(
<ir_version: 10, opset_import: ["" : 20]>
g (float[4] x) => (float[4] y) {
  y = Gelu <approximate = ")",
                                                                        approximate, R"("> (x)
}
)")),
                                   DefaultRegistry(), backend);
    ASSERT_TRUE(session.ok()) << session.status();
    const std::vector<float> x = {-3.0f, -0.5f, 0.25f, 2.0f};
    const std::vector<Tensor> inputs = {Floats({4}, x)};
    auto outputs = (*session)->Run(inputs);
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    const std::vector<float> y = Values<float>((*outputs)[0]);
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      const double expected =
          std::string(approximate) == "none"
              ? 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))
              : 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      EXPECT_NEAR(y[i], expected, 2e-6) << x[i];
    }
  }
}

// Two gaps of ONNX 1.23.2's inliner that ampc fills: Swish's body reads its alpha even when the
// node leaves it at the default (1.0), and RMSNormalization's body is built from input types,
// which the inliner does not look up among initializers (the scale).
TEST(SessionTest, SchemaFunctionsWithDefaultedAttributesAndInitializerInputsRun) {
  CpuBackend backend(1);
  auto session = Session::Create(testing::ParseModelText(R"(
<ir_version: 10, opset_import: ["" : 24]>
g (float[2, 2] x) => (float[2, 2] y, float[2, 2] z)
<float[2] s = {1.0, 2.0}>
{
  y = Swish(x)
  z = RMSNormalization <epsilon = 0.0> (x, s)
}
)"),
                                 DefaultRegistry(), backend);
  ASSERT_TRUE(session.ok()) << session.status();
  const std::vector<float> x = {1, -2, 3, 4};
  const std::vector<Tensor> inputs = {Floats({2, 2}, x)};
  auto outputs = (*session)->Run(inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  const std::vector<float> y = Values<float>((*outputs)[0]), z = Values<float>((*outputs)[1]);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(y[i], x[i] / (1 + std::exp(-double{x[i]})), 1e-6) << i;
    const size_t row = i / 2;
    const double rms = std::sqrt((x[2 * row] * x[2 * row] + x[2 * row + 1] * x[2 * row + 1]) / 2.0);
    EXPECT_NEAR(z[i], x[i] / rms * (i % 2 == 0 ? 1.0 : 2.0), 1e-6) << i;
  }
}

// A call of a model-local function runs as the function's body.
TEST(SessionTest, AModelLocalFunctionRunsAsItsBody) {
  CpuBackend backend(1);
  auto session = Session::Create(testing::ParseModelText(R"(
<ir_version: 10, opset_import: ["" : 18, "local" : 1]>
g (float[3] x) => (float[3] y) {
  y = local.AddTwice(x)
}
<domain: "local", opset_import: ["" : 18]>
AddTwice (a) => (b) {
  c = Add(a, a)
  b = Add(c, a)
}
)"),
                                 DefaultRegistry(), backend);
  ASSERT_TRUE(session.ok()) << session.status();
  const std::vector<Tensor> inputs = {Floats({3}, {1, -2, 0.5f})};
  auto outputs = (*session)->Run(inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_EQ(Values<float>((*outputs)[0]), (std::vector<float>{3, -6, 1.5f}));
}

// ONNX's inliner refuses a function whose default-domain opset differs from the model's: one
// line naming the function and why, at creation.
TEST(SessionTest, AFunctionThatCannotBeInlinedIsOneLineNamingIt) {
  CpuBackend backend(1);
  auto session = Session::Create(testing::ParseModelText(R"(
<ir_version: 10, opset_import: ["" : 18, "local" : 1]>
g (float[3] x) => (float[3] y) {
  y = local.Twice(x)
}
<domain: "local", opset_import: ["" : 13]>
Twice (a) => (b) {
  b = Add(a, a)
}
)"),
                                 DefaultRegistry(), backend);
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().message(),
            "cannot run local.Twice (no kernel on the cpu backend) as its function body: Model has "
            "functions with incompatible opset versions.");
}

// Scan-8 (batched, with sequence_lens) is another op than Scan-9: its kernels start at 9.
TEST(SessionTest, AnOpVersionWithoutAKernelIsRefusedNamingTheVersion) {
  CpuBackend backend(1);
  auto session = Session::Create(testing::ParseModelText(R"(
<ir_version: 3, opset_import: ["" : 8]>
g (float[1, 2] s, float[1, 3, 2] x) => (float[1, 2] t, float[1, 3, 2] ys) {
  t, ys = Scan <num_scan_inputs = 1, body = b (float[2] si, float[2] xi) => (float[2] so, float[2] yo) {
    so = Add(si, xi)
    yo = Identity(so)
  }> (, s, x)
}
)"),
                                 DefaultRegistry(), backend);
  ASSERT_FALSE(session.ok());
  EXPECT_THAT(
      session.status().message(),
      HasSubstr("no cpu kernel for Scan-8 (opset 8); its kernels implement versions 9 to "));
}

TEST(SessionTest, UnsupportedElementTypeFailsAtCreationNamingTypes) {
  CpuBackend backend(1);
  auto session = Session::Create(testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (bool[2] c, string[2] a, string[2] b) => (string[2] y) {
  y = Where(c, a, b)
}
)"),
                                 DefaultRegistry(), backend);
  ASSERT_FALSE(session.ok());
  EXPECT_THAT(session.status().message(),
              HasSubstr("no cpu kernel for input types (bool, string, string) -> (string)"));
}

TEST(SessionTest, WrongInputTypeOrShapeIsAnErrorNamingTheInput) {
  CpuBackend backend(1);
  auto session = Session::Create(testing::ParseModelText(kChain), DefaultRegistry(), backend);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<Tensor> wrong_shape = {Tensor::Host(DType::kFloat, {2, 4}),
                                     Tensor::Host(DType::kFloat, {3})};
  auto result = (*session)->Run(wrong_shape);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(), "input 'x': expected shape [?,3], got [2,4]");
  std::vector<Tensor> wrong_type = {Tensor::Host(DType::kFloat16, {2, 3}),
                                    Tensor::Host(DType::kFloat, {3})};
  result = (*session)->Run(wrong_type);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(), "input 'x': expected float32, got float16");
  std::vector<Tensor> missing = {Tensor(), Tensor::Host(DType::kFloat, {3})};
  result = (*session)->Run(missing);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(), "input 'x' is missing");
}

// An input declared without a shape takes any rank; one declared with rank 0 is a scalar.
TEST(SessionTest, InputOfUnknownRankTakesAnyShape) {
  onnx::ModelProto model = testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[] x, float[] s) => (float y) {
  y = Mul(x, s)
}
)");
  model.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  model.mutable_graph()->mutable_input(1)->mutable_type()->mutable_tensor_type()->mutable_shape();
  CpuBackend backend(1);
  auto session = Session::Create(model, DefaultRegistry(), backend);
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_FALSE((*session)->inputs()[0].rank_known);
  std::vector<Tensor> inputs = {Floats({2, 3}, {1, 2, 3, 4, 5, 6}), Floats({}, {2})};
  auto outputs = (*session)->Run(inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_EQ(Values<float>((*outputs)[0]), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  inputs[1] = Floats({1}, {2});
  auto scalar = (*session)->Run(inputs);
  ASSERT_FALSE(scalar.ok());
  EXPECT_EQ(scalar.status().message(), "input 's': expected shape [], got [1]");
}

TEST(SessionTest, Fp16ArithmeticRoundsOnceToNearestEven) {
  CpuBackend backend(1);
  auto session = Session::Create(testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float16[1] a, float16[1] b) => (float16[1] y) {
  y = Add(a, b)
}
)"),
                                 DefaultRegistry(), backend);
  ASSERT_TRUE(session.ok()) << session.status();
  // 2048 + 1 is halfway between the FP16 neighbours 2048 and 2050: ties to even gives 2048;
  // 2050 + 1 gives 2052.
  for (auto [a, want] : {std::pair{2048.0f, 2048.0f}, std::pair{2050.0f, 2052.0f}}) {
    Tensor x = Tensor::Host(DType::kFloat16, {1});
    Tensor one = Tensor::Host(DType::kFloat16, {1});
    x.data<Half>()[0] = Half{FloatToHalf(a)};
    one.data<Half>()[0] = Half{FloatToHalf(1.0f)};
    std::vector<Tensor> inputs = {x, one};
    auto out = (*session)->Run(inputs);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(HalfToFloat((*out)[0].data<Half>()[0].bits), want);
  }
}

}  // namespace
}  // namespace ampc

namespace ampc {
namespace {

using testing::Floats;
using ::testing::HasSubstr;

absl::StatusOr<std::vector<Tensor>> CreateAndRun(const std::string& text,
                                                 std::vector<Tensor> inputs) {
  static CpuBackend* backend = new CpuBackend(2);
  auto session = Session::Create(testing::ParseModelText(text), DefaultRegistry(), *backend);
  if (!session.ok()) return session.status();
  return (*session)->Run(inputs);
}

TEST(SessionSafetyTest, DeclaredOutputTypeContradictingTheNodeFailsAtCreation) {
  // Relu of float declared float16: a kernel sizing its output by the declaration would
  // overflow it; strict type inference refuses the model instead.
  auto result = CreateAndRun(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1024] x) => (float16[1024] y) {
  y = Relu(x)
}
)",
                             {Tensor::Host(DType::kFloat, {1024})});
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(),
              HasSubstr("value 'y' is declared float16 but its node computes float32"));
}

TEST(SessionSafetyTest, MissingRequiredInputFailsAtCreation) {
  auto result = CreateAndRun(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) {
  y = Add(x)
}
)",
                             {Tensor::Host(DType::kFloat, {2})});
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(
      result.status().message(),
      HasSubstr("Add node producing 'y' has 1 inputs and 1 outputs; its schema allows 2-2"));
}

TEST(SessionSafetyTest, GiganticShapeIsAnErrorNotACrash) {
  // 2^61 int64 elements: 2^64 bytes, which wraps to 0 without a checked product.
  Tensor shape = testing::Int64s({1}, {int64_t{1} << 61});
  auto result = CreateAndRun(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (int64[1] s) => (int64[?] y) {
  y = ConstantOfShape <value = int64[1] {7}> (s)
}
)",
                             {shape});
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("needs more than 2^48 bytes"));
}

TEST(SessionSafetyTest, IntegerDivisionOfTheMinimumByMinusOneDoesNotTrap) {
  auto result = CreateAndRun(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (int32[1] a, int32[1] b) => (int32[1] y) {
  y = Div(a, b)
}
)",
                             {testing::Make<int32_t>(DType::kInt32, {1}, {INT32_MIN}),
                              testing::Make<int32_t>(DType::kInt32, {1}, {-1})});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ((*result)[0].data<int32_t>()[0], INT32_MIN);  // wraps, as numpy does
}

// Found by the UBSan build: signed overflow is undefined behaviour in C++; the kernels wrap.
TEST(SessionSafetyTest, IntegerAddSubMulOverflowWraps) {
  for (const auto& [op, a, b, want] :
       std::vector<std::tuple<std::string, int32_t, int32_t, int32_t>>{
           {"Add", INT32_MAX, 1, INT32_MIN},
           {"Sub", INT32_MIN, 1, INT32_MAX},
           {"Mul", INT32_MIN, -1, INT32_MIN},
           {"Mul", 65536, 65536, 0}}) {
    auto result = CreateAndRun(absl::StrCat(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (int32[1] a, int32[1] b) => (int32[1] y) {
  y = )",
                                            op, R"((a, b)
}
)"),
                               {testing::Make<int32_t>(DType::kInt32, {1}, {a}),
                                testing::Make<int32_t>(DType::kInt32, {1}, {b})});
    ASSERT_TRUE(result.ok()) << op << ": " << result.status();
    EXPECT_EQ((*result)[0].data<int32_t>()[0], want) << op << "(" << a << ", " << b << ")";
  }
}

TEST(SessionSafetyTest, ActivationsPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Not ThresholdedRelu: ONNX defines it as x where x > alpha, else 0, so NaN gives 0
  // (math_kernels_test; onnxruntime agrees).
  for (const char* op : {"Relu", "Celu", "HardSigmoid", "LeakyRelu"}) {
    auto result = CreateAndRun(absl::StrCat(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) {
  y = )",
                                            op, R"((x)
}
)"),
                               {Floats({2}, {nan, -1.0f})});
    ASSERT_TRUE(result.ok()) << op << ": " << result.status();
    EXPECT_TRUE(std::isnan((*result)[0].data<float>()[0])) << op;
  }
}

}  // namespace
}  // namespace ampc

namespace ampc {
namespace {

TEST(SessionSafetyTest, MaxPoolsPropagateNaN) {
  static CpuBackend* backend = new CpuBackend(1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto session = Session::Create(testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 1, 4] x) => (float[1, 1, 2] y, float[1, 1, 1] z) {
  y = MaxPool <kernel_shape = [2], strides = [2]> (x)
  z = GlobalMaxPool(x)
}
)"),
                                 DefaultRegistry(), *backend);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<Tensor> inputs = {testing::Floats({1, 1, 4}, {1.0f, nan, 3.0f, 2.0f})};
  auto out = (*session)->Run(inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(std::isnan((*out)[0].data<float>()[0]));
  EXPECT_EQ((*out)[0].data<float>()[1], 3.0f);
  EXPECT_TRUE(std::isnan((*out)[1].data<float>()[0]));
}

TEST(SessionSafetyTest, MaxPool2x2PropagatesNaNFromAnyCornerOfTheWindow) {
  static CpuBackend* backend = new CpuBackend(1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto session = Session::Create(testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 1, 2, 10] x) => (float[1, 1, 1, 5] y) {
  y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (x)
}
)"),
                                 DefaultRegistry(), *backend);
  ASSERT_TRUE(session.ok()) << session.status();
  // Windows: NaN top-left, top-right, bottom-left, bottom-right, none (max 7).
  std::vector<Tensor> inputs = {testing::Floats(
      {1, 1, 2, 10}, {nan, 9, 1, nan, 1, 2, 3, 4, -1, 7, 5, 5, 2, 2, nan, 0, 8, nan, -3, -2})};
  auto out = (*session)->Run(inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  const float* y = (*out)[0].data<float>();
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(std::isnan(y[i])) << i;
  EXPECT_EQ(y[4], 7.0f);
}

}  // namespace
}  // namespace ampc
