// The `ampc` binary on bad input and bad usage: exit code, one clear line naming the file and the
// node/value, and nothing written.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "compiler/model_io.h"
#include "models/mlp.h"
#include "tests/support/subprocess.h"
#include "tests/support/training_models.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ampc-cli-XXXXXX";
    dir_ = mkdtemp(pattern);
    out_ = (dir_ / "out.onnx").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  testing::ProcessResult Ampc(std::vector<std::string> args) {
    args.insert(args.begin(), AMPC_BINARY);
    return testing::RunProcess(args, dir_.string());
  }
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  std::string WriteModel(const std::string& name, const onnx::ModelProto& model) {
    return Write(name, model.SerializeAsString());
  }
  // A failed run leaves only the files the test made.
  void ExpectNothingWritten(size_t files_made) {
    EXPECT_FALSE(fs::exists(out_));
    EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator{}), files_made);
  }
  // Exactly one diagnostic line, naming `file`.
  void ExpectOneLine(const testing::ProcessResult& r, const std::string& file) {
    EXPECT_THAT(r.err, HasSubstr(file + ": "));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }

  fs::path dir_;
  std::string out_;
};

TEST_F(CliTest, MissingFile) {
  const std::string path = (dir_ / "absent.onnx").string();
  auto r = Ampc({path, "-o", out_});
  EXPECT_EQ(r.exit_code, 1);
  ExpectOneLine(r, path);
  ExpectNothingWritten(0);
}

