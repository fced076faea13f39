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

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "compiler/pipeline.h"
#include "kernels/cpu/cpu_kernels.h"
#include "models/cnn.h"
#include "models/mlp.h"
#include "models/transformer.h"
#include "passes/autocast_policy.h"
#include "passes/opset/training_ops.h"
#include "passes/registry.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/training_session.h"
#include "tests/support/forward_models.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"
#include "tests/support/train_compile.h"

namespace ampc {
namespace {

using testing::Floats;
using testing::Int64s;
using testing::PseudoFloats;
using testing::Values;

// Runs `passes` with --train options `training` (autocast to `low_dtype` where the passes
// include it).
absl::Status Compile(onnx::ModelProto& model, const std::vector<std::string>& passes,
                     TrainingOptions training, int low_dtype = onnx::TensorProto::FLOAT16) {
  return testing::CompileForTraining(model, passes, std::move(training), low_dtype).status();
}

// The order --train gives (compiler/pipeline.cc, PipelineFor), without upgrade-opset: these
// models import opset 17 already.
const std::vector<std::string> kFullPipeline = {"verify-input", "infer-types", "autocast",
                                                "insert-casts", "fold-casts",  "training-step",
                                                "verify"};
const std::vector<std::string> kFp32Pipeline = {"verify-input", "infer-types", "training-step",
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

TEST(TrainingStep, SgdGroupsWithAndWithoutMomentumAreAnErrorNamingBoth) {
  using Optimizer = TrainingOptions::Optimizer;
  for (const auto& [group_optimizer, group_momentum] :
       {std::pair{Optimizer::kSgd, 0.9f}, {Optimizer::kMomentum, 0.0f}}) {
    onnx::ModelProto model = testing::ParseModelText(kLinearClassifier);
    TrainingOptions options;
    options.loss = "loss";
    options.optimizer = Optimizer::kMomentum;
    options.groups.push_back({.params = "b",
                              .where = "c.json: groups[0]",
                              .optimizer = group_optimizer,
                              .momentum = group_momentum});
    const absl::Status status = Compile(model, kFp32Pipeline, options);
    EXPECT_THAT(std::string(status.message()),
                ::testing::HasSubstr("the command line: SGD with momentum, and c.json: groups[0]: "
                                     "SGD without"));
  }
  // Momentum SGD in one group and Adam in the other compile.
  onnx::ModelProto model = testing::ParseModelText(kLinearClassifier);
  TrainingOptions options;
  options.loss = "loss";
  options.optimizer = TrainingOptions::Optimizer::kMomentum;
  options.groups.push_back({.params = "b",
                            .where = "c.json: groups[0]",
                            .optimizer = TrainingOptions::Optimizer::kAdam});
  EXPECT_TRUE(Compile(model, kFp32Pipeline, options).ok());
}

TEST(TrainingStep, ALossOfShapeOneIsRefusedNamingItsShape) {
  onnx::ModelProto model = testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[4, 3] x, int64[4] label) => (float[1] loss)
<float[2, 3] w = {0.5, -0.25, 0.125, -0.5, 0.75, 0.25}, int64[1] axes = {0}>
{
  logits = Gemm <transB = 1> (x, w)
  mean = SoftmaxCrossEntropyLoss (logits, label)
  loss = Unsqueeze (mean, axes)
}
)");
  TrainingOptions options;
  options.loss = "loss";
  const absl::Status status = Compile(model, kFp32Pipeline, options);
  EXPECT_THAT(std::string(status.message()),
              ::testing::HasSubstr("--loss=loss: the loss must be a scalar (rank 0), not [1]"));
  onnx::ModelProto scalar = testing::ParseModelText(kLinearClassifier);
  EXPECT_TRUE(Compile(scalar, kFp32Pipeline, options).ok());  // its loss is rank 0
}

TEST(TrainingStep, NormalizationOfAGraphInputGivesACheckerValidStep) {
  // x is not trained: LayerNormalizationGrad and BatchNormalizationGrad leave dx out.
  onnx::ModelProto model = testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[4, 3] x, float[4, 3, 2] z, int64[4] label) => (float loss)
<float[3] s = {1, 2, 3}, float[3] b = {0.5, 0, -0.5}, float[3] mean = {0, 0, 0},
 float[3] var = {1, 1, 1}, float[2, 3] w = {0.5, -0.25, 0.125, -0.5, 0.75, 0.25}>
{
  n = LayerNormalization (x, s, b)
  m = BatchNormalization (z, s, b, mean, var)
  r = ReduceMean <axes = [2], keepdims = 0> (m)
  both = Add (n, r)
  logits = Gemm <transB = 1> (both, w)
  loss = SoftmaxCrossEntropyLoss (logits, label)
}
)");
  TrainingOptions options;
  options.loss = "loss";
  options.optimizer = TrainingOptions::Optimizer::kSgd;
  ASSERT_TRUE(Compile(model, kFp32Pipeline, options).ok());
  RegisterAmpcSchemas();
  onnx::ModelProto step = StepModel(model);
  const onnx::ShapeInferenceOptions strict(/*check_type_val=*/true, /*strict_mode_val=*/1);
  EXPECT_NO_THROW(onnx::checker::check_model(step));
  EXPECT_NO_THROW(
      onnx::shape_inference::InferShapes(step, onnx::OpSchemaRegistry::Instance(), strict));
}

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

