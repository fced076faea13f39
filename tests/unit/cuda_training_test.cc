// The bundled models' training on the CUDA backend. Everywhere: every node of each compiled
// training model (inference graph, initialization, training step), for FP32, FP16 and BF16, has
// a CUDA kernel for its element types, so `ampc train --device cuda` does not fall back to the
// CPU. On a GPU: steps on the CUDA backend follow the CPU backend's (losses, loss scale, steps
// applied, parameters). GPU tests are skipped, and counted as skipped, where no GPU is present.
#include <gtest/gtest.h>
#include <onnx/shape_inference/implementation.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/model_io.h"
#include "kernels/cpu/cpu_kernels.h"
#include "models/cnn.h"
#include "models/mlp.h"
#include "models/transformer.h"
#include "passes/opset/training_ops.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/core/graph_executor.h"
#include "runtime/core/node_profiler.h"
#include "runtime/training_session.h"
#include "tests/support/cuda_parity.h"
#include "tests/support/subprocess.h"

#ifdef AMPC_HAVE_CUDA
#include "runtime/core/cuda_backend.h"
#endif

namespace ampc {
namespace {

namespace fs = std::filesystem;

// A backend that is only a name: kernel lookup by element type, nothing allocated or run.
class NamedBackend final : public Backend {
 public:
  explicit NamedBackend(std::string name) : name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  absl::StatusOr<std::shared_ptr<Buffer>> Allocate(size_t) override {
    return absl::UnimplementedError("a name only");
  }
  absl::Status CopyFromHost(const void*, Tensor&) override { return absl::UnimplementedError(""); }
  absl::Status CopyToHost(const Tensor&, void*) override { return absl::UnimplementedError(""); }
  absl::Status Synchronize() override { return absl::OkStatus(); }
  MemoryStats memory_stats() const override { return {}; }
  void ResetPeak() override {}

 protected:
  void Release(void*, size_t) override {}