// As root every file is readable, so the run drops to user nobody with setpriv (util-linux).
TEST_F(CliTest, UnreadableFile) {
  const std::string path = WriteModel("locked.onnx", models::BuildMlp());
  fs::permissions(path, fs::perms::none);
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  std::vector<std::string> argv = {AMPC_BINARY, path, "-o", out_};
  if (::geteuid() == 0) {
    if (!fs::exists("/usr/bin/setpriv")) GTEST_SKIP() << "running as root without setpriv";
    argv.insert(argv.begin(),
                {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"});
  }
  auto r = testing::RunProcess(argv, dir_.string());
  if (r.err.starts_with("setpriv:")) GTEST_SKIP() << "user nobody cannot run ampc here: " << r.err;
  EXPECT_EQ(r.exit_code, 1);
  ExpectOneLine(r, path);
  EXPECT_THAT(r.err, HasSubstr("Permission denied"));
  ExpectNothingWritten(1);
}

TEST_F(CliTest, Directory) {
  fs::create_directory(dir_ / "sub.onnx");
  auto r = Ampc({(dir_ / "sub.onnx").string(), "-o", out_});
  EXPECT_EQ(r.exit_code, 1);
  ExpectOneLine(r, (dir_ / "sub.onnx").string());
  EXPECT_THAT(r.err, HasSubstr("directory"));
  ExpectNothingWritten(1);
}

TEST_F(CliTest, EmptyFile) {
  const std::string path = Write("empty.onnx", "");
  auto r = Ampc({path, "-o", out_});
  EXPECT_EQ(r.exit_code, 1);
  ExpectOneLine(r, path);
  EXPECT_THAT(r.err, HasSubstr("empty"));
  ExpectNothingWritten(1);
}

TEST_F(CliTest, RandomBytes) {
  std::string bytes(4096, '\0');
  uint32_t state = 12345;
  for (char& c : bytes) c = static_cast<char>((state = state * 1664525u + 1013904223u) >> 24);
  const std::string path = Write("random.onnx", bytes);
  auto r = Ampc({path, "-o", out_});
  EXPECT_EQ(r.exit_code, 1);
  ExpectOneLine(r, path);
  ExpectNothingWritten(1);
}

TEST_F(CliTest, TruncatedModel) {
  const std::string full = models::BuildMlp().SerializeAsString();
  const std::string path = Write("truncated.onnx", full.substr(0, full.size() / 2));
  auto r = Ampc({path, "-o", out_});
  EXPECT_EQ(r.exit_code, 1);
  ExpectOneLine(r, path);
  ExpectNothingWritten(1);
}

TEST_F(CliTest, TextInsteadOfProtobuf) {
  const std::string path = Write("model.onnx",
                                 "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                                 "g (float[2] X) => (float[2] Y) { Y = Relu(X) }\n");
  auto r = Ampc({path, "-o", out_});
  EXPECT_EQ(r.exit_code, 1);
  ExpectOneLine(r, path);
  EXPECT_THAT(r.err, HasSubstr("text"));
  ExpectNothingWritten(1);
}

TEST_F(CliTest, MissingExternalDataFile) {
  onnx::ModelProto model = models::BuildMlp();
  onnx::TensorProto* weight = model.mutable_graph()->mutable_initializer(0);
  weight->clear_raw_data();
  weight->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* entry = weight->add_external_data();
  entry->set_key("location");
  entry->set_value("weights.bin");
  const std::string path = WriteModel("ext.onnx", model);
  auto r = Ampc({path, "-o", out_});
  EXPECT_EQ(r.exit_code, 1);
  ExpectOneLine(r, path);
  EXPECT_THAT(r.err, HasSubstr("weights.bin"));
  EXPECT_THAT(r.err, HasSubstr(weight->name()));
  ExpectNothingWritten(1);
}

TEST_F(CliTest, ShortExternalDataFile) {
  onnx::ModelProto model = models::BuildMlp();
  onnx::TensorProto* weight = model.mutable_graph()->mutable_initializer(0);
  const std::string data = weight->raw_data();
  weight->clear_raw_data();
  weight->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* entry = weight->add_external_data();
  entry->set_key("location");
  entry->set_value("weights.bin");
  Write("weights.bin", data.substr(0, data.size() - 4));
  const std::string path = WriteModel("ext.onnx", model);
  auto r = Ampc({path, "-o", out_});
  EXPECT_EQ(r.exit_code, 1);
  ExpectOneLine(r, path);
  EXPECT_THAT(r.err, HasSubstr(weight->name()));
  ExpectNothingWritten(2);
}

TEST_F(CliTest, ValidModelIsWrittenWithASummaryLine) {
  const std::string path = WriteModel("mlp.onnx", models::BuildMlp());
  auto r = Ampc({path, "-o", out_});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out_));
  EXPECT_EQ(r.out, "");  // diagnostics go to stderr only
  EXPECT_THAT(r.err, HasSubstr(out_));
}

TEST_F(CliTest, OutputEqualToInputIsRefused) {
  const std::string path = WriteModel("mlp.onnx", models::BuildMlp());
  const std::string before = testing::ReadFileOrEmpty(path);
  auto r = Ampc({path, "-o", path});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("input"));
  EXPECT_EQ(testing::ReadFileOrEmpty(path), before);
  auto again = Ampc({path, "-o", (dir_ / "." / "mlp.onnx").string()});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_EQ(testing::ReadFileOrEmpty(path), before);
}

TEST_F(CliTest, UnwritableOutputIsAnIoError) {
  const std::string path = WriteModel("mlp.onnx", models::BuildMlp());
  auto r = Ampc({path, "-o", (dir_ / "no-such-dir" / "out.onnx").string()});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.err, HasSubstr("no-such-dir"));
  ExpectNothingWritten(1);
}

TEST_F(CliTest, ReportThatCannotBeWrittenFailsTheRunBeforeTheModelIsSaved) {
  const std::string path = WriteModel("mlp.onnx", models::BuildMlp());
  const std::string before = testing::ReadFileOrEmpty(path);
  fs::create_directory(dir_ / "a-dir");
  const struct {
    std::string report;
    int exit_code;
  } cases[] = {{(dir_ / "no-such-dir" / "r.json").string(), 3},
               {(dir_ / "a-dir").string(), 3},
               {path, 2},
               {out_, 2}};
  for (const auto& c : cases) {
    for (const bool explain : {false, true}) {
      if (explain && c.report == out_) continue;  // explain writes no model
      auto r = explain ? Ampc({"explain", path, "--report=" + c.report})
                       : Ampc({path, "-o", out_, "--report=" + c.report});
      EXPECT_EQ(r.exit_code, c.exit_code) << c.report << r.err;
      ExpectOneLine(r, c.report);
      ExpectNothingWritten(2);
      EXPECT_EQ(testing::ReadFileOrEmpty(path), before);
    }
  }
}