// The bundled CNN (Conv, BatchNormalization in training mode with its running statistics bound
// as state, Relu, MaxPool, Flatten, Gemm) compiled in `low` learns a fixed batch.
void ExpectCnnLearnsAFixedBatch(const onnx::ModelProto& model) {
  CpuBackend backend(1);
  auto session = TrainingSession::Create(model, DefaultRegistry(), backend);
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

TEST(TrainingStep, CompiledCnnLearnsAFixedBatchAndUpdatesRunningStatistics) {
  absl::StatusOr<onnx::ModelProto> model = models::BuildCnn({});
  ASSERT_TRUE(model.ok());
  TrainingOptions options;
  options.loss = "loss";
  ASSERT_TRUE(Compile(*model, kFullPipeline, options).ok());
  ExpectCnnLearnsAFixedBatch(*model);
}

// The element type ONNX's shape inference gives `name` in the training step (0 when unknown).
int StepType(const onnx::ModelProto& model, const std::string& name) {
  RegisterAmpcSchemas();
  onnx::ModelProto step = StepModel(model);
  onnx::shape_inference::InferShapes(step, onnx::OpSchemaRegistry::Instance());
  for (const onnx::ValueInfoProto& value : step.graph().value_info()) {
    if (value.name() == name) return value.type().tensor_type().elem_type();
  }
  return 0;
}

TEST(TrainingStep, LowPrecisionStepRunsForwardAndBackwardInTheForwardsDtype) {
  for (int low : {onnx::TensorProto::FLOAT16, onnx::TensorProto::BFLOAT16}) {
    onnx::ModelProto model = models::BuildMlp({});
    TrainingOptions options;
    options.loss = "loss";
    ASSERT_TRUE(Compile(model, kFullPipeline, options, low).ok());
    int low_matmuls = 0, low_matmul_grads = 0;
    for (const onnx::NodeProto& node : model.training_info(0).algorithm().node()) {
      if (node.op_type() != "MatMul" && node.op_type() != "Gemm") continue;
      const bool backward = node.name().find("/grad/") != std::string::npos ||
                            node.output(0).find("/grad/") != std::string::npos;
      if (StepType(model, node.output(0)) == low) ++(backward ? low_matmul_grads : low_matmuls);
    }
    EXPECT_EQ(low_matmuls, 3) << "dtype " << low;
    EXPECT_GE(low_matmul_grads, 5) << "dtype " << low;  // dx and dw of 3 layers, less the input's
    // The master weights stay FP32 and the step still reads them by name.
    for (const onnx::TensorProto& t : model.graph().initializer()) {
      EXPECT_EQ(t.data_type(), onnx::TensorProto::FLOAT) << t.name();
    }
  }
}

// BF16: Conv-11 and MaxPool-12 have no bfloat16, so the forward runs their ai.ampc versions
// (passes/opset/standard_op_versions.h) in BF16, and ConvGrad and MaxPoolGrad follow in BF16. The
// model carries a function per version, and MaxPool states its indices in the model as in the step
// (one arity).
TEST(TrainingStep, Bf16CnnRunsConvAndMaxPoolAsAmpcVersionsAndLearns) {
  absl::StatusOr<onnx::ModelProto> model = models::BuildCnn({});
  ASSERT_TRUE(model.ok());
  TrainingOptions options;
  options.loss = "loss";
  ASSERT_TRUE(Compile(*model, kFullPipeline, options, onnx::TensorProto::BFLOAT16).ok());
  int versions = 0, grads = 0;
  for (const onnx::NodeProto& node : model->training_info(0).algorithm().node()) {
    const std::string& op = node.op_type();
    if (op == "Conv" || op == "MaxPool") {
      EXPECT_EQ(node.domain(), kAmpcDomain) << node.name();
      EXPECT_EQ(StepType(*model, node.output(0)), onnx::TensorProto::BFLOAT16) << node.name();
      if (op == "MaxPool") {
        EXPECT_EQ(node.output_size(), 2) << node.name();
      }
      ++versions;
    }
    if (op == "ConvGrad" || op == "MaxPoolGrad") {
      for (const std::string& output : node.output()) {
        if (!output.empty()) {
          EXPECT_EQ(StepType(*model, output), onnx::TensorProto::BFLOAT16) << output;
        }
      }
      ++grads;
    }
  }
  EXPECT_EQ(versions, 4);  // two blocks of Conv and MaxPool
  EXPECT_EQ(grads, 4);
  for (const onnx::NodeProto& node : model->graph().node()) {
    if (node.op_type() == "MaxPool") {
      EXPECT_EQ(node.output_size(), 2) << node.name();
    }
  }
  std::vector<std::string> functions;
  for (const onnx::FunctionProto& f : model->functions()) {
    if (f.name() == "Conv" || f.name() == "MaxPool") functions.push_back(f.name());
  }
  EXPECT_THAT(functions, ::testing::UnorderedElementsAre("Conv", "MaxPool"));
  onnx::checker::check_model(*model);
  ExpectCnnLearnsAFixedBatch(*model);
}

// ampc's own BF16 output, compiled for training (its BF16 weights frozen) for BF16, FP16 or FP32
// (no autocast passes): its ai.ampc.MaxPool (one output there) gets its indices and the
// model-local function is rebuilt with two outputs, so the model and the step call one function
// of the nodes' arity; the ConvGrad body computes in FP32 (Conv and ConvTranspose have no bf16).
TEST(TrainingStep, OwnBf16OutputTrainsWhateverTheDtype) {
  for (int low : std::vector<int>{onnx::TensorProto::BFLOAT16, onnx::TensorProto::FLOAT16, 0}) {
    SCOPED_TRACE(low);
    absl::StatusOr<onnx::ModelProto> model = models::BuildCnn({});
    ASSERT_TRUE(model.ok());
    AutocastOptions bf16;
    bf16.low_dtype = onnx::TensorProto::BFLOAT16;
    bf16.policy = AutocastPolicy::Defaults(bf16.low_dtype);
    ASSERT_TRUE(CompileWithDefaults(*model, "cnn", bf16).ok());
    const auto function = [&](const std::string& name) -> const onnx::FunctionProto* {
      for (const onnx::FunctionProto& f : model->functions()) {
        if (f.name() == name) return &f;
      }
      return nullptr;
    };
    ASSERT_NE(function("MaxPool"), nullptr);
    ASSERT_EQ(function("MaxPool")->output_size(), 1);
    TrainingOptions options;
    options.loss = "loss";
    options.freeze = ".*_bf16";  // the converted weights; the FP32 batch-norm parameters train
    const absl::Status trained = low == 0 ? Compile(*model, kFp32Pipeline, options)
                                          : Compile(*model, kFullPipeline, options, low);
    ASSERT_TRUE(trained.ok()) << trained;
    EXPECT_EQ(function("MaxPool")->output_size(), 2);
    int pools = 0;
    for (const auto* graph : {&model->graph(), &model->training_info(0).algorithm()}) {
      for (const onnx::NodeProto& node : graph->node()) {
        if (node.domain() != kAmpcDomain || node.op_type() != "MaxPool") continue;
        EXPECT_EQ(node.output_size(), 2) << node.name();
        ++pools;
      }
    }
    EXPECT_EQ(pools, 4);  // two in the model, two in the step
    ASSERT_NE(function("ConvGrad"), nullptr);
    bool widened = false;
    for (const onnx::NodeProto& node : function("ConvGrad")->node()) {
      widened = widened || node.op_type() == "CastLike";
    }
    EXPECT_TRUE(widened) << "the ConvGrad body does not compute in FP32";
    onnx::checker::check_model(*model);
  }
}

// A static scale of 1e9 makes the logits' gradient about 1e8: finite in FP32, +inf in FP16. The
// FP16 step must see the overflow (and skip), the FP32 step must not.
TEST(TrainingStep, Fp16BackwardOverflowsWhereTheFp32BackwardDoesNot) {
  for (bool fp16 : {false, true}) {
    onnx::ModelProto model = testing::ParseModelText(kLinearClassifier);
    TrainingOptions options;
    options.loss = "loss";
    options.optimizer = TrainingOptions::Optimizer::kSgd;
    options.loss_scale = TrainingOptions::LossScale::kStatic;
    options.init_scale = 1e9f;
    ASSERT_TRUE(Compile(model, fp16 ? kFullPipeline : kFp32Pipeline, options).ok());
    CpuBackend backend(1);
    auto session = TrainingSession::Create(model, DefaultRegistry(), backend);
    ASSERT_TRUE(session.ok()) << session.status();
    const std::vector<float> x = {1, 2, -1, 0.5, -1.5, 2, -2, 1, 0, 0.25, 0.5, -0.75};
    NamedTensors inputs = {{"x", Floats({4, 3}, x)}, {"label", Int64s({4}, {0, 1, 1, 0})}};
    absl::StatusOr<StepResult> result = (*session)->Step(inputs, 0.5f);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->applied, !fp16) << (fp16 ? "fp16" : "fp32");
    EXPECT_EQ(result->skipped_steps, fp16 ? 1 : 0);
    EXPECT_TRUE(std::isfinite(result->loss));
  }
}

