// `ampc extract-step`: the training step as a standalone model. The extracted step, run by ampc's
// Session with the state as inputs, computes bit for bit what TrainingSession::Step computes on
// the training model; ONNX's checker and strict inference accept it; bad input fails cleanly.
#include "compiler/extract_step.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "compiler/model_io.h"
#include "kernels/cpu/cpu_kernels.h"
#include "models/cnn.h"
#include "passes/opset/training_ops.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/session.h"
#include "runtime/training_session.h"
#include "tests/support/subprocess.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class ExtractStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ampc-extract-XXXXXX";
    dir_ = mkdtemp(pattern);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) { return (dir_ / name).string(); }
  testing::ProcessResult Ampc(std::vector<std::string> args) {
    args.insert(args.begin(), AMPC_BINARY);
    return testing::RunProcess(args, dir_.string());
  }
  // A small CNN (2 conv blocks with BatchNormalization) compiled by `ampc --train` with `flags`.
  onnx::ModelProto CompiledCnn(const std::vector<std::string>& flags) {
    models::CnnOptions small;
    small.channels = {1, 3, 4};
    small.image_size = 8;
    small.hidden = 6;
    small.classes = 3;
    absl::StatusOr<onnx::ModelProto> cnn = models::BuildCnn(small);
    EXPECT_TRUE(cnn.ok()) << cnn.status();
    std::ofstream(Path("cnn.onnx"), std::ios::binary) << cnn->SerializeAsString();
    std::vector<std::string> args = {Path("cnn.onnx"), "-o", Path("cnn.train.onnx"), "--train",
                                     "--loss=loss"};
    args.insert(args.end(), flags.begin(), flags.end());
    const testing::ProcessResult compiled = Ampc(args);
    EXPECT_EQ(compiled.exit_code, 0) << compiled.err;
    absl::StatusOr<LoadedModel> loaded = LoadModel(Path("cnn.train.onnx"));
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return loaded.ok() ? loaded->model : onnx::ModelProto();
  }

  fs::path dir_;
};