TEST_F(CliTest, TrainingFlagErrorsWriteNothingAndLeaveTheInputAlone) {
  const std::string path = WriteModel("mlp.onnx", models::BuildMlp());
  const std::string before = testing::ReadFileOrEmpty(path);
  struct Case {
    std::vector<std::string> flags;
    int exit_code;
    std::string message;
  };
  const Case cases[] = {
      {{"--train"}, 2, "--train needs --loss=NAME"},
      {{"--loss=loss"}, 2, "--loss needs --train"},
      {{"--train", "--loss=loss", "--loss-scale=huge"}, 2, "--loss-scale=huge: expected dynamic"},
      {{"--train", "--loss=loss", "--loss-scale=static:1e-40"},  // 1/scale would be inf
       2,
       "--loss-scale=static:1e-40: expected dynamic"},
      {{"--train", "--loss=loss", "--optimizer=sgd", "--momentum=0.9"},
       2,
       "--momentum applies to --optimizer=momentum (or a --train-config group"},
      {{"--train", "--loss=loss", "--nesterov"}, 2, "--nesterov applies to --optimizer=momentum"},
      {{"--train", "--loss=loss", "--accumulate=0"},
       2,
       "--accumulate=0: expected a count of micro-batches from 1 to 16777216"},
      {{"--train", "--loss=loss", "--dtype=fp8"}, 2, "--dtype=fp8: expected fp16, bf16 or fp32"},
      {{"--train", "--loss=nothing"}, 1, "--loss=nothing: no such value in the graph"},
      {{"--train", "--loss=logits"}, 1, "--loss=logits: the loss must be a scalar"},
      {{"--loss-op=cross_entropy:logits"}, 2, "--loss-op needs --train"},
      {{"--optimizer=adam"}, 2, "--optimizer needs --train"},
      {{"--lr=0.1"}, 2, "--lr needs --train"},
      {{"--train", "--loss=loss", "--lr=inf"}, 2, "--lr must be a finite number > 0"},
      {{"--train", "--loss=loss", "--optimizer=momentum", "--momentum=nan"},
       2,
       "--momentum must be a finite number >= 0"},
      {{"--train", "--loss=loss", "--weight-decay=-0.5"},
       2,
       "--weight-decay must be a finite number >= 0"},
      {{"--train", "--loss=loss", "--weight-decay=-1"},  // the flag's default, but given
       2,
       "--weight-decay must be a finite number >= 0"},
      {{"--momentum=0.9"}, 2, "--momentum needs --train"},
      {{"--train", "--loss=loss", "--optimizer=momentum", "--momentum=0", "--nesterov"},
       2,
       "--nesterov needs --momentum > 0"},
      {{"--train", "--loss=loss", "--loss-op=cross_entropy:logits"},
       2,
       "--loss and --loss-op exclude each other"},
      {{"--train", "--loss-op=softmax:logits"},
       2,
       "--loss-op=softmax:logits: expected cross_entropy:LOGITS, causal_lm:LOGITS or mse:OUTPUT"},
      {{"--train", "--loss-op=mse:"}, 2, "--loss-op=mse:: expected cross_entropy:LOGITS"},
      {{"--train", "--loss-op=cross_entropy:nothing"},
       1,
       path + ": --loss-op=cross_entropy:nothing: no value 'nothing'"},
      {{"--train", "--loss-op=mse:label"},
       1,
       path + ": --loss-op=mse:label: 'label' is not a float tensor (element type INT64)"},
      {{"--train", "--loss-op=cross_entropy:loss"},
       1,
       path + ": --loss-op=cross_entropy:loss: 'loss' has rank 0; cross_entropy takes logits"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {path, "-o", out_};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    auto r = Ampc(args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.message << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    ExpectNothingWritten(1);
    EXPECT_EQ(testing::ReadFileOrEmpty(path), before);
  }
}

// Saving renames a new file into place, which would replace a FIFO or device by a regular file.
TEST_F(CliTest, SpecialFilesAreNotReplaced) {
  const std::string path = WriteModel("mlp.onnx", models::BuildMlp());
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{path, "-o", fifo},
        std::vector<std::string>{"explain", path, "--report=" + fifo}}) {
    auto r = Ampc(args);
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_THAT(r.err, HasSubstr(fifo + ": cannot write: not a regular file"));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(fs::is_fifo(fifo));
    EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator{}), 2);
  }
}