constexpr char kLinearClassifierAnyBatch[] = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 3] x, int64[N] label) => (float loss)
<float[2, 3] w = {0.5, -0.25, 0.125, -0.5, 0.75, 0.25}, float[2] b = {0.1, -0.2}>
{
  logits = Gemm <transB = 1> (x, w, b)
  loss = SoftmaxCrossEntropyLoss <reduction = "mean"> (logits, label)
}
)";

const std::vector<float> kX = {1, 2, -1, 0.5, -1.5, 2, -2, 1, 0, 0.25, 0.5, -0.75};
const std::vector<int64_t> kLabel = {0, 1, 1, 0};

// Micro-batch `i` of two: rows 2i and 2i + 1 of kX, times `factor`.
NamedTensors Half(int i, float factor = 1) {
  std::vector<float> x(kX.begin() + 6 * i, kX.begin() + 6 * i + 6);
  for (float& v : x) v *= factor;
  return {{"x", Floats({2, 3}, x)}, {"label", Int64s({2}, {kLabel[2 * i], kLabel[2 * i + 1]})}};
}

std::unique_ptr<TrainingSession> LinearClassifierSession(const std::vector<std::string>& passes,
                                                         TrainingOptions options,
                                                         CpuBackend& backend) {
  onnx::ModelProto model = testing::ParseModelText(kLinearClassifierAnyBatch);
  options.loss = "loss";
  absl::Status compiled = Compile(model, passes, options);
  EXPECT_TRUE(compiled.ok()) << compiled;
  auto session = TrainingSession::Create(model, DefaultRegistry(), backend);
  EXPECT_TRUE(session.ok()) << session.status();
  return session.ok() ? *std::move(session) : nullptr;
}

