// The training-step pass end to end: the bundled MLP compiled with --train is checker-valid (its
// training step too, as a standalone model); one compiled SGD step equals a reference step
// written here with plain loops; the compiled MLP learns a fixed batch on the CPU runtime.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "models/cnn.h"
#include "models/mlp.h"
#include "models/transformer.h"
#include "passes/ampc_ops.h"
#include "passes/registry.h"
#include "runtime/cpu_backend.h"
#include "runtime/training_session.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

using testing::Floats;
using testing::Int64s;
using testing::Values;

// Runs `passes` with --train options `training` (FP16 autocast where the passes include it).
absl::Status Compile(onnx::ModelProto& model, const std::vector<std::string>& passes,
                     TrainingOptions training) {
  ModelContext context(model, "model");
  training.enabled = true;
  context.training = std::move(training);
  for (const std::string& name : passes) {
    absl::StatusOr<std::unique_ptr<Pass>> pass = CreatePass(name);
    if (!pass.ok()) return pass.status();
    absl::StatusOr<bool> changed = (*pass)->Run(context);
    if (!changed.ok()) return changed.status();
  }
  return absl::OkStatus();
}

const std::vector<std::string> kFullPipeline = {"verify-input", "infer-types",  "training-step",
                                                "autocast",     "insert-casts", "fold-casts",
                                                "verify"};

// The training step as a model of its own: `graph`'s initializers, the state as inputs.
onnx::ModelProto StepModel(const onnx::ModelProto& model) {
  onnx::ModelProto step;
  step.set_ir_version(model.ir_version());
  *step.mutable_opset_import() = model.opset_import();
  *step.mutable_functions() = model.functions();
  *step.mutable_graph() = model.training_info(0).algorithm();
  for (const onnx::TensorProto& initializer : model.graph().initializer()) {
    *step.mutable_graph()->add_initializer() = initializer;
  }
  for (const onnx::ValueInfoProto& state : model.training_info(0).initialization().output()) {
    *step.mutable_graph()->add_input() = state;
  }
  return step;
}

TEST(TrainingStep, BundledMlpCompiledForTrainingPassesTheChecker) {
  onnx::ModelProto model = models::BuildMlp({});
  TrainingOptions options;
  options.loss = "loss";
  ASSERT_TRUE(Compile(model, kFullPipeline, options).ok());
  RegisterAmpcSchemas();
  EXPECT_NO_THROW(onnx::checker::check_model(model));
  onnx::ModelProto step = StepModel(model);
  EXPECT_NO_THROW(onnx::checker::check_model(step));
  const onnx::ShapeInferenceOptions strict(/*check_type_val=*/true, /*strict_mode_val=*/1);
  EXPECT_NO_THROW(
      onnx::shape_inference::InferShapes(step, onnx::OpSchemaRegistry::Instance(), strict));
  // Master weights: every parameter stays an FP32 initializer of the inference graph.
  int fp32 = 0;
  for (const onnx::TensorProto& t : model.graph().initializer()) {
    fp32 += t.data_type() == onnx::TensorProto::FLOAT;
  }
  EXPECT_EQ(fp32, 6);
}

TEST(TrainingStep, NodesNeedingDifferentFunctionBodiesAreAnErrorNamingBoth) {
  // One Conv pads explicitly, the other by SAME_UPPER: ConvGrad's body differs between them and
  // IR 8 allows one model-local function per op.
  onnx::ModelProto model = testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 1, 6, 6] x, int64[2] label) => (float loss)
<float[2, 1, 3, 3] w1 = {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9},
 float[1, 2, 3, 3] w2 = {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9}>
{
  a = Conv <pads = [1, 1, 1, 1]> (x, w1)
  b = Conv <auto_pad = "SAME_UPPER", strides = [2, 2]> (a, w2)
  flat = Flatten (b)
  loss = SoftmaxCrossEntropyLoss (flat, label)
}
)");
  for (int i = 0; i < model.graph().node_size(); ++i) {
    model.mutable_graph()->mutable_node(i)->set_name("n" + std::to_string(i));
  }
  TrainingOptions options;
  options.loss = "loss";
  const absl::Status status = Compile(model, {"infer-types", "training-step"}, options);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("ai.ampc.ConvGrad"));
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("needs another function body"));
}

