// `ampc train` on a hand-written softmax-regression training model: it learns synthetic data,
// writes metrics and checkpoints, resumes bit-identically, and fails clearly on bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/support/subprocess.h"
#include "tests/support/training_models.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

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
  EXPECT_EQ(rows[0], "step,loss,scale,grad_norm,skipped");
  EXPECT_TRUE(absl::StartsWith(rows[4], "16,")) << rows[4];
  EXPECT_TRUE(fs::exists(Path("out.onnx")));
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
  lr->set_value("fast");
  std::ofstream(Path("bad.onnx"), std::ios::binary) << recorded.SerializeAsString();
  r = Ampc({"train", Path("bad.onnx"), "--data", "synthetic:64"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("metadata ampc.lr = 'fast' is not a positive number"));
}

TEST_F(TrainCommandTest, ErrorsAreOneLineWithTheRightExitCode) {
  auto r = Ampc({"train", model_});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("ampc train needs --data SOURCE"));
  r = Ampc({"train", model_, "--data", "imagenet"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--data imagenet: expected fashion-mnist[:DIR]"));
  onnx::ModelProto plain = testing::SoftmaxRegressionTrainingModel();
  plain.clear_training_info();
  std::ofstream(Path("plain.onnx"), std::ios::binary) << plain.SerializeAsString();
  r = Ampc({"train", Path("plain.onnx"), "--data", "synthetic:64"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("plain.onnx: the model has no training_info"));
  r = Ampc({"train", model_, "--data", "synthetic:16", "--batch", "64"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--batch 64 is larger than the training set (16 samples)"));
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
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_FALSE(std::filesystem::exists(Path("out.onnx")));
  std::ofstream(Path("old.onnx"), std::ios::binary) << "previous checkpoint";
  r = Ampc(
      {"train", model_, "--data", "synthetic:16", "--batch", "64", "--save", Path("old.onnx")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(testing::ReadFileOrEmpty(Path("old.onnx")), "previous checkpoint");
  EXPECT_EQ(testing::ReadFileOrEmpty(model_), before);
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

}  // namespace
}  // namespace ampc