TEST(TrainingStep, TwoAccumulatedHalfBatchesEqualOneStepOnTheWholeBatch) {
  TrainingOptions options;
  options.optimizer = TrainingOptions::Optimizer::kMomentum;
  CpuBackend backend(1);
  auto whole = LinearClassifierSession(kFp32Pipeline, options, backend);
  options.accumulate = 2;
  auto halves = LinearClassifierSession(kFp32Pipeline, options, backend);
  ASSERT_TRUE(whole && halves);
  for (int step = 0; step < 3; ++step) {
    auto a = whole->Step({{"x", Floats({4, 3}, kX)}, {"label", Int64s({4}, kLabel)}}, 0.5f);
    auto first = halves->Step(Half(0), 0.5f);
    ASSERT_TRUE(a.ok() && first.ok());
    EXPECT_FALSE(first->applied);  // inside the window: no update, and not a skipped step
    EXPECT_EQ(first->step, step);
    EXPECT_EQ(first->skipped_steps, 0);
    EXPECT_EQ(first->micro_step, 1);
    auto second = halves->Step(Half(1), 0.5f);
    ASSERT_TRUE(second.ok());
    EXPECT_TRUE(second->applied);
    EXPECT_EQ(second->step, step + 1);
    EXPECT_EQ(second->micro_step, 0);
    EXPECT_NEAR(second->grad_norm, a->grad_norm, 1e-6);
    for (const char* p : {"w", "b", "w.ampc.momentum"}) {
      std::vector<float> x = Values<float>(*whole->State(p)), y = Values<float>(*halves->State(p));
      for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-6) << p << "[" << i << "]";
    }
  }
}