constexpr char kLinearClassifier[] = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[4, 3] x, int64[4] label) => (float loss)
<float[2, 3] w = {0.5, -0.25, 0.125, -0.5, 0.75, 0.25}, float[2] b = {0.1, -0.2}>
{
  logits = Gemm <transB = 1> (x, w, b)
  loss = SoftmaxCrossEntropyLoss <reduction = "mean"> (logits, label)
}
)";

TEST(TrainingStep, OneSgdStepEqualsAReferenceStep) {
  onnx::ModelProto model = testing::ParseModelText(kLinearClassifier);
  TrainingOptions options;
  options.loss = "loss";
  options.optimizer = TrainingOptions::Optimizer::kSgd;
  options.loss_scale = TrainingOptions::LossScale::kDynamic;  // scaled, then unscaled
  ASSERT_TRUE(Compile(model, {"infer-types", "training-step"}, options).ok());
  CpuBackend backend(1);
  auto session = TrainingSession::Create(model, DefaultRegistry(), backend);
  ASSERT_TRUE(session.ok()) << session.status();

  const std::vector<float> x = {1, 2, -1, 0.5, -1.5, 2, -2, 1, 0, 0.25, 0.5, -0.75};
  const std::vector<int64_t> label = {0, 1, 1, 0};
  std::vector<double> w = {0.5, -0.25, 0.125, -0.5, 0.75, 0.25}, b = {0.1, -0.2};
  const double lr = 0.5;
  // Reference: logits = x w^T + b; loss = mean(-log softmax[label]);
  // dlogits = (softmax - onehot) / N; dw = dlogits^T x; db = sum over the batch.
  double loss = 0;
  std::vector<double> dw(6, 0.0), db(2, 0.0);
  for (int n = 0; n < 4; ++n) {
    double logits[2];
    for (int k = 0; k < 2; ++k) {
      logits[k] = b[k];
      for (int j = 0; j < 3; ++j) logits[k] += x[n * 3 + j] * w[k * 3 + j];
    }
    const double top = std::max(logits[0], logits[1]);
    const double sum = std::exp(logits[0] - top) + std::exp(logits[1] - top);
    for (int k = 0; k < 2; ++k) {
      const double p = std::exp(logits[k] - top) / sum;
      if (k == label[n]) loss -= std::log(p) / 4;
      const double g = (p - (k == label[n] ? 1.0 : 0.0)) / 4;
      db[k] += g;
      for (int j = 0; j < 3; ++j) dw[k * 3 + j] += g * x[n * 3 + j];
    }
  }
  NamedTensors inputs = {{"x", Floats({4, 3}, x)}, {"label", Int64s({4}, label)}};
  absl::StatusOr<StepResult> result = (*session)->Step(inputs, static_cast<float>(lr));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NEAR(result->loss, loss, 1e-6);
  EXPECT_TRUE(result->applied);
  EXPECT_EQ(result->step, 1);
  EXPECT_EQ(result->scale, 65536.0f);
  double norm = 0;
  for (double g : dw) norm += g * g;
  for (double g : db) norm += g * g;
  EXPECT_NEAR(result->grad_norm, std::sqrt(norm), 1e-6);
  absl::StatusOr<Tensor> new_w = (*session)->State("w");
  absl::StatusOr<Tensor> new_b = (*session)->State("b");
  ASSERT_TRUE(new_w.ok() && new_b.ok());
  const std::vector<float> got_w = Values<float>(*new_w), got_b = Values<float>(*new_b);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(got_w[i], w[i] - lr * dw[i], 1e-6) << "w[" << i << "]";
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(got_b[i], b[i] - lr * db[i], 1e-6) << "b[" << i << "]";
}

