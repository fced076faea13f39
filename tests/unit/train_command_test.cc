// `ampc train` on a hand-written softmax-regression training model: it learns synthetic data,
// writes metrics and checkpoints, resumes bit-identically, and fails clearly on bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "compiler/model_io.h"
#include "models/mlp.h"
#include "runtime/core/tensor_proto.h"
#include "runtime/data_readers.h"
#include "runtime/npy.h"
#include "tests/support/cuda_parity.h"
#include "tests/support/forward_models.h"
#include "tests/support/model_text.h"
#include "tests/support/subprocess.h"
#include "tests/support/tensors.h"
#include "tests/support/training_models.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class TrainCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ampc-train-cli-XXXXXX";
    dir_ = mkdtemp(pattern);
    model_ = Path("model.train.onnx");
    std::ofstream(model_, std::ios::binary)
        << testing::SoftmaxRegressionTrainingModel().SerializeAsString();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) { return (dir_ / name).string(); }
  testing::ProcessResult Ampc(std::vector<std::string> args) {
    args.insert(args.begin(), AMPC_BINARY);
    return testing::RunProcess(args, dir_.string());
  }
  std::vector<std::string> Train(const std::string& model, const std::string& epochs) {
    return {"train", model,      "--data", "synthetic:256", "--batch", "32",          "--lr",
            "0.5",   "--epochs", epochs,   "--device",      "cpu",     "--log-every", "4"};
  }

  fs::path dir_;
  std::string model_;
};

// The accuracy on the "epoch N: test accuracy A, ..." line of stdout.
double AccuracyOfEpoch(const std::string& out, int epoch) {
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    const std::string prefix = "epoch " + std::to_string(epoch) + ": test accuracy ";
    if (!absl::StartsWith(line, prefix)) continue;
    double accuracy = -1;
    line.remove_prefix(prefix.size());
    if (absl::SimpleAtod(line.substr(0, line.find(',')), &accuracy)) return accuracy;
  }
  return -1;
}

TEST_F(TrainCommandTest, LearnsSyntheticDataAndWritesMetricsAndTheModel) {
  std::vector<std::string> args = Train(model_, "2");
  args.insert(args.end(), {"--metrics", Path("m.csv"), "--save", Path("out.onnx")});
  auto r = Ampc(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(AccuracyOfEpoch(r.out, 1), 0.0);
  EXPECT_GT(AccuracyOfEpoch(r.out, 2), 0.9) << r.out;  // the classes are separable patterns
  EXPECT_THAT(r.out, HasSubstr("epoch 2: test accuracy"));
  EXPECT_THAT(r.out, HasSubstr("16 steps applied, 0 skipped, scale 1"));
  EXPECT_THAT(r.err, HasSubstr("epoch 1 step 4 loss "));  // plain lines: stderr is not a TTY
  const std::string csv = testing::ReadFileOrEmpty(Path("m.csv"));
  const std::vector<std::string> rows = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(rows.size(), 5u) << csv;  // header + steps 4, 8, 12, 16
  EXPECT_EQ(rows[0], "step,loss,scale,grad_norm,skipped,lr");
  EXPECT_TRUE(absl::EndsWith(rows[4], ",0,0.5")) << rows[4];  // the constant rate of --lr 0.5
  EXPECT_TRUE(absl::StartsWith(rows[4], "16,")) << rows[4];
  EXPECT_TRUE(fs::exists(Path("out.onnx")));
}

// --capture on the CPU: training as without it, and one line saying why no step was captured.
TEST_F(TrainCommandTest, CaptureSaysWhyWhereItCannot) {
  std::vector<std::string> args = Train(model_, "1");
  args.push_back("--capture");
  auto r = Ampc(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("8 steps applied"));
  EXPECT_THAT(r.err,
              HasSubstr("ampc: note: steps not captured: the cpu backend cannot capture work"));
}

TEST_F(TrainCommandTest, ResumingFromACheckpointIsBitIdentical) {
  std::vector<std::string> straight = Train(model_, "3");
  straight.insert(straight.end(), {"--save", Path("straight.onnx"), "--seed", "5"});
  auto r = Ampc(straight);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> first = Train(model_, "1");
  first.insert(first.end(), {"--save", Path("resumed.onnx"), "--seed", "5"});
  r = Ampc(first);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> rest = Train(model_, "3");
  rest.insert(rest.end(), {"--save", Path("resumed.onnx"), "--resume", "--seed", "5"});
  r = Ampc(rest);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("from step 8"));
  EXPECT_EQ(AccuracyOfEpoch(r.out, 1), -1);  // epoch 1 was not run again
  const std::string a = testing::ReadFileOrEmpty(Path("straight.onnx"));
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == testing::ReadFileOrEmpty(Path("resumed.onnx")));
}