// Inputs times 40 make the FP16 weight gradient of the first micro-batch overflow (|dlogits| up to
// 1/2, times the seed 65536 / 2, times x up to 80) while its loss stays finite: the window must
// skip as a whole, back the scale off once, and leave every parameter bit-identical.
TEST(TrainingStep, AnOverflowInTheFirstMicroBatchSkipsTheWindow) {
  TrainingOptions options;
  options.accumulate = 2;
  CpuBackend backend(1);
  for (bool overflow : {false, true}) {
    auto session = LinearClassifierSession(kFullPipeline, options, backend);
    ASSERT_TRUE(session);
    const std::vector<float> w0 = Values<float>(*session->State("w"));
    auto first = session->Step(Half(0, overflow ? 40.0f : 1.0f), 0.01f);
    auto second = session->Step(Half(1), 0.01f);
    ASSERT_TRUE(first.ok() && second.ok());
    EXPECT_TRUE(std::isfinite(first->loss));
    EXPECT_EQ(first->scale, 65536.0f);  // frozen inside the window
    EXPECT_EQ(second->applied, !overflow);
    EXPECT_EQ(second->skipped_steps, overflow ? 1 : 0);
    EXPECT_EQ(second->scale, overflow ? 32768.0f : 65536.0f);
    const std::vector<float> w1 = Values<float>(*session->State("w"));
    EXPECT_EQ(w0 == w1, overflow);
    EXPECT_EQ(Values<int64_t>(*session->State("ampc.micro_step"))[0], 0);
  }
}

// Clipping acts on the unscaled gradients: the FP16 step (scale 65536) and the FP32 step report
// the same norm, and both move the parameters by exactly lr * max_norm.
TEST(TrainingStep, ClippingSeesUnscaledGradients) {
  TrainingOptions options;
  options.optimizer = TrainingOptions::Optimizer::kSgd;
  options.clip_grad_norm = 0.05f;
  options.loss_scale = TrainingOptions::LossScale::kDynamic;
  options.init_scale = 1024.0f;  // scaled, with room: 65536 could overflow the FP16 dw
  CpuBackend backend(1);
  float norms[2];
  for (int fp16 = 0; fp16 < 2; ++fp16) {
    auto session = LinearClassifierSession(fp16 ? kFullPipeline : kFp32Pipeline, options, backend);
    ASSERT_TRUE(session);
    std::vector<float> before = Values<float>(*session->State("w"));
    for (float v : Values<float>(*session->State("b"))) before.push_back(v);
    auto r = session->Step({{"x", Floats({4, 3}, kX)}, {"label", Int64s({4}, kLabel)}}, 0.5f);
    ASSERT_TRUE(r.ok() && r->applied);
    norms[fp16] = r->grad_norm;
    std::vector<float> after = Values<float>(*session->State("w"));
    for (float v : Values<float>(*session->State("b"))) after.push_back(v);
    double moved = 0;
    for (size_t i = 0; i < after.size(); ++i) moved += std::pow(after[i] - before[i], 2.0);
    EXPECT_NEAR(std::sqrt(moved), 0.5 * 0.05, 1e-5) << (fp16 ? "fp16" : "fp32");
  }
  EXPECT_GT(norms[0], 0.05f);  // the clip is active
  EXPECT_NEAR(norms[1], norms[0], 5e-3 * norms[0]);
}

