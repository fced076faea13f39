// TrainingSession on a hand-written training model: initialization, steps against a plain
// reference of the same SGD-with-momentum arithmetic, update_binding, evaluation with the current
// parameters, bit-identical resume from a checkpoint, and errors for malformed training_info.
#include "runtime/training_session.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "compiler/model_io.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/cpu_backend.h"
#include "tests/support/tensors.h"
#include "tests/support/training_models.h"

namespace ampc {
namespace {

using testing::Floats;
using ::testing::HasSubstr;
using testing::Values;

// Eight points of t = 3 x0 - 2 x1 + 0.5.
const std::vector<float> kX = {0, 1, 1, 0, 1, 1, -1, 2, 0.5f, -0.5f, 2, 1, -2, -1, 0.25f, 0.75f};

NamedTensors Batch() {
  std::vector<float> t;
  for (size_t i = 0; i < kX.size(); i += 2) t.push_back(3 * kX[i] - 2 * kX[i + 1] + 0.5f);
  return {{"x", Floats({8, 2}, kX)}, {"t", Floats({8, 1}, t)}};
}

// The same step in plain loops: loss = mean(d^2), g = 2 d / N, momentum 0.9.
struct Reference {
  float w[2] = {0.5f, -0.25f}, b = 0.1f, mw[2] = {0, 0}, mb = 0;
  float Step(float lr) {
    const NamedTensors batch = Batch();
    const std::vector<float> t = Values<float>(batch.at("t"));
    double loss = 0, gw[2] = {0, 0}, gb = 0;
    for (int n = 0; n < 8; ++n) {
      const float d = kX[2 * n] * w[0] + kX[2 * n + 1] * w[1] + b - t[n];
      loss += d * d;
      gw[0] += 2.0 * d / 8 * kX[2 * n];
      gw[1] += 2.0 * d / 8 * kX[2 * n + 1];
      gb += 2.0 * d / 8;
    }
    for (int i = 0; i < 2; ++i) {
      mw[i] = 0.9f * mw[i] + static_cast<float>(gw[i]);
      w[i] -= lr * mw[i];
    }
    mb = 0.9f * mb + static_cast<float>(gb);
    b -= lr * mb;
    return static_cast<float>(loss / 8);
  }
};

std::unique_ptr<TrainingSession> MakeSession(onnx::ModelProto model, CpuBackend& backend) {
  auto session = TrainingSession::Create(std::move(model), DefaultRegistry(), backend);
  EXPECT_TRUE(session.ok()) << session.status();
  return session.ok() ? *std::move(session) : nullptr;
}

TEST(TrainingSessionTest, InitializationCreatesTheState) {
  CpuBackend backend(1);
  auto session = MakeSession(testing::LinearRegressionTrainingModel(), backend);
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(session->loss_name(), "loss");
  ASSERT_EQ(session->data_inputs().size(), 2u);
  EXPECT_EQ(session->data_inputs()[0].name, "x");
  EXPECT_EQ(session->data_inputs()[1].name, "t");
  auto momentum = session->State("w.ampc.momentum");
  ASSERT_TRUE(momentum.ok()) << momentum.status();
  EXPECT_EQ(momentum->shape(), (Shape{2, 1}));
  EXPECT_THAT(Values<float>(*momentum), ::testing::ElementsAre(0.0f, 0.0f));
  auto counters = session->Counters();
  ASSERT_TRUE(counters.ok());
  EXPECT_EQ(counters->scale, 4.0f);
  EXPECT_EQ(counters->step, 0);
}

TEST(TrainingSessionTest, StepsMatchAPlainReferenceAndTheLossDecreases) {
  CpuBackend backend(1);
  auto session = MakeSession(testing::LinearRegressionTrainingModel(), backend);
  ASSERT_NE(session, nullptr);
  Reference reference;
  float first_loss = 0, last_loss = 0;
  for (int i = 0; i < 40; ++i) {
    const float expected_loss = reference.Step(0.05f);
    auto result = session->Step(Batch(), 0.05f);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_NEAR(result->loss, expected_loss, 1e-5f * (1 + expected_loss)) << "step " << i;
    EXPECT_TRUE(result->applied);
    EXPECT_EQ(result->step, i + 1);
    EXPECT_EQ(result->scale, 4.0f);
    if (i == 0) first_loss = result->loss;
    last_loss = result->loss;
  }
  EXPECT_LT(last_loss, first_loss / 10);
  auto w = session->State("w");
  auto b = session->State("b");
  auto mw = session->State("w.ampc.momentum");
  ASSERT_TRUE(w.ok() && b.ok() && mw.ok());
  EXPECT_NEAR(Values<float>(*w)[0], reference.w[0], 1e-4f);
  EXPECT_NEAR(Values<float>(*w)[1], reference.w[1], 1e-4f);
  EXPECT_NEAR(Values<float>(*b)[0], reference.b, 1e-4f);
  EXPECT_NEAR(Values<float>(*mw)[0], reference.mw[0], 1e-4f);
}

// Run queues a step without reading anything back; LastStep reads it: the same results and
// state as Step, step by step, against the plain reference.
TEST(TrainingSessionTest, RunThenLastStepIsStep) {
  CpuBackend backend(1);
  auto session = MakeSession(testing::LinearRegressionTrainingModel(), backend);
  ASSERT_NE(session, nullptr);
  auto before = session->LastStep();
  EXPECT_EQ(before.status().code(), absl::StatusCode::kFailedPrecondition);
  Reference reference;
  for (int i = 0; i < 5; ++i) {
    const float expected_loss = reference.Step(0.05f);
    ASSERT_TRUE(session->Run(Batch(), 0.05f).ok());
    auto result = session->LastStep();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_NEAR(result->loss, expected_loss, 1e-5f * (1 + expected_loss)) << "step " << i;
    EXPECT_TRUE(result->applied);
    EXPECT_EQ(result->step, i + 1);
    EXPECT_EQ(result->scale, 4.0f);
    auto again = session->LastStep();  // reading changes nothing
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->loss, result->loss);
    EXPECT_EQ(again->step, result->step);
  }
  auto w = session->State("w");
  ASSERT_TRUE(w.ok());
  EXPECT_NEAR(Values<float>(*w)[0], reference.w[0], 1e-4f);
  EXPECT_NEAR(Values<float>(*w)[1], reference.w[1], 1e-4f);
}

// A step writes the new state into the buffers the state held two steps before, so from the
// third step on it allocates none for it. The CPU cannot capture steps: they run as before, and
// the session says why.
TEST(TrainingSessionTest, StateAlternatesBetweenTwoBufferSetsAndTheCpuDoesNotCapture) {
  CpuBackend backend(1);
  const onnx::ModelProto model = testing::LinearRegressionTrainingModel();
  const int bindings = model.training_info(0).update_binding_size();
  ASSERT_GE(bindings, 4);  // w, b and their momentum at least
  auto session = MakeSession(model, backend);
  ASSERT_NE(session, nullptr);
  session->set_capture(true);
  Reference reference;
  std::vector<uint64_t> allocations;
  for (int i = 0; i < 5; ++i) {
    const uint64_t before = backend.memory_stats().allocations;
    const float expected_loss = reference.Step(0.05f);
    auto result = session->Step(Batch(), 0.05f);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_NEAR(result->loss, expected_loss, 1e-5f * (1 + expected_loss)) << "step " << i;
    allocations.push_back(backend.memory_stats().allocations - before);
  }
  EXPECT_GE(allocations[0] - allocations[2], 4u);
  EXPECT_EQ(allocations[2], allocations[3]);
  EXPECT_EQ(allocations[3], allocations[4]);
  auto w = session->State("w");
  ASSERT_TRUE(w.ok());
  EXPECT_NEAR(Values<float>(*w)[0], reference.w[0], 1e-4f);
  EXPECT_NEAR(Values<float>(*w)[1], reference.w[1], 1e-4f);
  EXPECT_EQ(session->replayed_steps(), 0);
  EXPECT_EQ(session->capture_off_reason(), "the cpu backend cannot capture work");
}

TEST(TrainingSessionTest, GradNormIsTheNormOfTheUnscaledGradients) {
  CpuBackend backend(1);
  auto session = MakeSession(testing::LinearRegressionTrainingModel(), backend);
  ASSERT_NE(session, nullptr);
  // Gradients at the initial parameters, by hand: g = 2 d / 8 per point.
  const NamedTensors batch = Batch();
  const std::vector<float> t = Values<float>(batch.at("t"));
  double gw0 = 0, gw1 = 0, gb = 0;
  for (int n = 0; n < 8; ++n) {
    const double d = kX[2 * n] * 0.5 + kX[2 * n + 1] * -0.25 + 0.1 - t[n];
    gw0 += d / 4 * kX[2 * n];
    gw1 += d / 4 * kX[2 * n + 1];
    gb += d / 4;
  }
  auto result = session->Step(batch, 0.01f);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NEAR(result->grad_norm, std::sqrt(gw0 * gw0 + gw1 * gw1 + gb * gb), 1e-4);
}

TEST(TrainingSessionTest, EvaluateUsesTheCurrentParameters) {
  CpuBackend backend(1);
  auto session = MakeSession(testing::LinearRegressionTrainingModel(), backend);
  ASSERT_NE(session, nullptr);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(session->Step(Batch(), 0.05f).ok());
  const std::vector<float> w = Values<float>(*session->State("w"));
  const float b = Values<float>(*session->State("b"))[0];
  auto outputs = session->Evaluate({{"x", Floats({2, 2}, {1, 2, -3, 0.5f})}, {"extra", Tensor()}});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), 1u);
  EXPECT_NEAR(Values<float>((*outputs)[0])[0], 1 * w[0] + 2 * w[1] + b, 1e-6f);
  EXPECT_NEAR(Values<float>((*outputs)[0])[1], -3 * w[0] + 0.5f * w[1] + b, 1e-6f);
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