// The input's external data is input too: no output, report or new data file may replace it.
TEST_F(CliTest, TheInputsExternalDataIsNeverOverwritten) {
  const std::string model = (dir_ / "xe.onnx").string(), data = model + ".data";
  ASSERT_TRUE(
      SaveModel(models::BuildMlp(), model, {.external_data = SaveOptions::ExternalData::kAlways})
          .ok());
  const std::string before = testing::ReadFileOrEmpty(data);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{model, "-o", data},
        std::vector<std::string>{model, "-o", out_, "--report=" + data},
        std::vector<std::string>{"explain", model, "--report=" + data}}) {
    auto r = Ampc(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr(data + " is an input of this run"));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(testing::ReadFileOrEmpty(data), before);
    EXPECT_FALSE(fs::exists(out_));
  }
  // A model whose data file is the one the output would take by default: the output's data goes
  // to the other name, and the input still loads.
  const std::string input = (dir_ / "a.onnx").string(), taken = out_ + ".data";
  ASSERT_TRUE(
      SaveModel(models::BuildMlp(), out_, {.external_data = SaveOptions::ExternalData::kAlways})
          .ok());
  fs::rename(out_, input);
  const std::string taken_before = testing::ReadFileOrEmpty(taken);
  auto r = Ampc({input, "-o", out_, "--external-data=always"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::ReadFileOrEmpty(taken), taken_before);
  EXPECT_TRUE(fs::exists(out_ + ".alt.data"));
  EXPECT_TRUE(LoadModel(input).ok());
  EXPECT_TRUE(LoadModel(out_).ok());
}

// Every file a run reads is an input it never overwrites: the policy, the training config.
TEST_F(CliTest, NoFileTheRunReadsIsOverwritten) {
  const std::string path = WriteModel("mlp.onnx", models::BuildMlp());
  const std::string policy = Write("pol.json", R"({"version": 1, "ops": {}})");
  const std::string config = Write("tc.json", R"({"scaler": {"init_scale": 1024}})");
  const std::vector<std::string> cases[] = {
      {path, "-o", out_, "--policy=" + policy, "--report=" + policy},
      {path, "-o", policy, "--policy=" + policy},
      {"explain", path, "--policy=" + policy, "--report=" + policy},
      {path, "-o", out_, "--train", "--loss=loss", "--train-config=" + config,
       "--report=" + config},
  };
  for (const std::vector<std::string>& args : cases) {
    auto r = Ampc(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr(" is an input of this run; ampc never overwrites its input"));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(testing::ReadFileOrEmpty(policy), R"({"version": 1, "ops": {}})");
    EXPECT_EQ(testing::ReadFileOrEmpty(config), R"({"scaler": {"init_scale": 1024}})");
    EXPECT_FALSE(fs::exists(out_));
  }
  // The report may not take the name of the output's external data either.
  auto r = Ampc({path, "-o", out_, "--external-data=always", "--report=" + out_ + ".data"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("the report needs a file of its own"));
  EXPECT_FALSE(fs::exists(out_));
}

// A training model's training_info is input too: compile, extract-step and train refuse a broken
// one in one line naming the file and the graph, before any work.
TEST_F(CliTest, BrokenTrainingInfoIsRefusedByEveryCommand) {
  const onnx::ModelProto good = testing::SoftmaxRegressionTrainingModel();
  struct Case {
    std::string name, message;
    std::function<void(onnx::ModelProto&)> corrupt;
  };
  const Case cases[] = {
      {"dangling", "training_info[0].algorithm: ",
       [](onnx::ModelProto& m) {
         m.mutable_training_info(0)->mutable_algorithm()->mutable_node(0)->set_input(0, "nowhere");
       }},
      {"unknown_op", "training_info[0].algorithm: No Op registered for Frobnicate",
       [](onnx::ModelProto& m) {
         m.mutable_training_info(0)->mutable_algorithm()->mutable_node(0)->set_op_type(
             "Frobnicate");
       }},
      {"binding", "training_info[0].update_binding: 'nothing' is neither an initializer",
       [](onnx::ModelProto& m) {
         m.mutable_training_info(0)->mutable_update_binding(0)->set_key("nothing");
       }},
      {"two", "the model has 2 training_info entries; ampc reads one",
       [](onnx::ModelProto& m) { *m.add_training_info() = m.training_info(0); }},
  };
  ASSERT_EQ(Ampc({WriteModel("good.onnx", good), "-o", out_}).exit_code, 0);
  fs::remove(out_);
  for (const Case& c : cases) {
    onnx::ModelProto model = good;
    c.corrupt(model);
    const std::string path = WriteModel(c.name + ".onnx", model);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{path, "-o", out_},
          std::vector<std::string>{"extract-step", path, "-o", out_},
          std::vector<std::string>{"train", path, "--data", "synthetic:64", "--save", out_}}) {
      auto r = Ampc(args);
      EXPECT_EQ(r.exit_code, 1) << args[0] << " " << c.name << ": " << r.err;
      EXPECT_THAT(r.err, HasSubstr(path + ": " + c.message)) << args[0];
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
      EXPECT_FALSE(fs::exists(out_));
    }
  }
}

