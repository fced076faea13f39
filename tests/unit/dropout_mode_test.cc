// --dropout (passes/training/dropout_mode.h) and the Dropout masks (kernels/cpu/philox.h,
// dropout_kernels.cc): Philox4x32-10 against Random123's known answers; ai.ampc.Dropout drops
// about `ratio`, scales the kept by 1/(1 - ratio) and draws a pure function of (seed, call); the
// step's backward uses the forward's mask; --dropout=off trains exactly as a model without Dropout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/philox.h"
#include "passes/opset/training_ops.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/training_session.h"
#include "tests/support/cuda_parity.h"
#include "tests/support/kernel_runs.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"
#include "tests/support/train_compile.h"

namespace ampc {
namespace {

using testing::Floats;
using ::testing::HasSubstr;
using testing::Values;

// Random123 1.14, examples/kat_vectors, "philox4x32 10": counter, key, expected.
TEST(Philox, MatchesRandom123KnownAnswers) {
  struct Case {
    Philox4x32 counter;
    uint32_t k0, k1;
    Philox4x32 expected;
  };
  const Case cases[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       0xffffffff,
       0xffffffff,
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       0xa4093822,
       0x299f31d0,
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const Case& c : cases) {
    const Philox4x32 out = Philox4x32_10(c.counter, c.k0, c.k1);
    for (int j = 0; j < 4; ++j) EXPECT_EQ(out.v[j], c.expected.v[j]) << j;
  }
}

constexpr char kAmpcDropout[] = R"(
<ir_version: 8, opset_import: ["" : 17, "ai.ampc" : 1]>
g (float[4099] x, float r, bool t, int64 call) => (float[4099] y, bool[4099] mask) {
  y, mask = ai.ampc.Dropout <seed = 77> (x, r, t, call)
}
)";

Tensor Bool(bool v) {
  Tensor t = Tensor::Host(DType::kBool, {});
  t.data<bool>()[0] = v;
  return t;
}

absl::StatusOr<std::vector<Tensor>> RunAmpcDropout(float ratio, int64_t call) {
  RegisterAmpcSchemas();
  const std::vector<float> x(4099, 3.0f);
  return testing::RunModel(kAmpcDropout, {Floats({4099}, x), Floats({}, {ratio}), Bool(true),
                                          testing::Int64s({}, {call})});
}

TEST(AmpcDropout, DropsAboutTheRatioScalesTheKeptAndIsAFunctionOfSeedAndCall) {
  for (const float ratio : {0.1f, 0.25f, 0.5f}) {
    auto out = RunAmpcDropout(ratio, 3);
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<float> y = Values<float>((*out)[0]);
    const bool* mask = (*out)[1].data<bool>();
    int dropped = 0;
    const float kept_value = 3.0f * (1.0f / (1.0f - ratio));
    for (size_t i = 0; i < y.size(); ++i) {
      // The definition (philox.h), element by element, with the odd tail of 4099.
      ASSERT_EQ(mask[i], DropoutKeeps(77, 3, i, ratio)) << i;
      EXPECT_EQ(y[i], mask[i] ? kept_value : 0.0f) << i;
      EXPECT_NEAR(y[i], mask[i] ? 3.0 / (1.0 - ratio) : 0.0, 1e-6);
      dropped += !mask[i];
    }
    // Binomial(4099, ratio): sd <= 32; 6 sd either way.
    EXPECT_NEAR(dropped, 4099 * ratio, 200) << ratio;
  }
  // Same (seed, call) in a fresh session: the same mask; another call: another mask.
  auto a = RunAmpcDropout(0.25f, 3), b = RunAmpcDropout(0.25f, 3), c = RunAmpcDropout(0.25f, 4);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(Values<float>((*a)[0]), Values<float>((*b)[0]));
  EXPECT_NE(Values<float>((*a)[0]), Values<float>((*c)[0]));
}

TEST(AmpcDropout, ANegativeCallIsAnErrorAndInferenceIgnoresIt) {
  auto bad = RunAmpcDropout(0.25f, -1);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("call"));
  auto zero = RunAmpcDropout(0.0f, -1);  // ratio 0: the identity, the call is not read
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(Values<float>((*zero)[0]), std::vector<float>(4099, 3.0f));
}