NamedTensors Batch() {
  std::vector<float> image(4 * 8 * 8);
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<float>((i * 37) % 23) / 11 - 1;
  return {{"image", testing::Floats({4, 1, 8, 8}, image)},
          {"label", testing::Int64s({4}, {0, 2, 1, 2})}};
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

TEST_F(ExtractStepTest, StepWithStateComputesWhatTheTrainingSessionComputes) {
  for (const auto& flags : std::vector<std::vector<std::string>>{
           {"--passes=verify", "--optimizer=momentum"}, {"--dtype=fp16", "--clip-grad-norm=1"}}) {
    SCOPED_TRACE(flags[0]);
    const onnx::ModelProto model = CompiledCnn(flags);
    absl::StatusOr<onnx::ModelProto> step = ExtractTrainingStep(model, /*with_state=*/true);
    ASSERT_TRUE(step.ok()) << step.status();
    CpuBackend backend(1);
    auto session = Session::Create(*step, DefaultRegistry(), backend);
    ASSERT_TRUE(session.ok()) << session.status();
    auto training = TrainingSession::Create(model, DefaultRegistry(), backend);
    ASSERT_TRUE(training.ok()) << training.status();

    // Three steps: each feeds the step model's <state>.ampc.next back in as <state>.
    NamedTensors state;
    for (int k = 0; k < 3; ++k) {
      NamedTensors feeds = Batch();
      feeds["ampc.lr"] = testing::Floats({}, {0.05f});
      std::vector<Tensor> inputs;
      for (const ValueSpec& spec : (*session)->inputs()) {
        inputs.push_back(feeds.contains(spec.name)   ? feeds.at(spec.name)
                         : state.contains(spec.name) ? state.at(spec.name)
                                                     : Tensor());
      }
      auto outputs = (*session)->Run(inputs);
      ASSERT_TRUE(outputs.ok()) << outputs.status();
      auto result = (*training)->Step(Batch(), 0.05f);
      ASSERT_TRUE(result.ok()) << result.status();
      ASSERT_TRUE(result->applied);
      int compared = 0;
      for (int i = 0; i < step->graph().output_size(); ++i) {
        const std::string& name = step->graph().output(i).name();
        if (name == "loss") {
          EXPECT_EQ((*outputs)[i].data<float>()[0], result->loss);
        }
        if (!name.ends_with(".ampc.next")) continue;
        const std::string key = name.substr(0, name.size() - std::strlen(".ampc.next"));
        absl::StatusOr<Tensor> expected = (*training)->State(key);
        ASSERT_TRUE(expected.ok()) << expected.status();
        EXPECT_TRUE(SameBits((*outputs)[i], *expected)) << name << " after step " << k + 1;
        state[key] = (*outputs)[i];
        ++compared;
      }
      // 8 parameters (conv, bn scale/bias, gemm), their buffers or none, 4 running statistics,
      // the scaler state and counters.
      EXPECT_GE(compared, 8 + 4 + 7);
    }
  }
}

TEST_F(ExtractStepTest, StateIsInputsAndTheCheckerAcceptsTheStep) {
  const onnx::ModelProto model = CompiledCnn({"--freeze=fc2\\..*"});
  for (const bool with_state : {false, true}) {
    absl::StatusOr<onnx::ModelProto> step = ExtractTrainingStep(model, with_state);
    ASSERT_TRUE(step.ok()) << step.status();
    RegisterAmpcSchemas();
    EXPECT_NO_THROW(onnx::checker::check_model(*step));
    onnx::ModelProto inferred = *step;
    const onnx::ShapeInferenceOptions strict(/*check_type_val=*/true, /*strict_mode_val=*/1);
    EXPECT_NO_THROW(
        onnx::shape_inference::InferShapes(inferred, onnx::OpSchemaRegistry::Instance(), strict));
    std::set<std::string> inputs, outputs, initializers;
    for (const auto& v : step->graph().input()) inputs.insert(v.name());
    for (const auto& v : step->graph().output()) outputs.insert(v.name());
    for (const auto& t : step->graph().initializer()) initializers.insert(t.name());
    const onnx::TrainingInfoProto& info = model.training_info(0);
    for (const auto& binding : info.update_binding()) {
      EXPECT_TRUE(inputs.contains(binding.key())) << binding.key();
      EXPECT_TRUE(outputs.contains(binding.value())) << binding.value();
      EXPECT_EQ(initializers.contains(binding.key()), with_state) << binding.key();
    }
    // Frozen: read by the step, not updated, still an input.
    bool frozen = false;
    for (const auto& binding : info.update_binding()) frozen |= binding.key() == "fc2.weight";
    EXPECT_FALSE(frozen);
    EXPECT_TRUE(inputs.contains("fc2.weight"));
    EXPECT_EQ(initializers.contains("fc2.weight"), with_state);
    for (const char* name : {"image", "label", "ampc.lr"}) {
      EXPECT_TRUE(inputs.contains(name)) << name;
      EXPECT_FALSE(initializers.contains(name)) << name;
    }
    for (const char* name : {"loss", "ampc.applied", "ampc.grad_norm"}) {
      EXPECT_TRUE(outputs.contains(name)) << name;
    }
    std::set<std::string> functions;
    for (const auto& f : step->functions()) functions.insert(f.name());
    EXPECT_TRUE(functions.contains("ConvGrad"));
    EXPECT_TRUE(functions.contains("BatchNormalizationGrad"));
    EXPECT_EQ(step->training_info_size(), 0);
  }
}

TEST_F(ExtractStepTest, CommandWritesTheStepAndFailsCleanly) {
  CompiledCnn({"--passes=verify"});
  testing::ProcessResult ok =
      Ampc({"extract-step", Path("cnn.train.onnx"), "-o", Path("step.onnx"), "--with-state"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  absl::StatusOr<LoadedModel> step = LoadModel(Path("step.onnx"));
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_GT(step->model.graph().initializer_size(), 0);

  // An inference model has no training step: one line naming the file, exit 1, nothing written.
  testing::ProcessResult bad = Ampc({"extract-step", Path("cnn.onnx"), "-o", Path("bad.onnx")});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr(Path("cnn.onnx") + ": has 0 training_info entries"));
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  EXPECT_FALSE(fs::exists(Path("bad.onnx")));

  testing::ProcessResult usage = Ampc({"extract-step", Path("cnn.train.onnx")});
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_THAT(usage.err, HasSubstr("-o STEP"));
  testing::ProcessResult same =
      Ampc({"extract-step", Path("cnn.train.onnx"), "-o", Path("cnn.train.onnx")});
  EXPECT_EQ(same.exit_code, 2);
  EXPECT_THAT(same.err, HasSubstr("never overwrites its input"));
  testing::ProcessResult missing = Ampc({"extract-step", Path("nope.onnx"), "-o", Path("x.onnx")});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("nope.onnx"));
  EXPECT_FALSE(fs::exists(Path("x.onnx")));
}

}  // namespace
}  // namespace ampc