// Output that cannot reach stdout is a failed run (exit 3), not a silent success.
TEST_F(CliTest, AFullStdoutIsAnError) {
  const std::string path = WriteModel("mlp.onnx", models::BuildMlp());
  for (const std::string& command : {"print " + path, "explain " + path, std::string("--help")}) {
    auto r = testing::RunProcess(
        {"/bin/sh", "-c", std::string(AMPC_BINARY) + " " + command + " > /dev/full"},
        dir_.string());
    EXPECT_EQ(r.exit_code, 3) << command << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("ampc: error: cannot write to standard output")) << command;
  }
}

TEST_F(CliTest, RunThatFailsCreatesNoOutputDir) {
  const std::string path = WriteModel("mlp.onnx", models::BuildMlp());
  auto r = Ampc({"run", path, "--input", "image=" + (dir_ / "missing.npy").string(), "--input",
                 "label=" + (dir_ / "missing.npy").string(), "--output-dir",
                 (dir_ / "outputs").string()});
  EXPECT_EQ(r.exit_code, 1);
  ExpectOneLine(r, (dir_ / "missing.npy").string());
  ExpectNothingWritten(1);
}

// verify only checks: the output check of the passes' changes (the default) and the full ONNX
// check write the same model.
TEST_F(CliTest, BothOutputChecksWriteTheSameModel) {
  const std::string path = WriteModel("mlp.onnx", models::BuildMlp());
  const std::string full = (dir_ / "full.onnx").string();
  auto changes = Ampc({path, "-o", out_, "--verify=changes"});
  ASSERT_EQ(changes.exit_code, 0) << changes.err;
  auto checked = Ampc({path, "-o", full, "--verify=full"});
  ASSERT_EQ(checked.exit_code, 0) << checked.err;
  EXPECT_FALSE(testing::ReadFileOrEmpty(out_).empty());
  EXPECT_EQ(testing::ReadFileOrEmpty(out_), testing::ReadFileOrEmpty(full));
}