// The CUDA kernel (kernels/cuda/dropout.cu) draws the CPU kernel's masks and values, bit for bit,
// in FP32, FP16 and BF16 (ratio in FP32); without a GPU only the registration is checked.
TEST(AmpcDropout, CudaMatchesTheCpuBitForBit) {
  RegisterAmpcSchemas();
  for (const char* type : {"float", "float16", "bfloat16"}) {
    testing::ParityCase parity;
    parity.model = absl::StrCat(R"(<ir_version: 8, opset_import: ["" : 17, "ai.ampc" : 1]>
g ()",
                                type, R"([4099] x, int64 call) => ()", type,
                                R"([4099] y, bool[4099] mask) {
  r = Constant <value = float {0.3}> ()
  t = Constant <value = bool {1}> ()
  y, mask = ai.ampc.Dropout <seed = -12345> (x, r, t, call)
})");
    parity.ranges["call"] = {1000, 1001};
    parity.tolerance = 0;
    testing::ExpectRunsOnCpuWithCudaKernels(parity);
    if (testing::CudaUsable()) testing::ExpectCudaMatchesCpu(parity);
  }
  AMPC_SKIP_WITHOUT_GPU();
}

// loss = sum(Dropout(x * w) * c), x = 1..n, c = 2 (Constant nodes, not trained): d loss / d w_i =
// x_i c m_i / (1 - r), so one SGD step moves exactly the w_i whose element the forward kept.
constexpr int kN = 64;
std::string ProductModel(bool with_dropout) {
  std::string w;
  for (int i = 0; i < kN; ++i) absl::StrAppend(&w, i ? ", " : "", 0.5);
  return absl::StrCat(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[)",
                      kN, R"(] x) => (float loss)
<float[)",
                      kN, "] w = {", w, R"(}, bool on = {1}>
{
  c = Constant <value = float {2}> ()
  ratio = Constant <value = float {0.25}> ()
  h = Mul (x, w)
)",
                      with_dropout ? "  d = Dropout (h, ratio, on)\n" : "  d = Identity (h)\n",
                      R"(  e = Mul (d, c)
  loss = ReduceSum <keepdims = 0> (e)
})");
}

std::vector<float> Ramp() {
  std::vector<float> x(kN);
  for (int i = 0; i < kN; ++i) x[i] = static_cast<float>(i + 1);
  return x;
}

absl::StatusOr<std::unique_ptr<TrainingSession>> Open(onnx::ModelProto& model,
                                                      TrainingOptions::Dropout mode,
                                                      CpuBackend& backend, int64_t accumulate = 1) {
  TrainingOptions options;
  options.accumulate = accumulate;
  options.loss = "loss";
  options.optimizer = TrainingOptions::Optimizer::kSgd;
  options.loss_scale = TrainingOptions::LossScale::kNone;
  options.dropout = mode;
  absl::StatusOr<std::vector<std::string>> warnings = testing::CompileForTraining(
      model,
      {"verify-input", "infer-types", "dropout-mode", "training-step", "dropout-step", "verify"},
      options);
  if (!warnings.ok()) return warnings.status();
  return TrainingSession::Create(model, DefaultRegistry(), backend);
}

int64_t StepDropoutSeed(const onnx::ModelProto& model) {
  for (const onnx::NodeProto& node : model.training_info(0).algorithm().node()) {
    if (node.op_type() == "Dropout" && node.domain() == kAmpcDomain) {
      for (const onnx::AttributeProto& a : node.attribute()) {
        if (a.name() == "seed") return a.i();
      }
    }
  }
  ADD_FAILURE() << "no ai.ampc.Dropout in the step";
  return 0;
}

TEST(DropoutMode, TheStepsBackwardUsesTheMaskItsForwardDrewAtEachCall) {
  onnx::ModelProto model = testing::ParseModelText(ProductModel(true));
  CpuBackend backend(1);
  auto session = Open(model, TrainingOptions::Dropout::kGraph, backend);
  ASSERT_TRUE(session.ok()) << session.status();
  // The inference graph keeps Dropout off.
  for (const onnx::NodeProto& node : model.graph().node()) {
    if (node.op_type() == "Dropout") {
      EXPECT_LE(node.input_size(), 2) << node.DebugString();
    }
  }
  const uint64_t seed = static_cast<uint64_t>(StepDropoutSeed(model));
  const std::vector<float> x = Ramp();
  std::vector<float> w(kN, 0.5f);
  const float lr = 0.01f, scale = 1.0f / (1.0f - 0.25f);
  for (int64_t call = 0; call < 3; ++call) {
    absl::StatusOr<StepResult> result = (*session)->Step({{"x", Floats({kN}, x)}}, lr);
    ASSERT_TRUE(result.ok()) << result.status();
    double loss = 0;
    int dropped = 0;
    std::vector<float> expected = w;
    for (int i = 0; i < kN; ++i) {
      if (!DropoutKeeps(seed, static_cast<uint64_t>(call), i, 0.25f)) {
        ++dropped;
        continue;
      }
      loss += static_cast<double>(x[i]) * w[i] * scale * 2;
      expected[i] = w[i] - lr * (x[i] * 2 * scale);
    }
    EXPECT_GT(dropped, 0) << call;
    EXPECT_NEAR(result->loss, loss, 1e-4 * std::abs(loss))
        << "call " << call;  // the forward's mask
    absl::StatusOr<Tensor> next = (*session)->State("w");
    ASSERT_TRUE(next.ok()) << next.status();
    const std::vector<float> got = Values<float>(*next);
    for (int i = 0; i < kN; ++i) {
      EXPECT_NEAR(got[i], expected[i], 1e-6) << "call " << call << ", w[" << i << "]";
    }
    w = got;
  }
}