 private:
  std::string name_;
};

// The ampc binary: $AMPC_BINARY where set (tools/device-check runs these tests from a bundle),
// else the one this build made.
std::string AmpcBinary() {
  const char* path = std::getenv("AMPC_BINARY");
  return path != nullptr ? path : AMPC_BINARY;
}

class CudaTrainingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ampc-cuda-train-XXXXXX";
    dir_ = mkdtemp(pattern);
    RegisterAmpcSchemas();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `model` compiled with `ampc --train` for `dtype` ("fp32", "fp16", "bf16").
  onnx::ModelProto Compiled(const onnx::ModelProto& model, const std::string& dtype,
                            const std::string& optimizer = "adam",
                            const std::string& lr = "0.001") {
    const std::string in = (dir_ / "m.onnx").string(), out = (dir_ / "m.train.onnx").string();
    std::ofstream(in, std::ios::binary) << model.SerializeAsString();
    auto r = testing::RunProcess({AmpcBinary(), in, "-o", out, "--train", "--loss", "loss",
                                  "--dtype", dtype, "--optimizer", optimizer, "--lr", lr},
                                 dir_.string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    absl::StatusOr<LoadedModel> loaded = LoadModel(out);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return loaded.ok() ? loaded->model : onnx::ModelProto();
  }

  fs::path dir_;
};

// Nodes of `graph` (run with `state` as extra inputs) without a CUDA kernel for their types.
std::vector<std::string> MissingInGraph(const onnx::ModelProto& model,
                                        const onnx::GraphProto& graph,
                                        const std::vector<onnx::ValueInfoProto>& state) {
  onnx::ModelProto scratch;
  scratch.set_ir_version(model.ir_version());
  *scratch.mutable_opset_import() = model.opset_import();
  *scratch.mutable_functions() = model.functions();
  *scratch.mutable_graph() = graph;
  for (const onnx::ValueInfoProto& value : state) *scratch.mutable_graph()->add_input() = value;
  onnx::ShapeInferenceOptions options{false, 0, false};
  onnx::shape_inference::InferShapes(scratch, onnx::OpSchemaRegistry::Instance(), options);
  TypeMap types;
  CollectTypes(scratch.graph(), types);
  std::map<std::string, int> opsets;
  for (const auto& opset : model.opset_import()) {
    opsets[opset.domain() == "ai.onnx" ? "" : opset.domain()] = static_cast<int>(opset.version());
  }
  NamedBackend cuda("cuda");
  std::vector<std::string> missing;
  for (const onnx::NodeProto& node : scratch.graph().node()) {
    if (node.op_type() == "Constant") continue;  // the executor takes its value
    std::vector<DType> in, out;
    for (const std::string& name : node.input()) {
      in.push_back(types.contains(name) ? types[name] : DType::kUndefined);
    }
    for (const std::string& name : node.output()) {
      out.push_back(types.contains(name) ? types[name] : DType::kUndefined);
    }
    KernelInfo info{node, opsets[node.domain()], in, out, cuda, {}, nullptr};
    if (!DefaultRegistry().Supports(info)) {
      missing.push_back(
          absl::StrCat(node.op_type(), "(",
                       absl::StrJoin(in, ",",
                                     [](std::string* s, DType t) {
                                       s->append(t == DType::kUndefined ? "-" : DTypeName(t));
                                     }),
                       ")"));
    }
  }
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  return missing;
}

std::vector<std::string> MissingCudaKernels(const onnx::ModelProto& trained) {
  const onnx::TrainingInfoProto& info = trained.training_info(0);
  std::vector<onnx::ValueInfoProto> parameters, state;
  for (const onnx::TensorProto& init : trained.graph().initializer()) {
    onnx::ValueInfoProto value;
    value.set_name(init.name());
    auto* tensor = value.mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(init.data_type());
    for (int64_t d : init.dims()) tensor->mutable_shape()->add_dim()->set_dim_value(d);
    parameters.push_back(value);
  }
  state = parameters;
  for (const auto& output : info.initialization().output()) state.push_back(output);
  std::vector<std::string> missing = MissingInGraph(trained, trained.graph(), {});
  for (const std::string& m : MissingInGraph(trained, info.initialization(), parameters)) {
    missing.push_back("initialization: " + m);
  }
  for (const std::string& m : MissingInGraph(trained, info.algorithm(), state)) {
    missing.push_back("step: " + m);
  }
  return missing;
}

std::vector<std::pair<std::string, onnx::ModelProto>> BundledModels() {
  std::vector<std::pair<std::string, onnx::ModelProto>> models;
  models.emplace_back("mlp", models::BuildMlp({}));
  absl::StatusOr<onnx::ModelProto> cnn = models::BuildCnn({});
  EXPECT_TRUE(cnn.ok()) << cnn.status();
  if (cnn.ok()) models.emplace_back("cnn", *cnn);
  absl::StatusOr<onnx::ModelProto> transformer = models::BuildTransformer({});
  EXPECT_TRUE(transformer.ok()) << transformer.status();
  if (transformer.ok()) models.emplace_back("transformer", *transformer);
  return models;
}

TEST_F(CudaTrainingTest, EveryNodeOfTheBundledTrainingModelsHasACudaKernel) {
  for (const auto& [name, model] : BundledModels()) {
    for (const std::string dtype : {"fp32", "fp16", "bf16"}) {
      const onnx::ModelProto trained = Compiled(model, dtype);
      ASSERT_GT(trained.training_info_size(), 0);
      EXPECT_EQ(absl::StrJoin(MissingCudaKernels(trained), "; "), "") << name << " " << dtype;
    }
  }
}

// The op types a step runs, in order.
class OpRecorder final : public NodeProfiler {
 public:
  void Begin(const KernelInfo& node) override { ops.push_back(node.node.op_type()); }
  void End(const KernelInfo&) override {}
  std::vector<std::string> ops;
};

// The runtime's rewrites of a compiled step (runtime/optimizer_fusion.h) apply to what ampc
// --train writes, whose scale is a value of the enclosing graph: one multi-tensor Adam, the
// check and unscale as one pass over the gradients, and the learning rate computed first from
// ampc.step (runtime/learning_rate.h), at the rate given. On the CPU, where they run the same
// kernels.
TEST_F(CudaTrainingTest, CompiledStepsRunTheRuntimesFusions) {
  CpuBackend cpu(1);
  auto session =
      TrainingSession::Create(Compiled(models::BuildMlp({}), "fp16"), DefaultRegistry(), cpu);
  ASSERT_TRUE(session.ok()) << session.status();
  OpRecorder recorder;
  (*session)->set_profiler(&recorder);
  NamedTensors batch;
  for (const ValueSpec& spec : (*session)->data_inputs()) {
    Shape shape = {4};
    for (size_t d = 1; d < spec.dims.size(); ++d) shape.push_back(spec.dims[d]);
    batch[spec.name] = Tensor::Host(spec.dtype, shape);
    std::memset(batch[spec.name].raw(), 0, batch[spec.name].bytes());
  }
  auto result = (*session)->Step(batch, 0.001f);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->lr, 0.001f);
  ASSERT_FALSE(recorder.ops.empty());
  EXPECT_EQ(recorder.ops.front(), "LearningRate");
  auto count = [&](const std::string& op) {
    return std::count(recorder.ops.begin(), recorder.ops.end(), op);
  };
  EXPECT_EQ(count("CheckUnscaleClip"), 1);
  EXPECT_EQ(count("CheckFinite") + count("UnscaleClip"), 0);
  EXPECT_EQ(count("MultiAdam"), 1);
  EXPECT_EQ(count("Adam"), 0);
}

#ifdef AMPC_HAVE_CUDA
// A random batch for the model's data inputs (image floats in [0, 1), labels < classes).
NamedTensors RandomBatch(const TrainingSession& session, int64_t batch, int64_t classes,
                         unsigned seed = 7) {
  std::mt19937 rng(seed);
  NamedTensors inputs;
  for (const ValueSpec& spec : session.data_inputs()) {
    Shape shape = {batch};
    for (size_t d = 1; d < spec.dims.size(); ++d) shape.push_back(spec.dims[d]);
    Tensor t = Tensor::Host(spec.dtype, shape);
    if (spec.dtype == DType::kFloat) {
      std::uniform_real_distribution<float> dist(0, 1);
      for (float& v : t.span<float>()) v = dist(rng);
    } else {
      std::uniform_int_distribution<int64_t> dist(0, classes - 1);
      for (int64_t& v : t.span<int64_t>()) v = dist(rng);
    }
    inputs[spec.name] = std::move(t);
  }
  return inputs;
}

double RelativeDifference(const Tensor& expected, const Tensor& actual) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < expected.size(); ++i) {
    const double e = expected.data<float>()[i], a = actual.data<float>()[i];
    diff += (a - e) * (a - e);
    norm += e * e;
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

// Three SGD steps from the same weights and batch; the FP32 weights after them, by name.
struct TrainingRun {
  std::vector<float> losses;
  std::vector<bool> applied;
  std::vector<float> scales;
  std::map<std::string, Tensor> weights;
};

TrainingRun Train(const onnx::ModelProto& trained, Backend& backend) {
  TrainingRun run;
  auto session = TrainingSession::Create(trained, DefaultRegistry(), backend);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return run;
  const NamedTensors data = RandomBatch(**session, 16, 10);
  for (int step = 0; step < 3; ++step) {
    auto result = (*session)->Step(data, 0.05f);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return run;
    run.losses.push_back(result->loss);
    run.applied.push_back(result->applied);
    run.scales.push_back(result->scale);
  }
  for (const onnx::TensorProto& init : trained.graph().initializer()) {
    if (init.data_type() != onnx::TensorProto::FLOAT) continue;
    auto state = (*session)->State(init.name());
    EXPECT_TRUE(state.ok()) << init.name();
    if (state.ok()) run.weights.emplace(init.name(), std::move(*state));
  }
  return run;
}

// FP32: the GPU's weights within 1e-4 of the CPU's. FP16/BF16: within 1e-2 / 5e-2, or, where the
// CPU's own mixed-precision run is that far from the FP32 run (a bias whose gradient sums many
// rounded terms that nearly cancel), no further from the FP32 run than 1.5 times the CPU's.
TEST_F(CudaTrainingTest, StepsOnTheGpuFollowTheCpu) {
  AMPC_SKIP_WITHOUT_GPU();
  CpuBackend cpu(2);
  auto gpu = CudaBackend::Create(0);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  for (const auto& [name, model] : BundledModels()) {
    // SGD: an update proportional to the gradient, so small kernel differences stay small.
    const TrainingRun fp32 = Train(Compiled(model, "fp32", "sgd", "0.05"), cpu);
    for (const std::string dtype : {"fp32", "fp16", "bf16"}) {
      SCOPED_TRACE(name + " " + dtype);
      const onnx::ModelProto trained = Compiled(model, dtype, "sgd", "0.05");
      const TrainingRun expected = Train(trained, cpu);
      const TrainingRun actual = Train(trained, **gpu);
      ASSERT_EQ(actual.losses.size(), expected.losses.size());
      const double tolerance = dtype == "fp32" ? 1e-4 : dtype == "fp16" ? 1e-2 : 5e-2;
      for (size_t step = 0; step < expected.losses.size(); ++step) {
        EXPECT_NEAR(actual.losses[step], expected.losses[step],
                    tolerance * std::abs(expected.losses[step]))
            << "step " << step;
      }
      EXPECT_EQ(actual.applied, expected.applied);
      EXPECT_EQ(actual.scales, expected.scales);
      for (const auto& [weight, e] : expected.weights) {
        auto a = actual.weights.find(weight);
        ASSERT_NE(a, actual.weights.end()) << weight;
        const double direct = RelativeDifference(e, a->second);
        if (direct <= tolerance) continue;
        auto anchor = fp32.weights.find(weight);
        ASSERT_TRUE(dtype != "fp32" && anchor != fp32.weights.end())
            << weight << ": GPU and CPU differ by " << direct;
        const double cpu_error = RelativeDifference(anchor->second, e);
        const double gpu_error = RelativeDifference(anchor->second, a->second);
        EXPECT_LE(gpu_error, 1.5 * cpu_error)
            << weight << ": GPU and CPU differ by " << direct << "; from the FP32 run, the CPU by "
            << cpu_error << ", the GPU by " << gpu_error;
      }
    }
  }
}

// Every state value (parameters, moments, counters), as host bytes by name.
std::map<std::string, std::string> StateBytes(const onnx::ModelProto& trained,
                                              const TrainingSession& session) {
  std::vector<std::string> names;
  for (const auto& init : trained.graph().initializer()) names.push_back(init.name());
  for (const auto& output : trained.training_info(0).initialization().output()) {
    names.push_back(output.name());
  }
  std::map<std::string, std::string> bytes;
  for (const std::string& name : names) {
    absl::StatusOr<Tensor> value = session.State(name);
    EXPECT_TRUE(value.ok()) << name << ": " << value.status();
    if (value.ok()) {
      bytes[name] = std::string(static_cast<const char*>(value->raw()), value->bytes());
    }
  }
  return bytes;
}

// A run of `batches.size()` steps: the learning rate changes every step, and a batch of the wrong
// shape or with a NaN (a skipped step) may be among them.
struct StepLog {
  std::vector<StepResult> steps;
  std::map<std::string, std::string> state;
  int64_t replayed = 0;
  std::string off_reason;
};

StepLog TrainSteps(const onnx::ModelProto& trained, CudaBackend& backend, bool capture,
                   const std::vector<NamedTensors>& batches) {
  StepLog log;
  auto session = TrainingSession::Create(trained, DefaultRegistry(), backend);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return log;
  (*session)->set_capture(capture);
  for (size_t i = 0; i < batches.size(); ++i) {
    auto result = (*session)->Step(batches[i], 0.001f * (1.0f + 0.25f * static_cast<float>(i)));
    EXPECT_TRUE(result.ok()) << "step " << i << ": " << result.status();
    if (!result.ok()) return log;
    log.steps.push_back(*result);
  }
  log.state = StateBytes(trained, **session);
  log.replayed = (*session)->replayed_steps();
  log.off_reason = (*session)->capture_off_reason();
  return log;
}

void ExpectSameSteps(const StepLog& eager, const StepLog& captured) {
  ASSERT_EQ(captured.steps.size(), eager.steps.size());
  for (size_t i = 0; i < eager.steps.size(); ++i) {
    const StepResult &e = eager.steps[i], &c = captured.steps[i];
    EXPECT_EQ(std::memcmp(&c.loss, &e.loss, sizeof(float)), 0)
        << "step " << i << ": loss " << c.loss << " vs " << e.loss;
    EXPECT_EQ(c.applied, e.applied) << "step " << i;
    EXPECT_EQ(c.scale, e.scale) << "step " << i;
    EXPECT_EQ(c.step, e.step) << "step " << i;
    EXPECT_EQ(c.skipped_steps, e.skipped_steps) << "step " << i;
  }
  ASSERT_EQ(captured.state.size(), eager.state.size());
  for (const auto& [name, bytes] : eager.state) {
    EXPECT_TRUE(captured.state.at(name) == bytes) << name << " differs";
  }
}

// Replayed steps are the eager steps, bit for bit: new data and a new learning rate every step, a
// skipped step (NaN in the batch), a change of batch size (eager again, then captured anew).
TEST_F(CudaTrainingTest, CapturedStepsAreTheEagerStepsBitForBit) {
  AMPC_SKIP_WITHOUT_GPU();
  auto gpu = CudaBackend::Create(0);  // one backend: both runs use the same cuDNN algorithms
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  for (const auto& [name, model] : BundledModels()) {
    for (const std::string dtype : {"fp32", "fp16"}) {
      SCOPED_TRACE(name + " " + dtype);
      const onnx::ModelProto trained = Compiled(model, dtype);
      auto probe = TrainingSession::Create(trained, DefaultRegistry(), **gpu);
      ASSERT_TRUE(probe.ok()) << probe.status();
      std::vector<NamedTensors> batches;
      for (unsigned i = 0; i < 12; ++i) {
        batches.push_back(RandomBatch(**probe, i >= 6 && i < 9 ? 8 : 16, 10, 100 + i));
      }
      bool poisoned = false;  // a model with a float input skips step 4
      for (auto& [input, tensor] : batches[4]) {
        if (tensor.dtype() != DType::kFloat) continue;
        tensor.data<float>()[0] = NAN;
        poisoned = true;
      }
      const StepLog eager = TrainSteps(trained, **gpu, false, batches);
      const StepLog captured = TrainSteps(trained, **gpu, true, batches);
      EXPECT_EQ(eager.replayed, 0);
      // Every step is captured (the transformer's Gather and ScatterND read the token ids on
      // the GPU). Batch 16: steps 0-1 eager, 2-5 replayed; batch 8: 6-7 eager, 8; 16: 9-10, 11.
      EXPECT_EQ(captured.off_reason, "");
      EXPECT_EQ(captured.replayed, 6);
      ASSERT_EQ(captured.steps.size(), 12u);
      EXPECT_NE(captured.steps[4].applied, poisoned);
      ExpectSameSteps(eager, captured);
    }
  }
}

// Once captured, a step queued with Run waits for nothing and copies only its data to the GPU
// (a batch under 64 KiB: larger ones take turns in four pinned staging buffers, and the host
// waits when it is four steps ahead).
TEST_F(CudaTrainingTest, ReplayedStepsDoNotWaitForTheGpu) {
  AMPC_SKIP_WITHOUT_GPU();
  auto gpu = CudaBackend::Create(0);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const onnx::ModelProto trained = Compiled(models::BuildMlp({}), "fp16");
  auto session = TrainingSession::Create(trained, DefaultRegistry(), **gpu);
  ASSERT_TRUE(session.ok()) << session.status();
  (*session)->set_capture(true);
  const NamedTensors batch = RandomBatch(**session, 16, 10);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE((*session)->Run(batch, 0.001f).ok());
  ASSERT_TRUE((*session)->LastStep().ok());
  const uint64_t waits = (*gpu)->synchronisations(), copies = (*gpu)->host_copies();
  constexpr int kSteps = 20;
  for (int i = 0; i < kSteps; ++i) ASSERT_TRUE((*session)->Run(batch, 0.001f).ok());
  EXPECT_EQ((*gpu)->synchronisations(), waits);
  // The data inputs and the learning rate, nothing else.
  EXPECT_EQ((*gpu)->host_copies() - copies, kSteps * (batch.size() + 1));
  EXPECT_EQ((*session)->replayed_steps(), kSteps + 2);
  auto last = (*session)->LastStep();
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->step, 4 + kSteps);
}
#endif

}  // namespace
}  // namespace ampc