TEST_F(TrainCommandTest, TheLearningRateDefaultsToTheOneRecordedInTheModel) {
  onnx::ModelProto recorded = testing::SoftmaxRegressionTrainingModel();
  onnx::StringStringEntryProto* lr = recorded.add_metadata_props();
  lr->set_key("ampc.lr");
  lr->set_value("0.25");
  std::ofstream(Path("recorded.onnx"), std::ios::binary) << recorded.SerializeAsString();
  auto r = Ampc({"train", Path("recorded.onnx"), "--data", "synthetic:64", "--batch", "16",
                 "--epochs", "1", "--save", Path("a.onnx")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Ampc({"train", model_, "--data", "synthetic:64", "--batch", "16", "--epochs", "1", "--lr",
            "0.25", "--save", Path("b.onnx")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  onnx::ModelProto a, b;
  ASSERT_TRUE(a.ParseFromString(testing::ReadFileOrEmpty(Path("a.onnx"))));
  ASSERT_TRUE(b.ParseFromString(testing::ReadFileOrEmpty(Path("b.onnx"))));
  EXPECT_EQ(a.graph().initializer(0).raw_data(), b.graph().initializer(0).raw_data());
  // --lr given at its default value still overrides the recorded rate.
  r = Ampc({"train", Path("recorded.onnx"), "--data", "synthetic:64", "--batch", "16", "--epochs",
            "1", "--lr", "0.01", "--save", Path("c.onnx")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Ampc({"train", model_, "--data", "synthetic:64", "--batch", "16", "--epochs", "1", "--save",
            Path("d.onnx")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  onnx::ModelProto c, d;
  ASSERT_TRUE(c.ParseFromString(testing::ReadFileOrEmpty(Path("c.onnx"))));
  ASSERT_TRUE(d.ParseFromString(testing::ReadFileOrEmpty(Path("d.onnx"))));
  EXPECT_EQ(c.graph().initializer(0).raw_data(), d.graph().initializer(0).raw_data());
  EXPECT_NE(c.graph().initializer(0).raw_data(), a.graph().initializer(0).raw_data());
  lr->set_value("fast");
  std::ofstream(Path("bad.onnx"), std::ios::binary) << recorded.SerializeAsString();
  r = Ampc({"train", Path("bad.onnx"), "--data", "synthetic:64"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err,
              HasSubstr(Path("bad.onnx") + ": metadata ampc.lr = 'fast' is not a positive number"));
}

// npy:DIR data whose samples do not fit the model is refused before training, naming both; a
// test set of no samples has no accuracy to print.
TEST_F(TrainCommandTest, DataThatDoesNotFitIsRefusedAndNoTestSamplesIsSaid) {
  auto write_split = [&](const std::string& dir, const std::string& split, int64_t count,
                         int64_t per_sample) {
    fs::create_directories(Path(dir));
    Tensor images = Tensor::Host(DType::kFloat, {count, per_sample});
    std::fill_n(images.data<float>(), images.size(), 0.5f);
    Tensor labels = Tensor::Host(DType::kInt64, {count});
    for (int64_t i = 0; i < count; ++i) labels.data<int64_t>()[i] = i % 10;
    std::ofstream(Path(dir + "/" + split + "-images.npy"), std::ios::binary) << EncodeNpy(images);
    std::ofstream(Path(dir + "/" + split + "-labels.npy"), std::ios::binary) << EncodeNpy(labels);
  };
  write_split("small", "train", 8, 100);
  write_split("small", "test", 2, 100);
  auto r = Ampc({"train", model_, "--data", "npy:" + Path("small"), "--batch", "4"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(model_ + ": --data npy:" + Path("small") +
                               ": image input 'image' takes samples of [784]; the data has 100 "
                               "values per sample"));
  EXPECT_THAT(r.err, Not(HasSubstr("epoch")));
  write_split("notest", "train", 8, 784);
  write_split("notest", "test", 0, 784);
  // The data set's files are inputs; metrics that cannot be written fail the run.
  const std::string data_file = Path("notest/test-labels.npy");
  const std::string before = testing::ReadFileOrEmpty(data_file);
  r = Ampc(
      {"train", model_, "--data", "npy:" + Path("notest"), "--batch", "4", "--metrics", data_file});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--metrics " + data_file + " is an input of this run"));
  EXPECT_EQ(testing::ReadFileOrEmpty(data_file), before);
  // Only the data set's own files are inputs: a save and metrics kept beside them are written,
  // and again on the next run, and resumed from.
  for (const char* resume : {"--noresume", "--resume", "--resume"}) {
    r = Ampc({"train", model_, "--data", "npy:" + Path("notest"), "--batch", "4", "--epochs", "1",
              "--save", Path("notest/ckpt.onnx"), "--metrics", Path("notest/m.csv"), resume});
    EXPECT_EQ(r.exit_code, 0) << resume << r.err;
  }
  r = Ampc({"train", model_, "--data", "npy:" + Path("notest"), "--batch", "4", "--epochs", "1",
            "--metrics", "/dev/full"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("/dev/full: cannot write the metrics"));
  r = Ampc({"train", model_, "--data", "npy:" + Path("notest"), "--batch", "4", "--epochs", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("epoch 1: test accuracy n/a (no test samples), "));
}

// The loss column of a metrics CSV (header skipped).
std::vector<double> LossesIn(const std::string& csv) {
  std::vector<double> losses;
  for (absl::string_view row : absl::StrSplit(csv, '\n', absl::SkipEmpty())) {
    const std::vector<std::string> cells = absl::StrSplit(row, ',');
    double loss = 0;
    if (cells.size() > 1 && absl::SimpleAtod(cells[1], &loss)) losses.push_back(loss);
  }
  return losses;
}

// Resuming reads the --save file; its external data is then input too, which --metrics may
// not replace (the save itself may: it writes the other data file name).
TEST_F(TrainCommandTest, ResumingProtectsTheCheckpointsExternalData) {
  auto r = Ampc({"train", model_, "--data", "synthetic:64", "--batch", "16", "--epochs", "1",
                 "--save", Path("ckpt.onnx")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Ampc({Path("ckpt.onnx"), "-o", Path("out.onnx"), "--passes=", "--external-data=always"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string data = Path("out.onnx.data"), before = testing::ReadFileOrEmpty(data);
  r = Ampc({"train", model_, "--data", "synthetic:64", "--batch", "16", "--epochs", "2", "--save",
            Path("out.onnx"), "--resume", "--metrics", data});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--metrics " + data + " is an input of this run"));
  EXPECT_EQ(testing::ReadFileOrEmpty(data), before);
  r = Ampc({"train", model_, "--data", "synthetic:64", "--batch", "16", "--epochs", "2", "--save",
            Path("out.onnx"), "--resume"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(LoadModel(Path("out.onnx")).ok());
}

// The training step's functions are written against opset 17: an opset-13 model is converted
// (with a warning), and since the MLP's ops mean the same at 13 and 17, the result is the file
// the opset-17 model gives. It used to fail the output check, blamed on an ampc bug.
TEST_F(TrainCommandTest, AModelBelowOpset17IsConvertedForTraining) {
  onnx::ModelProto mlp = models::BuildMlp();
  ASSERT_EQ(mlp.opset_import(0).version(), 17);
  std::ofstream(Path("mlp17.onnx"), std::ios::binary) << mlp.SerializeAsString();
  mlp.mutable_opset_import(0)->set_version(13);
  std::ofstream(Path("mlp13.onnx"), std::ios::binary) << mlp.SerializeAsString();
  auto r = Ampc({Path("mlp13.onnx"), "-o", Path("t13.onnx"), "--train", "--loss=loss"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("mlp13.onnx: warning: --train: converted opset 13 to 17 with "
                               "ONNX's version converter"));
  r = Ampc({Path("mlp17.onnx"), "-o", Path("t17.onnx"), "--train", "--loss=loss"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("warning")));
  EXPECT_EQ(testing::ReadFileOrEmpty(Path("t13.onnx")), testing::ReadFileOrEmpty(Path("t17.onnx")));
  r = Ampc({Path("mlp13.onnx"), "-o", Path("i13.onnx")});  // inference keeps the opset
  ASSERT_EQ(r.exit_code, 0) << r.err;
  absl::StatusOr<LoadedModel> inference = LoadModel(Path("i13.onnx"));
  ASSERT_TRUE(inference.ok()) << inference.status();
  EXPECT_EQ(inference->model.opset_import(0).version(), 13);
  // Below 13 ONNX 1.12's converter changes what some ops compute: refused, not converted.
  mlp.mutable_opset_import(0)->set_version(12);
  std::ofstream(Path("mlp12.onnx"), std::ios::binary) << mlp.SerializeAsString();
  r = Ampc({Path("mlp12.onnx"), "-o", Path("t12.onnx"), "--train", "--loss=loss"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(Path("mlp12.onnx") +
                               ": --train needs opset 17 (the training step's functions are "
                               "written against it) and this model imports opset 12; ampc "
                               "converts from opset 13 on"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(Path("t12.onnx")));
}

// Today's exporters write opset 18 and above. The step's function bodies import the model's
// opset, which the checker requires of model-local functions (they used to import 17, and every
// model above it failed the output check); upgraded with --target-opset, the MLP trains.
TEST_F(TrainCommandTest, ModelsAboveOpset17TrainWithTheirOwnOpset) {
  std::ofstream(Path("mlp17.onnx"), std::ios::binary) << models::BuildMlp().SerializeAsString();
  for (const char* opset : {"20", "23"}) {
    const std::string out = Path(absl::StrCat("t", opset, ".onnx"));
    auto r = Ampc({Path("mlp17.onnx"), "-o", out, "--train", "--loss=loss",
                   absl::StrCat("--target-opset=", opset)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    absl::StatusOr<LoadedModel> trained = LoadModel(out);
    ASSERT_TRUE(trained.ok()) << trained.status();
    EXPECT_EQ(trained->model.opset_import(0).version(), std::stoi(opset));
    for (const onnx::FunctionProto& function : trained->model.functions()) {
      for (const onnx::OperatorSetIdProto& import : function.opset_import()) {
        if (import.domain().empty()) {
          EXPECT_EQ(import.version(), std::stoi(opset)) << function.name();
        }
      }
    }
    r = Ampc({"train", out, "--data", "synthetic:64", "--batch", "16", "--epochs", "1"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
}

// --loss-op end to end: the bundled MLP's logits without a loss, compiled with
// --loss-op=cross_entropy:logits, train on synthetic data and the loss falls.
TEST_F(TrainCommandTest, LossOpTrainsAForwardModelWithoutALoss) {
  models::MlpOptions mlp;
  mlp.layers = {784, 32, 10};
  std::ofstream(Path("forward.onnx"), std::ios::binary)
      << testing::MlpWithoutLoss(mlp).SerializeAsString();
  auto r = Ampc({Path("forward.onnx"), "-o", Path("mlp.train.onnx"), "--train",
                 "--loss-op=cross_entropy:logits"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> args = Train(Path("mlp.train.onnx"), "2");
  args[7] = "0.01";  // --lr: AdamW (the default optimizer), not the SGD rate Train() gives
  args.insert(args.end(), {"--metrics", Path("m.csv")});
  r = Ampc(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<double> losses = LossesIn(testing::ReadFileOrEmpty(Path("m.csv")));
  ASSERT_EQ(losses.size(), 4u);  // steps 4, 8, 12, 16
  EXPECT_LT(losses.back(), 0.5 * losses.front()) << losses.front() << " -> " << losses.back();
  EXPECT_GT(AccuracyOfEpoch(r.out, 2), 0.5) << r.out;
}

// The forward MLP 784-16-10 written to `path`; with `dropped`, Dropout(ratio 0.25,
// training_mode true) on its input, as a legacy training-mode export has it.
void WriteMlp(const std::string& path, bool dropped) {
  models::MlpOptions mlp;
  mlp.layers = {784, 16, 10};
  onnx::ModelProto model = testing::MlpWithoutLoss(mlp);
  if (!dropped) {
    std::ofstream(path, std::ios::binary) << model.SerializeAsString();
    return;
  }
  onnx::GraphProto& graph = *model.mutable_graph();
  const std::string image = graph.input(0).name();
  for (onnx::NodeProto& node : *graph.mutable_node()) {
    for (std::string& input : *node.mutable_input()) {
      if (input == image) input = "dropped";
    }
  }
  onnx::ModelProto with_dropout = model;
  onnx::GraphProto& g = *with_dropout.mutable_graph();
  g.clear_node();
  for (const auto& [name, type] :
       {std::pair{"ratio", onnx::TensorProto::FLOAT}, {"on", onnx::TensorProto::BOOL}}) {
    onnx::NodeProto& constant = *g.add_node();
    constant.set_op_type("Constant");
    constant.add_output(name);
    onnx::AttributeProto& value = *constant.add_attribute();
    value.set_name("value");
    value.set_type(onnx::AttributeProto::TENSOR);
    value.mutable_t()->set_data_type(type);
    if (type == onnx::TensorProto::FLOAT) value.mutable_t()->add_float_data(0.25f);
    if (type == onnx::TensorProto::BOOL) value.mutable_t()->add_int32_data(1);
  }
  onnx::NodeProto& dropout = *g.add_node();
  dropout.set_op_type("Dropout");
  for (const char* input : {image.c_str(), "ratio", "on"}) dropout.add_input(input);
  dropout.add_output("dropped");
  for (const onnx::NodeProto& node : graph.node()) *g.add_node() = node;
  std::ofstream(path, std::ios::binary) << with_dropout.SerializeAsString();
}

// --dropout=graph: the step's masks follow the checkpointed counters, so 2 epochs straight and
// 1 + resume 1 save bit-identical models; they differ from --dropout=off's (dropout did drop).
TEST_F(TrainCommandTest, ResumingWithDropoutOnIsBitIdentical) {
  WriteMlp(Path("forward.onnx"), /*dropout=*/true);
  for (const char* mode : {"graph", "off"}) {
    auto r = Ampc({Path("forward.onnx"), "-o", Path(absl::StrCat(mode, ".train.onnx")), "--train",
                   "--loss-op=cross_entropy:logits", absl::StrCat("--dropout=", mode)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  auto train = [&](const std::string& model, const std::string& epochs, const std::string& save,
                   bool resume) {
    std::vector<std::string> args = Train(Path(model), epochs);
    args[7] = "0.01";  // --lr for AdamW
    args.insert(args.end(), {"--save", Path(save)});
    if (resume) args.push_back("--resume");
    return Ampc(args);
  };
  auto r = train("graph.train.onnx", "2", "straight.onnx", false);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = train("graph.train.onnx", "1", "resumed.onnx", false);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = train("graph.train.onnx", "2", "resumed.onnx", true);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("from step 8"));
  EXPECT_THAT(r.err, Not(HasSubstr("Dropout")));  // no note: the masks resume
  const std::string a = testing::ReadFileOrEmpty(Path("straight.onnx"));
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == testing::ReadFileOrEmpty(Path("resumed.onnx")));
  r = train("off.train.onnx", "2", "off.onnx", false);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  onnx::ModelProto on, off;
  ASSERT_TRUE(on.ParseFromString(a));
  ASSERT_TRUE(off.ParseFromString(testing::ReadFileOrEmpty(Path("off.onnx"))));
  ASSERT_EQ(on.graph().initializer_size(), off.graph().initializer_size());
  bool differ = false;
  for (int i = 0; i < on.graph().initializer_size(); ++i) {
    differ = differ || on.graph().initializer(i).SerializeAsString() !=
                           off.graph().initializer(i).SerializeAsString();
  }
  EXPECT_TRUE(differ) << "--dropout=graph trained exactly as --dropout=off";
}

// A training model with a standard Dropout in training mode in its step (not compiled by ampc
// --train): resuming says its masks restart.
TEST_F(TrainCommandTest, ResumingAStepWithAStandardTrainingModeDropoutSaysItsMasksDiffer) {
  WriteMlp(Path("forward.onnx"), /*dropout=*/true);
  auto r = Ampc({Path("forward.onnx"), "-o", Path("d.train.onnx"), "--train",
                 "--loss-op=cross_entropy:logits",
                 "--passes=infer-types,loss-op,infer-types,"
                 "training-step,verify"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> args = Train(Path("d.train.onnx"), "1");
  args.insert(args.end(), {"--save", Path("d.saved.onnx")});
  r = Ampc(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("Dropout")));
  args = Train(Path("d.train.onnx"), "2");
  args.insert(args.end(), {"--save", Path("d.saved.onnx"), "--resume"});
  r = Ampc(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("a standard Dropout of the step has a training_mode input"));
  EXPECT_THAT(r.err, HasSubstr("--dropout=graph"));
}

// --dropout: graph or a ratio needs Dropout nodes (an eval export has none); bad values are usage
// errors.
TEST_F(TrainCommandTest, DropoutOnAModelWithoutDropoutNodesSaysHowToExport) {
  WriteMlp(Path("mlp.onnx"), /*dropout=*/false);
  auto r = Ampc({Path("mlp.onnx"), "-o", Path("x.onnx"), "--train",
                 "--loss-op=cross_entropy:logits", "--dropout=0.1"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--dropout=0.1: the model has no Dropout node"));
  EXPECT_THAT(r.err, HasSubstr("training=torch.onnx.TrainingMode.TRAINING"));
  for (const char* bad : {"--dropout=1", "--dropout=on", "--dropout=0"}) {
    r = Ampc(
        {Path("mlp.onnx"), "-o", Path("x.onnx"), "--train", "--loss-op=cross_entropy:logits", bad});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("expected off, graph or a ratio R with 0 < R < 1")) << bad;
  }
  r = Ampc({Path("mlp.onnx"), "-o", Path("x.onnx"), "--dropout=off"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--dropout needs --train"));
}

// --data pb:DIR reads DIR/{train,test}-{images,labels}.pb as npy:DIR reads its .npy files.
TEST_F(TrainCommandTest, LearnsFromTensorProtoFiles) {
  fs::create_directory(Path("pb"));
  for (const auto& [split, count, seed] :
       {std::tuple<std::string, int64_t, uint64_t>{"train", 256, 1}, {"test", 64, 2}}) {
    const Dataset data = SyntheticDataset(count, seed);
    std::ofstream(Path("pb/" + split + "-images.pb"), std::ios::binary)
        << TensorToProto(data.images, "images").SerializeAsString();
    std::ofstream(Path("pb/" + split + "-labels.pb"), std::ios::binary)
        << TensorToProto(data.labels, "labels").SerializeAsString();
  }
  std::vector<std::string> args = Train(model_, "2");
  args[3] = "pb:" + Path("pb");
  auto r = Ampc(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("on pb (" + Path("pb") + "): 256 train, 64 test"));
  EXPECT_GT(AccuracyOfEpoch(r.out, 2), 0.9) << r.out;
}

TEST_F(TrainCommandTest, ErrorsAreOneLineWithTheRightExitCode) {
  auto r = Ampc({"train", model_});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("ampc train needs --data SOURCE"));
  r = Ampc({"train", model_, "--data", "imagenet"});  // a usage error, like --batch 0
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--data imagenet: expected fashion-mnist[:DIR]"));
  r = Ampc({"train", model_, "--data", "synthetic:abc"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--data synthetic:abc: expected synthetic:N with N >= 1"));
  onnx::ModelProto plain = testing::SoftmaxRegressionTrainingModel();
  plain.clear_training_info();
  std::ofstream(Path("plain.onnx"), std::ios::binary) << plain.SerializeAsString();
  r = Ampc({"train", Path("plain.onnx"), "--data", "synthetic:64"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("plain.onnx: the model has no training_info"));
  r = Ampc({"train", model_, "--data", "synthetic:16", "--batch", "64"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--batch 64 is larger than the training set (16 samples)"));
  const std::string before = testing::ReadFileOrEmpty(model_);
  ASSERT_EQ(mkfifo(Path("fifo").c_str(), 0600), 0);
  const std::pair<std::vector<std::string>, std::string> usage_errors[] = {
      {{"--epochs", "0"}, "--epochs must be at least 1"},
      {{"--log-every", "0"}, "--log-every must be at least 1"},
      {{"--threads", "-1"}, "--threads must be 0 (one per core) to 1024, not -1"},
      {{"--lr", "nan"}, "--lr must be a finite number > 0"},
      {{"--lr", "-0.1"}, "--lr must be a finite number > 0"},
      {{"--metrics", model_}, "--metrics=" + model_ + " is the input model " + model_},
      {{"--save", Path("s.onnx"), "--metrics", Path("s.onnx")}, "is --save " + Path("s.onnx")},
  };
  for (const auto& [flags, message] : usage_errors) {
    std::vector<std::string> args = {"train", model_, "--data", "synthetic:64"};
    args.insert(args.end(), flags.begin(), flags.end());
    r = Ampc(args);
    EXPECT_EQ(r.exit_code, 2) << message;
    EXPECT_THAT(r.err, HasSubstr(message));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(testing::ReadFileOrEmpty(model_), before);
    EXPECT_FALSE(fs::exists(Path("s.onnx")));
  }
  // Checked before training, not after it.
  r = Ampc({"train", model_, "--data", "synthetic:64", "--save", Path("fifo")});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.err, HasSubstr(Path("fifo") + ": cannot write: not a regular file"));
  EXPECT_THAT(r.err, Not(HasSubstr("epoch")));
  EXPECT_TRUE(fs::is_fifo(Path("fifo")));
}

// IDX files with a wrong magic number or cut short, through the real command: one line naming
// the file, exit 1, nothing saved.
TEST_F(TrainCommandTest, BadIdxDataIsOneLineNamingTheFile) {
  auto words = [](std::vector<uint32_t> values) {
    std::string bytes;
    for (uint32_t w : values) {
      for (int shift : {24, 16, 8, 0}) bytes.push_back(static_cast<char>((w >> shift) & 0xff));
    }
    return bytes;
  };
  const std::string images = words({0x803, 2, 28, 28}) + std::string(2 * 28 * 28, '\1');
  const std::string labels = words({0x801, 2}) + std::string("\1\2", 2);
  struct Case {
    std::string file, bytes, message;
  };
  for (const Case& c : std::vector<Case>{
           {"train-images-idx3-ubyte", labels,
            "train-images-idx3-ubyte: IDX magic number 0x00000801, expected 0x00000803"},
           {"train-labels-idx1-ubyte", labels.substr(0, 9),
            "train-labels-idx1-ubyte: short read: the header declares [2]"}}) {
    SCOPED_TRACE(c.file);
    fs::remove_all(Path("mnist"));
    fs::create_directory(Path("mnist"));
    for (const char* split : {"train", "t10k"}) {
      std::ofstream(Path(absl::StrCat("mnist/", split, "-images-idx3-ubyte")), std::ios::binary)
          << images;
      std::ofstream(Path(absl::StrCat("mnist/", split, "-labels-idx1-ubyte")), std::ios::binary)
          << labels;
    }
    std::ofstream(Path("mnist/" + c.file), std::ios::binary) << c.bytes;
    auto r = Ampc({"train", model_, "--data", "mnist:" + Path("mnist"), "--save", Path("s.onnx")});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_THAT(r.err, HasSubstr(Path("mnist/" + c.file) + ": "));
    EXPECT_THAT(r.err, HasSubstr(c.message));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(Path("s.onnx")));
  }
}

TEST_F(TrainCommandTest, AFailedRunWritesNoSaveFileAndLeavesTheModelAlone) {
  const std::string before = testing::ReadFileOrEmpty(model_);
  auto r = Ampc({"train", model_, "--data", "imagenet", "--save", Path("out.onnx")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(Path("out.onnx")));
  std::ofstream(Path("old.onnx"), std::ios::binary) << "previous checkpoint";
  r = Ampc(
      {"train", model_, "--data", "synthetic:16", "--batch", "64", "--save", Path("old.onnx")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(testing::ReadFileOrEmpty(Path("old.onnx")), "previous checkpoint");
  EXPECT_EQ(testing::ReadFileOrEmpty(model_), before);
}

// A static scale of 1e30 overflows every FP16 backward: after --max-consecutive-skips steps the
// run stops with one line naming the first inf/NaN and the parameters it reaches.
TEST_F(TrainCommandTest, TooManySkippedStepsNameTheFirstNonFiniteGradient) {
  models::MlpOptions small;
  small.layers = {784, 16, 10};
  std::ofstream(Path("mlp.onnx"), std::ios::binary) << models::BuildMlp(small).SerializeAsString();
  auto r = Ampc({Path("mlp.onnx"), "-o", Path("mlp.train.onnx"), "--train", "--loss", "loss",
                 "--loss-scale", "static:1e30"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Ampc({"train", Path("mlp.train.onnx"), "--data", "synthetic:64", "--batch", "16",
            "--max-consecutive-skips", "3", "--save", Path("out.onnx")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("mlp.train.onnx: 3 steps in a row were skipped"));
  EXPECT_THAT(r.err, HasSubstr("up to batch 3;"));
  EXPECT_THAT(r.err,
              HasSubstr("loss scale is 1e+30; in the last batch inf/NaN first appears in '"));
  EXPECT_THAT(r.err, HasSubstr("/grad/"));
  EXPECT_THAT(r.err, HasSubstr("non-finite gradients: "));
  EXPECT_FALSE(fs::exists(Path("out.onnx")));
  // Steps are read back in groups (lines every 2 steps here), yet the run stops on the step that
  // reaches the limit, as with a read after every step.
  r = Ampc({"train", Path("mlp.train.onnx"), "--data", "synthetic:128", "--batch", "16",
            "--max-consecutive-skips", "5", "--log-every", "2"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("5 steps in a row were skipped (non-finite gradients or loss) up "
                               "to batch 5;"));
}

// --accumulate 3 over 8 batches an epoch: every epoch ends inside a window, so the checkpoint holds
// half-filled accumulators and the micro-step; resuming must continue that window bit-identically.
TEST_F(TrainCommandTest, ResumingInsideAnAccumulationWindowIsBitIdentical) {
  models::MlpOptions small;
  small.layers = {784, 16, 10};
  std::ofstream(Path("mlp.onnx"), std::ios::binary) << models::BuildMlp(small).SerializeAsString();
  auto r = Ampc(
      {Path("mlp.onnx"), "-o", Path("acc.onnx"), "--train", "--loss", "loss", "--accumulate", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto train = [&](const std::string& save, const std::string& epochs, bool resume) {
    std::vector<std::string> args = {
        "train", Path("acc.onnx"), "--data",   "synthetic:256", "--batch", "32",
        "--lr",  "0.01",           "--epochs", epochs,          "--save",  Path(save)};
    if (resume) args.push_back("--resume");
    return Ampc(args);
  };
  r = train("straight.onnx", "3", false);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("epoch 3: test accuracy"));
  EXPECT_THAT(r.out, HasSubstr(", 8 steps applied, 0 skipped"));  // 24 batches / 3
  r = train("resumed.onnx", "1", false);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(", 2 steps applied, 0 skipped"));  // 8 batches: 2 windows + 2
  r = train("resumed.onnx", "3", true);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("from step 8"));
  const std::string a = testing::ReadFileOrEmpty(Path("straight.onnx"));
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == testing::ReadFileOrEmpty(Path("resumed.onnx")));
}

// A forward softmax regression of 4 features and 3 classes, compiled with `ampc --train` and
// --train-config `config`, as Path("compiled.onnx"); and npy:DIR data of 16 training samples,
// sample 5 holding 1e6 (finite, so ampc train takes it, but beyond FP16's range: the FP16 step's
// loss is not finite and that batch's step is skipped), and 6 test samples.
class ScheduledTrainingTest : public TrainCommandTest {
 protected:
  void Compile(const std::string& config) {
    const onnx::ModelProto forward = testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] image, int64[N] label) => (float loss, float[N, 3] logits)
<float[3, 4] W = {0.1, -0.2, 0.3, 0.0, -0.1, 0.2, 0.0, 0.1, 0.05, 0.0, -0.3, 0.2},
 float[3] B = {0.0, 0.1, -0.1}>
{
  logits = Gemm <transB = 1> (image, W, B)
  loss = SoftmaxCrossEntropyLoss <reduction = "mean"> (logits, label)
}
)");
    std::ofstream(Path("forward.onnx"), std::ios::binary) << forward.SerializeAsString();
    std::ofstream(Path("cfg.json"), std::ios::binary) << config;
    auto r = Ampc({Path("forward.onnx"), "-o", Path("compiled.onnx"), "--train", "--loss=loss",
                   "--lr=0.1", "--train-config=" + Path("cfg.json")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    fs::create_directory(Path("data"));
    std::vector<float> images(16 * 4);
    std::vector<int64_t> labels(16);
    for (size_t i = 0; i < images.size(); ++i) images[i] = static_cast<float>(i % 7) / 7 - 0.4f;
    for (size_t n = 0; n < labels.size(); ++n) labels[n] = static_cast<int64_t>(n % 3);
    images[5 * 4 + 2] = 1e6f;
    auto npy = [&](const std::string& name, const Tensor& t) {
      std::ofstream(Path("data/" + name), std::ios::binary) << EncodeNpy(t);
    };
    npy("train-images.npy", testing::Floats({16, 4}, images));
    npy("train-labels.npy", testing::Int64s({16}, labels));
    images.resize(6 * 4);
    images[5 * 4 + 2] = 0;
    labels.resize(6);
    npy("test-images.npy", testing::Floats({6, 4}, images));
    npy("test-labels.npy", testing::Int64s({6}, labels));
  }
  std::vector<std::string> Train(const std::vector<std::string>& more) {
    std::vector<std::string> args = {"train",       Path("compiled.onnx"),
                                     "--data",      "npy:" + Path("data"),
                                     "--batch",     "2",
                                     "--epochs",    "2",
                                     "--log-every", "1",
                                     "--device",    "cpu"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }
  // The metrics rows after the header: step, skipped and lr of every step.
  struct Row {
    int64_t step = 0, skipped = 0;
    double lr = 0;
    std::string lr_text;
  };
  std::vector<Row> Rows(const std::string& csv_path) {
    std::vector<Row> rows;
    const std::string csv = testing::ReadFileOrEmpty(csv_path);
    for (absl::string_view line : absl::StrSplit(csv, '\n', absl::SkipEmpty())) {
      const std::vector<std::string> cells = absl::StrSplit(line, ',');
      if (cells.size() != 6 || cells[0] == "step") continue;
      Row row;
      row.lr_text = cells[5];
      EXPECT_TRUE(absl::SimpleAtoi(cells[0], &row.step) &&
                  absl::SimpleAtoi(cells[4], &row.skipped) && absl::SimpleAtod(cells[5], &row.lr))
          << line;
      rows.push_back(row);
    }
    return rows;
  }
};

TEST_F(ScheduledTrainingTest, TheScheduleAdvancesOnAppliedStepsOnly) {
  // Warm-up over 100 applied steps: the rate of a step is 0.1 * (applied steps before it + 1) /
  // 100, so every step reads the number of steps applied before it.
  Compile(R"({"schedule": {"type": "linear_warmup", "warmup_steps": 100}})");
  auto r = Ampc(Train({"--metrics", Path("m.csv")}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("epoch 2: test accuracy"));
  const std::vector<Row> rows = Rows(Path("m.csv"));
  ASSERT_EQ(rows.size(), 16u);
  int64_t skipped_before = 0, repeats = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t applied_before = rows[i].step - 1 - skipped_before;
    EXPECT_NEAR(rows[i].lr, 0.1 * static_cast<double>(applied_before + 1) / 100, 1e-9)
        << "step " << rows[i].step;
    const bool skipped = rows[i].skipped > skipped_before;
    if (skipped && i + 1 < rows.size()) {
      EXPECT_EQ(rows[i + 1].lr_text, rows[i].lr_text) << "the step after a skipped one";
      ++repeats;
    }
    skipped_before = rows[i].skipped;
  }
  EXPECT_EQ(skipped_before, 2);  // the 1e6 sample's batch, once per epoch
  EXPECT_GE(repeats, 1);
  // --lr overrides the recorded base rate; the schedule still applies.
  r = Ampc(Train({"--metrics", Path("m2.csv"), "--lr", "0.4"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<Row> again = Rows(Path("m2.csv"));
  ASSERT_FALSE(again.empty());
  EXPECT_NEAR(again[0].lr, 0.004, 1e-9);
}

TEST_F(ScheduledTrainingTest, TheRecordedSkipLimitStopsTrainingUnlessTheFlagIsGiven) {
  Compile(R"({"scaler": {"max_consecutive_skips": 1}})");
  auto r = Ampc(Train({}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("1 steps in a row were skipped"));
  r = Ampc(Train({"--max-consecutive-skips", "2"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(TrainCommandTest, SoftmaxRegressionLearnsFashionMnist) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed";
  }
  auto r = Ampc({"train", model_, "--data", "fashion-mnist", "--batch", "100", "--epochs", "1",
                 "--lr", "0.2", "--log-every", "200"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Softmax regression reaches about 0.84 on Fashion-MNIST; one epoch is well above 0.75.
  EXPECT_GT(AccuracyOfEpoch(r.out, 1), 0.75) << r.out;
}

TEST_F(TrainCommandTest, DeviceErrorsAreOneLineAndWriteNothing) {
  std::vector<std::string> args = Train(model_, "1");
  args.insert(args.end(), {"--save", Path("out.onnx"), "--device=gpu"});
  auto r = Ampc(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--device=gpu: expected cpu, cuda or auto"));
  if (!testing::CudaUsable()) {
    args.back() = "--device=cuda";
    r = Ampc(args);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_THAT(r.err, HasSubstr("--device=cuda: "));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_FALSE(fs::exists(Path("out.onnx")));
  EXPECT_EQ(testing::ReadFileOrEmpty(model_),
            testing::SoftmaxRegressionTrainingModel().SerializeAsString());
}

}  // namespace
}  // namespace ampc