// --accumulate 2: every micro-batch is a call of its own, (step + skipped) * 2 + micro_step.
TEST(DropoutMode, EachMicroBatchOfAnAccumulationWindowDrawsItsOwnMask) {
  onnx::ModelProto model = testing::ParseModelText(ProductModel(true));
  CpuBackend backend(1);
  auto session = Open(model, TrainingOptions::Dropout::kGraph, backend, /*accumulate=*/2);
  ASSERT_TRUE(session.ok()) << session.status();
  const uint64_t seed = static_cast<uint64_t>(StepDropoutSeed(model));
  const std::vector<float> x = Ramp();
  for (uint64_t call = 0; call < 4; ++call) {
    const std::vector<float> w = Values<float>(*(*session)->State("w"));
    absl::StatusOr<StepResult> result = (*session)->Step({{"x", Floats({kN}, x)}}, 0.01f);
    ASSERT_TRUE(result.ok()) << result.status();
    double loss = 0;
    for (int i = 0; i < kN; ++i) {
      if (DropoutKeeps(seed, call, i, 0.25f)) loss += static_cast<double>(x[i]) * w[i] * 2 / 0.75;
    }
    EXPECT_NEAR(result->loss, loss, 1e-4 * std::abs(loss)) << "call " << call;
  }
}

TEST(DropoutMode, OffTrainsBitIdenticallyToTheModelWithoutDropout) {
  onnx::ModelProto with = testing::ParseModelText(ProductModel(true));
  onnx::ModelProto without = testing::ParseModelText(ProductModel(false));
  CpuBackend backend(1);
  auto a = Open(with, TrainingOptions::Dropout::kOff, backend);
  auto b = Open(without, TrainingOptions::Dropout::kOff, backend);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  for (int step = 0; step < 3; ++step) {
    auto ra = (*a)->Step({{"x", Floats({kN}, Ramp())}}, 0.01f);
    auto rb = (*b)->Step({{"x", Floats({kN}, Ramp())}}, 0.01f);
    ASSERT_TRUE(ra.ok() && rb.ok());
    EXPECT_EQ(ra->loss, rb->loss) << step;
  }
  EXPECT_EQ(Values<float>(*(*a)->State("w")), Values<float>(*(*b)->State("w")));
  // The step has no ai.ampc.Dropout: nothing drops.
  for (const onnx::NodeProto& node : with.training_info(0).algorithm().node()) {
    EXPECT_NE(node.domain() + node.op_type(), std::string(kAmpcDomain) + "Dropout");
  }
}

TEST(DropoutMode, AskingForDropoutOfAModelWithoutDropoutNodesSaysHowToExport) {
  onnx::ModelProto model = testing::ParseModelText(ProductModel(false));
  TrainingOptions options;
  options.loss = "loss";
  options.dropout = TrainingOptions::Dropout::kGraph;
  auto r = testing::CompileForTraining(model, {"infer-types", "dropout-mode"}, options);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("--dropout=graph: the model has no Dropout node"));
  EXPECT_THAT(r.status().message(), HasSubstr("training=torch.onnx.TrainingMode.TRAINING"));
}

// The dynamo exporter in training mode lowers an in-place Dropout (MobileNetV3's) to
// RandomUniformLike, Less, Cast, Div and Mul.
constexpr char kLoweredDropout[] = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4] x) => (float loss) <float[4] w = {1, 2, 3, 4}, float p = {0.8}> {
  h = Mul (x, w)
  rands = RandomUniformLike (h)
  sampled = Less (rands, p)
  kept = Cast <to = 1> (sampled)
  scale = Div (kept, p)
  d = Mul (h, scale)
  loss = ReduceSum <keepdims = 0> (d)
})";