TEST(TrainingStep, FindNonFiniteNamesTheFirstOverflowAndTheParameters) {
  TrainingOptions options;
  options.loss_scale = TrainingOptions::LossScale::kStatic;
  options.init_scale = 1e9f;
  CpuBackend backend(1);
  auto session = LinearClassifierSession(kFullPipeline, options, backend);
  ASSERT_TRUE(session);
  NamedTensors batch = {{"x", Floats({4, 3}, kX)}, {"label", Int64s({4}, kLabel)}};
  absl::StatusOr<NonFiniteReport> report = session->FindNonFinite(batch, 0.5f);
  ASSERT_TRUE(report.ok()) << report.status();
  // The logits' FP32 gradient (about 1e8) is finite; its Cast to FP16 is the first inf.
  EXPECT_EQ(report->first_op, "Cast");
  EXPECT_THAT(report->first_value, ::testing::HasSubstr("/grad/"));
  EXPECT_THAT(report->parameters, ::testing::UnorderedElementsAre("w", "b"));
  EXPECT_EQ(Values<int64_t>(*session->State("ampc.step"))[0], 0);  // the state is untouched
  options.init_scale = 1.0f;
  auto fine = LinearClassifierSession(kFullPipeline, options, backend);
  report = fine->FindNonFinite(batch, 0.5f);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->first_value, "");
  EXPECT_TRUE(report->parameters.empty());
}

}  // namespace
}  // namespace ampc

namespace ampc {
namespace {

// Steps `session` `steps` times on `inputs`; the first and the last loss.
std::pair<float, float> TrainSteps(TrainingSession& session, const NamedTensors& inputs,
                                   int steps) {
  float first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    absl::StatusOr<StepResult> result = session.Step(inputs, 0.01f);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return {0, 0};
    EXPECT_TRUE(result->applied) << "step " << step;
    if (step == 0) first = result->loss;
    last = result->loss;
  }
  return {first, last};
}

// `model` compiled by `passes` with `options`, opened on `backend`.
absl::StatusOr<std::unique_ptr<TrainingSession>> CompileAndOpen(
    onnx::ModelProto& model, const std::vector<std::string>& passes, const TrainingOptions& options,
    CpuBackend& backend) {
  if (absl::Status s = Compile(model, passes, options); !s.ok()) return s;
  return TrainingSession::Create(model, DefaultRegistry(), backend);
}

// Labels 0, 1, ..., classes - 1, 0, 1, ... for `n` samples.
Tensor Labels(int64_t n, int64_t classes) {
  std::vector<int64_t> labels(n);
  for (int64_t i = 0; i < n; ++i) labels[i] = i % classes;
  return Int64s({n}, labels);
}

std::vector<float> Pattern(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 37) % 11) / 5 - 1;
  return v;
}

// Dropout in training mode (its mask feeds the backward) before LogSoftmax and a weighted
// NegativeLogLikelihoodLoss: --train compiles it and the loss falls.
TEST(TrainingStep, DropoutAndNegativeLogLikelihoodLossModelLearnsAFixedBatch) {
  onnx::ModelProto model = testing::ParseModelText(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[8, 16] image, int64[8] label) => (float loss)
<float[4, 16] w = {0.01, -0.02, 0.03, 0.0, 0.01, 0.02, -0.01, 0.0, 0.02, 0.01, 0.0, -0.03,
  0.01, 0.0, 0.02, -0.01, 0.0, 0.01, -0.02, 0.03, 0.0, 0.01, 0.02, -0.01, 0.0, 0.02, 0.01, 0.0,
  -0.03, 0.01, 0.0, 0.02, -0.01, 0.0, 0.01, -0.02, 0.03, 0.0, 0.01, 0.02, -0.01, 0.0, 0.02, 0.01,
  0.0, -0.03, 0.01, 0.0, 0.02, -0.01, 0.0, 0.01, -0.02, 0.03, 0.0, 0.01, 0.02, -0.01, 0.0, 0.02,
  0.01, 0.0, -0.03, 0.01}, float[4] b = {0, 0, 0, 0}, float ratio = {0.1},
  bool training = {1}, float[4] cw = {1, 2, 1, 0.5}>
{
  h = Gemm <transB = 1> (image, w, b)
  d, mask = Dropout <seed = 5> (h, ratio, training)
  p = LogSoftmax(d)
  loss = NegativeLogLikelihoodLoss <reduction = "mean"> (p, label, cw)
})");
  TrainingOptions options;
  options.loss = "loss";
  CpuBackend backend(1);
  auto session = CompileAndOpen(model, kFullPipeline, options, backend);
  ASSERT_TRUE(session.ok()) << session.status();
  const auto [first, last] = TrainSteps(
      **session, {{"image", Floats({8, 16}, Pattern(8 * 16))}, {"label", Labels(8, 4)}}, 60);
  EXPECT_LT(last, 0.5f * first) << "first loss " << first << ", last " << last;
}