TEST(TrainingStep, CompiledMlpLearnsAFixedBatch) {
  models::MlpOptions mlp;
  mlp.layers = {16, 32, 4};
  onnx::ModelProto model = models::BuildMlp(mlp);
  TrainingOptions options;
  options.loss = "loss";
  options.optimizer = TrainingOptions::Optimizer::kAdamW;
  ASSERT_TRUE(Compile(model, kFullPipeline, options).ok());
  CpuBackend backend(1);
  auto session = TrainingSession::Create(model, DefaultRegistry(), backend);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<float> image(8 * 16);
  std::vector<int64_t> label(8);
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<float>((i * 37) % 11) / 5 - 1;
  for (size_t n = 0; n < label.size(); ++n) label[n] = static_cast<int64_t>(n % 4);
  NamedTensors inputs = {{"image", Floats({8, 16}, image)}, {"label", Int64s({8}, label)}};
  float first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    absl::StatusOr<StepResult> result = (*session)->Step(inputs, 0.01f);
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_TRUE(result->applied) << "step " << step;
    if (step == 0) first = result->loss;
    last = result->loss;
  }
  EXPECT_LT(last, 0.25f * first) << "first loss " << first << ", last " << last;
}

TEST(TrainingStep, CompiledTransformerLearnsAFixedBatch) {
  // Embedding (Gather), LayerNormalization, attention (MatMul, Reshape, Transpose, Softmax),
  // GELU from Erf, ReduceMean pooling: every rule of the bundled transformer.
  models::TransformerOptions small;
  small.vocab = 12;
  small.seq = 4;
  small.hidden = 8;
  small.heads = 2;
  small.layers = 1;
  small.classes = 3;
  absl::StatusOr<onnx::ModelProto> model = models::BuildTransformer(small);
  ASSERT_TRUE(model.ok());
  TrainingOptions options;
  options.loss = "loss";
  options.freeze = "const\\..*";  // GELU's and the attention scale's constants
  ASSERT_TRUE(Compile(*model, kFullPipeline, options).ok());
  CpuBackend backend(1);
  auto session = TrainingSession::Create(*model, DefaultRegistry(), backend);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<int64_t> tokens(6 * 4), label(6);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>((i * 5) % 12);
  for (size_t n = 0; n < label.size(); ++n) label[n] = static_cast<int64_t>(n % 3);
  NamedTensors inputs = {{"tokens", Int64s({6, 4}, tokens)}, {"label", Int64s({6}, label)}};
  float first = 0, last = 0;
  for (int step = 0; step < 80; ++step) {
    absl::StatusOr<StepResult> result = (*session)->Step(inputs, 0.01f);
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_TRUE(result->applied) << "step " << step;
    if (step == 0) first = result->loss;
    last = result->loss;
  }
  EXPECT_LT(last, 0.25f * first) << "first loss " << first << ", last " << last;
}

TEST(TrainingStep, CompiledCnnLearnsAFixedBatchAndUpdatesRunningStatistics) {
  // Conv, BatchNormalization in training mode (batch statistics, running ones bound as state),
  // Relu, MaxPool, Flatten, Gemm.
  absl::StatusOr<onnx::ModelProto> model = models::BuildCnn({});
  ASSERT_TRUE(model.ok());
  TrainingOptions options;
  options.loss = "loss";
  ASSERT_TRUE(Compile(*model, kFullPipeline, options).ok());
  CpuBackend backend(1);
  auto session = TrainingSession::Create(*model, DefaultRegistry(), backend);
  ASSERT_TRUE(session.ok()) << session.status();
  const ValueSpec& image_spec = (*session)->data_inputs()[0];
  Shape shape = image_spec.dims;
  shape[0] = 4;
  int64_t size = 1;
  for (int64_t d : shape) size *= d;
  std::vector<float> image(size);
  for (int64_t i = 0; i < size; ++i) image[i] = static_cast<float>((i * 37) % 11) / 5 - 1;
  NamedTensors inputs = {{image_spec.name, Floats(shape, image)},
                         {"label", Int64s({4}, {0, 1, 2, 3})}};
  float first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    absl::StatusOr<StepResult> result = (*session)->Step(inputs, 0.001f);
    ASSERT_TRUE(result.ok()) << result.status();
    if (step == 0) first = result->loss;
    last = result->loss;
  }
  EXPECT_LT(last, 0.5f * first) << "first loss " << first << ", last " << last;
  absl::StatusOr<Tensor> running = (*session)->State("block1.bn.running_mean");
  ASSERT_TRUE(running.ok()) << running.status();
  bool moved = false;
  for (float v : Values<float>(*running)) moved = moved || v != 0.0f;
  EXPECT_TRUE(moved) << "the running mean never left its initial zeros";
}

}  // namespace
}  // namespace ampc