TEST_F(CliTest, UsageErrors) {
  const std::string path = WriteModel("mlp.onnx", models::BuildMlp());
  EXPECT_EQ(Ampc({}).exit_code, 2);
  EXPECT_EQ(Ampc({path}).exit_code, 2);                          // no -o
  auto typo = Ampc({path, "-o", out_, "--block-op=Gemm,gemm"});  // a typo used to do nothing
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_THAT(typo.err, HasSubstr("--block-op=gemm: no op gemm in the default domain"));
  // A flag the command does not read is refused rather than ignored.
  const std::pair<std::vector<std::string>, std::string> ignored[] = {
      {{"run", path, "-o", out_}, "-o does not apply to ampc run"},
      {{"train", path, "--dtype=bf16", "--data=synthetic"}, "--dtype does not apply to ampc train"},
      {{"explain", path, "-o", out_}, "-o does not apply to ampc explain"},
      {{"print", path, "--low-io"}, "--low-io does not apply to ampc print"},
      {{"extract-step", path, "-o", out_, "--report=r.json"},
       "--report does not apply to ampc extract-step"},
      {{path, "-o", out_, "--epochs=3"}, "--epochs does not apply to compiling"},
  };
  for (const auto& [args, message] : ignored) {
    auto r = Ampc(args);
    EXPECT_EQ(r.exit_code, 2) << message;
    EXPECT_THAT(r.err, HasSubstr(message));
    ExpectNothingWritten(1);
  }
  auto command = Ampc({"frobnicate"});
  EXPECT_EQ(command.exit_code, 2);
  EXPECT_THAT(command.err, HasSubstr("'frobnicate' is neither a command (explain, print, run"));
  auto unknown = Ampc({path, "-o", out_, "--frobnicate"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("--frobnicate"));
  auto pass = Ampc({path, "-o", out_, "--passes=no-such-pass"});
  EXPECT_EQ(pass.exit_code, 2);
  EXPECT_THAT(pass.err, HasSubstr("no-such-pass"));
  EXPECT_EQ(Ampc({path, "-o", out_, "--print-after=no-such-pass"}).exit_code, 2);
  EXPECT_EQ(Ampc({path, "-o", out_, "--external-data=sometimes"}).exit_code, 2);
  auto verify = Ampc({path, "-o", out_, "--verify=bad"});
  EXPECT_EQ(verify.exit_code, 2);
  EXPECT_THAT(verify.err, HasSubstr("--verify=bad: expected changes or full"));
  EXPECT_EQ(Ampc({path, "extra", "-o", out_}).exit_code, 2);
  EXPECT_EQ(Ampc({path, "-o"}).exit_code, 2);
  ExpectNothingWritten(1);
}

TEST_F(CliTest, HelpDocumentsExitCodesAndVersionNamesOnnx) {
  auto help = Ampc({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("Exit codes"));
  EXPECT_THAT(help.out, HasSubstr("3  the output could not be written"));
  auto version = Ampc({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_THAT(version.out, HasSubstr("(ONNX 1.23.2, IR version 14, default-domain opsets up to 28, "
                                     "ai.onnx.ml up to 5)"));
  EXPECT_THAT(version.out, HasSubstr("CUDA"));
}

TEST_F(CliTest, PrintWritesCanonicalTextToStdout) {
  const std::string path = WriteModel("mlp.onnx", models::BuildMlp());
  auto r = Ampc({"print", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Gemm"));
  EXPECT_THAT(r.out, HasSubstr("SoftmaxCrossEntropyLoss"));
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(Ampc({"print"}).exit_code, 2);
  EXPECT_EQ(Ampc({"print", (dir_ / "absent.onnx").string()}).exit_code, 1);
}

TEST_F(CliTest, PrintAfterPassGoesToStdout) {
  const std::string path = WriteModel("mlp.onnx", models::BuildMlp());
  auto r = Ampc({path, "--print-after=verify-input"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Gemm"));
  auto all = Ampc({path, "-o", out_, "--passes=infer-types", "--print-after=all"});
  EXPECT_EQ(all.exit_code, 0) << all.err;
  EXPECT_THAT(all.out, HasSubstr("# after verify-input"));
  EXPECT_THAT(all.out, HasSubstr("# after infer-types"));
}

TEST_F(CliTest, TargetOpsetUpgradesEvenWithAPassesList) {
  const std::string path = WriteModel("mlp.onnx", models::BuildMlp());  // opset 17, IR 8
  auto r = Ampc({path, "-o", out_, "--passes=infer-types", "--target-opset=23"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("IR 8 -> 11, opset 17 -> 23"));
  absl::StatusOr<LoadedModel> upgraded = LoadModel(out_);
  ASSERT_TRUE(upgraded.ok()) << upgraded.status();
  EXPECT_EQ(upgraded->model.ir_version(), 11);
  EXPECT_EQ(upgraded->model.opset_import(0).version(), 23);
  for (const char* opset : {"--target-opset=12", "--target-opset=29"}) {
    auto bad = Ampc({path, "-o", out_, opset});
    EXPECT_EQ(bad.exit_code, 2) << opset;
    EXPECT_THAT(bad.err, HasSubstr("expected an opset from 13 to 28")) << opset;
  }
  EXPECT_EQ(Ampc({"run", path, "--target-opset=22"}).exit_code, 2);  // a compile flag
}

TEST_F(CliTest, PrintPipelineListsThePassesTheFlagsRunAndReadsNoModel) {
  auto r = Ampc({"missing.onnx", "--print-pipeline", "--train", "--loss-op=mse:y"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  std::vector<std::string> passes;
  for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipEmpty())) {
    passes.emplace_back(line.substr(0, line.find(' ')));
  }
  EXPECT_THAT(passes, ::testing::ElementsAre(
                          "verify-input", "upgrade-opset", "untie", "infer-types", "lift-dropout",
                          "split-sequences", "loss-op", "infer-types", "autocast", "insert-casts",
                          "fold-casts", "dropout-mode", "training-step", "dropout-step", "verify"));
  EXPECT_THAT(r.out, HasSubstr("--loss-op: adds the loss"));
  EXPECT_EQ(Ampc({"--print-pipeline", "--dtype=fp32"}).out.find("autocast"), std::string::npos);
  auto bad = Ampc({"--print-pipeline", "--passes=autocats"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("unknown pass 'autocats'"));
  EXPECT_EQ(Ampc({"run", "m.onnx", "--print-pipeline"}).exit_code, 2);  // not a run flag
}

TEST_F(CliTest, TimePassesPrintsOneLinePerStep) {
  const std::string path = WriteModel("mlp.onnx", models::BuildMlp());
  auto r = Ampc({path, "-o", out_, "--time-passes"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  for (const char* step : {"load", "verify-input", "infer-types", "autocast", "insert-casts",
                           "fold-casts", "verify", "save"}) {
    EXPECT_THAT(r.err, HasSubstr(std::string("ampc: time: ") + step + " ")) << step;
  }
  EXPECT_THAT(Ampc({path, "-o", out_}).err, ::testing::Not(HasSubstr("ampc: time:")));
}

// Known peer failure: external-data weights silently left unconverted. They are read, converted
// and written back as external data.
TEST_F(CliTest, ExternalDataWeightsAreConverted) {
  const std::string path = WriteModel("mlp.onnx", models::BuildMlp());
  const std::string external = (dir_ / "ext.onnx").string();
  ASSERT_EQ(
      Ampc({path, "-o", external, "--passes=verify-input", "--external-data=always"}).exit_code, 0);
  ASSERT_TRUE(fs::exists(external + ".data"));
  auto r = Ampc({external, "-o", out_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out_ + ".data"));  // the input used external data, so does the output
  absl::StatusOr<LoadedModel> loaded = LoadModel(out_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  int fp16 = 0;
  for (const onnx::TensorProto& weight : loaded->model.graph().initializer()) {
    EXPECT_EQ(weight.data_type(), onnx::TensorProto::FLOAT16) << weight.name();
    fp16 += weight.data_type() == onnx::TensorProto::FLOAT16;
  }
  EXPECT_EQ(fp16, 6);
}

TEST_F(CliTest, SameInputGivesByteIdenticalOutput) {
  const std::string path = WriteModel("mlp.onnx", models::BuildMlp());
  const std::string second = (dir_ / "second.onnx").string();
  ASSERT_EQ(Ampc({path, "-o", out_}).exit_code, 0);
  ASSERT_EQ(Ampc({path, "-o", second}).exit_code, 0);
  EXPECT_EQ(testing::ReadFileOrEmpty(out_), testing::ReadFileOrEmpty(second));
}

}  // namespace
}  // namespace ampc