const std::vector<std::string> kLossOpPipeline = {"verify-input", "infer-types", "loss-op",
                                                  "training-step", "verify"};

TEST(TrainingStep, LossOpCrossEntropyTrainsTheMlpsLogits) {
  models::MlpOptions mlp;
  mlp.layers = {16, 32, 4};
  onnx::ModelProto model = testing::MlpWithoutLoss(mlp);
  TrainingOptions options;
  options.loss_op = "cross_entropy:logits";
  CpuBackend backend(1);
  auto session = CompileAndOpen(model, kLossOpPipeline, options, backend);
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ(model.graph().output(model.graph().output_size() - 1).name(), "loss");
  const auto [first, last] = TrainSteps(
      **session, {{"image", Floats({8, 16}, Pattern(8 * 16))}, {"labels", Labels(8, 4)}}, 60);
  EXPECT_LT(last, 0.25f * first) << "first loss " << first << ", last " << last;
}

// PyTorch's cross entropy over [N, T, C] logits computed here in double: log-softmax per position,
// (1 - e) (-log p[label]) + e mean_c(-log p_c), averaged over the positions whose label is not
// `ignored`; with `shift`, position t against label t + 1 (transformers' causal-LM loss).
double CrossEntropyReference(const std::vector<double>& logits, const std::vector<int64_t>& labels,
                             int64_t n, int64_t t, int64_t c, bool shift, int64_t ignored,
                             double e) {
  double total = 0;
  int64_t counted = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j + (shift ? 1 : 0) < t; ++j) {
      const int64_t label = labels[i * t + j + (shift ? 1 : 0)];
      if (label == ignored) continue;
      const double* z = &logits[(i * t + j) * c];
      double top = z[0], sum = 0, mean_log_p = 0;
      for (int64_t k = 0; k < c; ++k) top = std::max(top, z[k]);
      for (int64_t k = 0; k < c; ++k) sum += std::exp(z[k] - top);
      for (int64_t k = 0; k < c; ++k) mean_log_p += (z[k] - top - std::log(sum)) / c;
      total += (1 - e) * -(z[label] - top - std::log(sum)) + e * -mean_log_p;
      ++counted;
    }
  }
  return total / counted;
}

struct TokenLossCase {
  std::string loss_op;
  bool shift;
  int64_t ignored;  // -100 also when the spec ignores nothing: no label is -100 then
  double smoothing;
};

class TokenLoss : public ::testing::TestWithParam<TokenLossCase> {};

