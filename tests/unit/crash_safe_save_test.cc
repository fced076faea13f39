// `ampc -o` and `ampc train --save` killed at each point of a save (AMPC_FAULT_INJECT makes the
// writer _exit(137) there, as a kill -9 would): the destination then holds the previous complete
// model or the new complete one, exactly as the point implies, never a mix; and the next save
// clears the temporary files the killed one left.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compiler/model_io.h"
#include "models/mlp.h"
#include "passes/graph/onnx_status.h"
#include "tests/support/subprocess.h"
#include "tests/support/training_models.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;

struct Kill {
  std::string point;  // AMPC_FAULT_INJECT's value
  bool new_model;     // whether the destination holds the new model afterwards
};

class CrashSafeSaveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ampc-crash-XXXXXX";
    dir_ = mkdtemp(pattern);
    fs::create_directory(dir_ / "out");
    fs::create_directory(dir_ / "ref");
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) { return (dir_ / name).string(); }
  testing::ProcessResult Ampc(std::vector<std::string> args, const std::string& fault = "") {
    args.insert(args.begin(), AMPC_BINARY);
    if (!fault.empty()) setenv("AMPC_FAULT_INJECT", fault.c_str(), 1);
    testing::ProcessResult r = testing::RunProcess(args, dir_.string());
    unsetenv("AMPC_FAULT_INJECT");
    return r;
  }
  // The model at `path` with its external data read in, after ONNX's checker; "" if it fails.
  std::string Loaded(const std::string& path) {
    absl::StatusOr<LoadedModel> loaded = LoadModel(path);
    absl::Status status = loaded.status();
    if (status.ok()) {
      status = CatchOnnx("checker", [&] { onnx::checker::check_model(loaded->model); });
    }
    EXPECT_TRUE(status.ok()) << path << ": " << status;
    return status.ok() ? loaded->model.SerializeAsString() : "";
  }
  std::vector<std::string> Files(const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_ / dir)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  // Saves `previous` then `next` (argument lists without the destination) to out/model.onnx,
  // killing the second save at each point; checks the destination after each kill and after a
  // clean save that follows.
  void CheckKills(const std::vector<std::string>& previous, const std::vector<std::string>& next,
                  const std::string& flag, const std::vector<Kill>& kills, size_t files_after) {
    const std::string out = Path("out/model.onnx"), ref = Path("ref/model.onnx");
    auto with = [&](std::vector<std::string> args, const std::string& dest) {
      args.push_back(flag);
      args.push_back(dest);
      return args;
    };
    ASSERT_EQ(Ampc(with(next, ref)).exit_code, 0);
    const std::string new_model = Loaded(ref);
    for (const Kill& kill : kills) {
      SCOPED_TRACE(kill.point);
      ASSERT_EQ(Ampc(with(previous, out)).exit_code, 0);
      const std::string old_model = Loaded(out);
      ASSERT_NE(old_model, new_model);
      testing::ProcessResult r = Ampc(with(next, out), kill.point);
      EXPECT_EQ(r.exit_code, 137) << "never reached " << kill.point << ": " << r.err;
      EXPECT_EQ(Loaded(out), kill.new_model ? new_model : old_model);
      ASSERT_EQ(Ampc(with(next, out)).exit_code, 0);
      EXPECT_EQ(Loaded(out), new_model);
      const std::vector<std::string> files = Files("out");
      EXPECT_EQ(files.size(), files_after) << ::testing::PrintToString(files);  // no stale data
      for (const std::string& file : files) EXPECT_EQ(file.find(".tmp."), std::string::npos);
    }
  }

  fs::path dir_;
};

// An inline save writes one file: the rename is the moment it changes.
const std::vector<Kill> kInlineKills = {{"after-create", false},
                                        {"after-write", false},
                                        {"before-rename", false},
                                        {"after-rename", true}};

TEST_F(CrashSafeSaveTest, CompileOutputIsTheOldModelOrTheNewOneAtEveryKillPoint) {
  std::ofstream(Path("a.onnx"), std::ios::binary)
      << models::BuildMlp({.layers = {8, 4, 2}, .seed = 1}).SerializeAsString();
  std::ofstream(Path("b.onnx"), std::ios::binary)
      << models::BuildMlp({.layers = {8, 4, 2}, .seed = 2}).SerializeAsString();
  CheckKills({Path("a.onnx")}, {Path("b.onnx")}, "-o", kInlineKills, 1);
}

// With external data a save writes two files: the data first (under the name the model in place
// does not read), then the model; the model's rename is the moment it changes.
TEST_F(CrashSafeSaveTest, ExternalDataNeverMixesTheOldModelWithTheNewData) {
  std::ofstream(Path("a.onnx"), std::ios::binary)
      << models::BuildMlp({.layers = {300, 4, 2}, .seed = 1}).SerializeAsString();
  std::ofstream(Path("b.onnx"), std::ios::binary)
      << models::BuildMlp({.layers = {300, 4, 2}, .seed = 2}).SerializeAsString();
  const std::vector<Kill> kills = {
      {"after-create:1", false}, {"after-write:1", false}, {"before-rename:1", false},
      {"after-create:2", false}, {"after-write:2", false}, {"before-rename:2", false},
      {"after-rename:1", false},  // the data file is in place, the model still reads the other
      {"after-rename:2", true},  {"before-cleanup", true}};
  // The model and the one data file it reads.
  CheckKills({Path("a.onnx"), "--external-data=always"}, {Path("b.onnx"), "--external-data=always"},
             "-o", kills, 2);
}

TEST_F(CrashSafeSaveTest, TrainSaveIsTheOldCheckpointOrTheNewOneAtEveryKillPoint) {
  std::ofstream(Path("model.train.onnx"), std::ios::binary)
      << testing::SoftmaxRegressionTrainingModel().SerializeAsString();
  // One epoch, so one save per run (each epoch saves); the seeds give different weights.
  auto train = [&](const std::string& seed) {
    return std::vector<std::string>{"train",    Path("model.train.onnx"),
                                    "--data",   "synthetic:64",
                                    "--batch",  "16",
                                    "--epochs", "1",
                                    "--seed",   seed,
                                    "--device", "cpu",
                                    "--lr",     "0.5"};
  };
  CheckKills(train("1"), train("2"), "--save", kInlineKills, 1);
}

TEST(FaultInjectionTest, IsInertWithoutTheVariable) {
  char pattern[] = "/tmp/ampc-crash-XXXXXX";
  const fs::path dir = mkdtemp(pattern);
  std::ofstream((dir / "a.onnx").string(), std::ios::binary)
      << models::BuildMlp({.layers = {8, 4, 2}}).SerializeAsString();
  unsetenv("AMPC_FAULT_INJECT");
  testing::ProcessResult r = testing::RunProcess(
      {AMPC_BINARY, (dir / "a.onnx").string(), "-o", (dir / "b.onnx").string()}, dir.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "b.onnx"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ampc