// kLoweredDropout compiled for --train with `passes` in both modes: check(mode, result, model).
template <typename Check>
void CompileLoweredDropout(const std::vector<std::string>& passes, Check check) {
  TrainingOptions options;
  options.loss = "loss";
  for (const auto mode : {TrainingOptions::Dropout::kOff, TrainingOptions::Dropout::kGraph}) {
    SCOPED_TRACE(mode == TrainingOptions::Dropout::kOff ? "off" : "graph");
    options.dropout = mode;
    onnx::ModelProto model = testing::ParseModelText(kLoweredDropout);
    check(mode, testing::CompileForTraining(model, passes, options), model);
  }
}

// A random op still in the graph when dropout-mode runs (here lift-dropout does not run first):
// refused at compile time, naming the node and the fix.
TEST(DropoutMode, ARandomOpIsRefusedNamingTheExportThatTrains) {
  CompileLoweredDropout({"infer-types", "dropout-mode"}, [](auto, const auto& r, const auto&) {
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.status().message(), HasSubstr("(RandomUniformLike): --train has no random ops"));
    EXPECT_THAT(r.status().message(), HasSubstr("--dropout=off"));
  });
}

// lift-dropout first: the chain is a Dropout again (its ratio pinned by the golden test
// lift-dropout/lowered_inplace_dropout_becomes_dropout), so both modes compile: off leaves no
// Dropout, graph keeps it in training mode.
TEST(DropoutMode, TheLoweredDropoutLiftedTrainsInBothModes) {
  CompileLoweredDropout({"infer-types", "lift-dropout", "dropout-mode"},
                        [](auto mode, const auto& r, const onnx::ModelProto& model) {
                          ASSERT_TRUE(r.ok()) << r.status();
                          int dropouts = 0, random = 0;
                          for (const onnx::NodeProto& node : model.graph().node()) {
                            dropouts += node.op_type() == "Dropout";
                            random += node.op_type() == "RandomUniformLike";
                          }
                          EXPECT_EQ(random, 0);
                          EXPECT_EQ(dropouts, mode == TrainingOptions::Dropout::kGraph ? 1 : 0);
                        });
}

// The dynamo exporter gives ratio and training_mode as initializers: the graph's Identity no
// longer reads the ratio, but the step does, so it stays; training_mode, read by neither, goes.
TEST(DropoutMode, AnInitializerRatioTheStepReadsStays) {
  onnx::ModelProto model = testing::ParseModelText(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4] x) => (float loss) <float[4] w = {1, 2, 3, 4}, float r = {0.5}, bool t = {1}> {
  h = Mul (x, w)
  d = Dropout (h, r, t)
  loss = ReduceSum <keepdims = 0> (d)
})");
  CpuBackend backend(1);
  auto session = Open(model, TrainingOptions::Dropout::kGraph, backend);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<std::string> initializers;
  for (const auto& t : model.graph().initializer()) initializers.push_back(t.name());
  EXPECT_THAT(initializers, ::testing::ElementsAre("w", "r"));
  EXPECT_TRUE((*session)->Step({{"x", Floats({4}, {1, 1, 1, 1})}}, 0.01f).ok());
}

TEST(DropoutMode, ARatioReplacesEveryNodesOwn) {
  onnx::ModelProto model = testing::ParseModelText(ProductModel(true));
  TrainingOptions options;
  options.loss = "loss";
  options.dropout = TrainingOptions::Dropout::kRatio;
  options.dropout_ratio = 0.75f;
  auto r = testing::CompileForTraining(
      model, {"infer-types", "dropout-mode", "training-step", "dropout-step", "verify"}, options);
  ASSERT_TRUE(r.ok()) << r.status();
  CpuBackend backend(1);
  auto session = TrainingSession::Create(model, DefaultRegistry(), backend);
  ASSERT_TRUE(session.ok()) << session.status();
  auto result = (*session)->Step({{"x", Floats({kN}, Ramp())}}, 0.0f);
  ASSERT_TRUE(result.ok()) << result.status();
  const uint64_t seed = static_cast<uint64_t>(StepDropoutSeed(model));
  double loss = 0;
  for (int i = 0; i < kN; ++i) {
    if (DropoutKeeps(seed, 0, i, 0.75f)) loss += (i + 1) * 0.5 * 4 * 2;  // scale 1 / 0.25
  }
  EXPECT_NEAR(result->loss, loss, 1e-4 * std::abs(loss));
}

}  // namespace
}  // namespace ampc