TEST(TrainingSessionTest, ResumeFromACheckpointIsBitIdentical) {
  CpuBackend backend(1);
  auto straight = MakeSession(testing::LinearRegressionTrainingModel(), backend);
  auto first = MakeSession(testing::LinearRegressionTrainingModel(), backend);
  ASSERT_NE(straight, nullptr);
  ASSERT_NE(first, nullptr);
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(straight->Step(Batch(), 0.03f).ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(first->Step(Batch(), 0.03f).ok());
  auto checkpoint = first->Checkpoint();
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  char pattern[] = "/tmp/ampc-train-XXXXXX";
  const std::filesystem::path dir = mkdtemp(pattern);
  const std::string path = (dir / "resume.onnx").string();
  ASSERT_TRUE(SaveModel(*checkpoint, path).ok());
  auto loaded = LoadModel(path);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto resumed = MakeSession(std::move(loaded->model), backend);
  ASSERT_NE(resumed, nullptr);
  EXPECT_EQ(resumed->Counters()->step, 5);
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(resumed->Step(Batch(), 0.03f).ok());
  for (const char* name :
       {"w", "b", "w.ampc.momentum", "b.ampc.momentum", "ampc.scale", "ampc.step"}) {
    EXPECT_TRUE(SameBits(*straight->State(name), *resumed->State(name))) << name;
  }
}

TEST(TrainingSessionTest, CheckpointHoldsParametersAsInitializersAndStateAsConstants) {
  CpuBackend backend(1);
  auto session = MakeSession(testing::LinearRegressionTrainingModel(), backend);
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session->Step(Batch(), 0.05f).ok());
  auto model = session->Checkpoint();
  ASSERT_TRUE(model.ok());
  ASSERT_EQ(model->graph().initializer_size(), 2);
  EXPECT_EQ(model->graph().initializer(0).name(), "w");
  const onnx::GraphProto& init = model->training_info(0).initialization();
  ASSERT_EQ(init.node_size(), 4);
  for (const onnx::NodeProto& node : init.node()) EXPECT_EQ(node.op_type(), "Constant");
  EXPECT_EQ(model->training_info(0).update_binding_size(), 6);
}