// Token logits [N, T, C] = x W: the first step's loss (before any update) against the reference,
// and the loss falling over steps.
TEST_P(TokenLoss, FirstLossMatchesPyTorchsFormulaAndTrainingLowersIt) {
  const TokenLossCase& c = GetParam();
  constexpr int64_t kN = 2, kT = 4, kD = 3, kC = 5;
  const std::vector<float> w = PseudoFloats(kD * kC, 7, -1, 1);
  onnx::ModelProto model = testing::ParseModelText(absl::StrCat(
      "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[N, T, 3] x) => (float[N, T, 5] "
      "logits)\n<float[3, 5] w = {",
      absl::StrJoin(w, ", "), "}>\n{\n  logits = MatMul(x, w)\n}"));
  TrainingOptions options;
  options.loss_op = c.loss_op;
  options.optimizer = TrainingOptions::Optimizer::kSgd;
  CpuBackend backend(1);
  auto session = CompileAndOpen(model, kLossOpPipeline, options, backend);
  ASSERT_TRUE(session.ok()) << session.status();
  const std::vector<float> x = PseudoFloats(kN * kT * kD, 3, -2, 2);
  std::vector<int64_t> labels = {1, 4, -100, 0, 2, 2, 3, -100};
  if (!absl::StrContains(c.loss_op, "ignore_index")) absl::c_replace(labels, -100, 3);
  std::vector<double> logits(kN * kT * kC, 0.0);
  for (int64_t r = 0; r < kN * kT; ++r) {
    for (int64_t k = 0; k < kC; ++k) {
      for (int64_t d = 0; d < kD; ++d) logits[r * kC + k] += double{x[r * kD + d]} * w[d * kC + k];
    }
  }
  const double expected =
      CrossEntropyReference(logits, labels, kN, kT, kC, c.shift, c.ignored, c.smoothing);
  const NamedTensors inputs = {{"x", Floats({kN, kT, kD}, x)},
                               {"labels", Int64s({kN, kT}, labels)}};
  absl::StatusOr<StepResult> step = (*session)->Step(inputs, 0.5f);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_NEAR(step->loss, expected, 1e-5 * std::abs(expected));
  const auto [first, last] = TrainSteps(**session, inputs, 100);
  EXPECT_LT(last, 0.9f * first) << "first loss " << first << ", last " << last;
}

INSTANTIATE_TEST_SUITE_P(
    LossOp, TokenLoss,
    ::testing::Values(TokenLossCase{"cross_entropy:logits,ignore_index=-100", false, -100, 0},
                      TokenLossCase{"cross_entropy:logits,ignore_index=-100,label_smoothing=0.1",
                                    false, -100, 0.1},
                      TokenLossCase{"causal_lm:logits,ignore_index=-100", true, -100, 0},
                      TokenLossCase{"causal_lm:logits", true, -100, 0},
                      TokenLossCase{"causal_lm:logits,ignore_index=-100,label_smoothing=0.2", true,
                                    -100, 0.2}),
    [](const auto& info) {
      return absl::StrCat(
          info.param.shift ? "causal_lm" : "cross_entropy",
          info.param.smoothing > 0 ? "_label_smoothing" : "",
          absl::StrContains(info.param.loss_op, "ignore_index") ? "" : "_all_labelled");
    });

TEST(TrainingStep, LossOpMseFitsALinearMap) {
  onnx::ModelProto model = testing::ParseModelText(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 3] x) => (float[N, 2] y)
<float[3, 2] w = {0, 0, 0, 0, 0, 0}>
{
  y = MatMul(x, w)
})");
  TrainingOptions options;
  options.loss_op = "mse:y";
  options.optimizer = TrainingOptions::Optimizer::kSgd;
  CpuBackend backend(1);
  auto session = CompileAndOpen(model, kLossOpPipeline, options, backend);
  ASSERT_TRUE(session.ok()) << session.status();
  // target = x [[1, -1], [2, 0], [0, 3]]: the first SGD step's loss is mean(target^2).
  const std::vector<float> x = {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1};
  const std::vector<float> target = {1, -1, 2, 0, 0, 3, 3, 2};
  double expected_first = 0;
  for (float t : target) expected_first += t * t / 8.0;
  absl::StatusOr<StepResult> step =
      (*session)->Step({{"x", Floats({4, 3}, x)}, {"target", Floats({4, 2}, target)}}, 0.1f);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_NEAR(step->loss, expected_first, 1e-6);
  float last = step->loss;
  for (int i = 0; i < 400; ++i) {
    step = (*session)->Step({{"x", Floats({4, 3}, x)}, {"target", Floats({4, 2}, target)}}, 0.1f);
    ASSERT_TRUE(step.ok()) << step.status();
    last = step->loss;
  }
  EXPECT_LT(last, 1e-3f) << "the map is exactly linear; SGD should fit it";
}

}  // namespace
}  // namespace ampc