TEST(TrainingSessionTest, ErrorsNameWhatIsMissing) {
  CpuBackend backend(1);
  auto create = [&](onnx::ModelProto model) {
    return TrainingSession::Create(std::move(model), DefaultRegistry(), backend).status();
  };
  onnx::ModelProto no_info = testing::LinearRegressionTrainingModel();
  no_info.clear_training_info();
  EXPECT_THAT(create(no_info).message(), HasSubstr("no training_info"));

  onnx::ModelProto no_algorithm = testing::LinearRegressionTrainingModel();
  no_algorithm.mutable_training_info(0)->clear_algorithm();
  EXPECT_THAT(create(no_algorithm).message(), HasSubstr("no algorithm"));

  onnx::ModelProto bad_target = testing::LinearRegressionTrainingModel();
  bad_target.mutable_training_info(0)->mutable_update_binding(0)->set_key("nope");
  EXPECT_THAT(create(bad_target).message(),
              HasSubstr("'nope' is not a graph initializer or initialization output"));

  onnx::ModelProto bad_value = testing::LinearRegressionTrainingModel();
  bad_value.mutable_training_info(0)->mutable_update_binding(0)->set_value("w.gone");
  EXPECT_THAT(create(bad_value).message(), HasSubstr("'w.gone' is not an output of the algorithm"));

  auto session = MakeSession(testing::LinearRegressionTrainingModel(), backend);
  ASSERT_NE(session, nullptr);
  auto missing = session->Step({{"x", Floats({8, 2}, kX)}}, 0.1f);
  EXPECT_THAT(missing.status().message(), HasSubstr("algorithm input 't' is missing"));
  EXPECT_EQ(session->Counters()->step, 0);  // nothing applied
}

}  // namespace
}  // namespace ampc
