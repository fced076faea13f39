// --train-config FILE.json: a valid file sets groups (inheriting what they leave out from the
// command line), the schedule and the scaler; every mistake is one usage-error line naming the
// file and the JSON path, and changes nothing.
#include "compiler/train_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "compiler/exit_codes.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Optimizer = TrainingOptions::Optimizer;

class TrainConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ampc-train-config-XXXXXX";
    dir_ = mkdtemp(pattern);
    path_ = (dir_ / "cfg.json").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The command line's options: adamw at lr 0.01 with the default weight decay.
  static TrainingOptions Flags() {
    TrainingOptions options;
    options.enabled = true;
    options.loss = "loss";
    options.lr = 0.01f;
    return options;
  }
  absl::Status Apply(const std::string& text, TrainingOptions& options) {
    std::ofstream(path_, std::ios::binary) << text;
    return ApplyTrainConfig(path_, options);
  }
  // `text` must fail: a usage error, one line, "PATH: " then something containing `expected`,
  // and the options unchanged.
  void ExpectError(const std::string& text, const std::string& expected) {
    TrainingOptions options = Flags();
    const absl::Status status = Apply(text, options);
    EXPECT_EQ(ExitCodeFor(status), kExitUsage) << text << "\n" << status;
    EXPECT_THAT(std::string(status.message()), StartsWith(path_ + ": ")) << text;
    EXPECT_THAT(std::string(status.message()), HasSubstr(expected)) << text;
    EXPECT_EQ(status.message().find('\n'), absl::string_view::npos) << status.message();
    EXPECT_TRUE(options.groups.empty() && options.lr_schedule.empty() &&
                options.init_scale == 65536.0f && options.max_consecutive_skips == 0)
        << "a bad file changed the options: " << text;
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(TrainConfigTest, ValidFileSetsGroupsScheduleAndScaler) {
  TrainingOptions options = Flags();
  const absl::Status status = Apply(R"({
    "comment": "no weight decay on biases; fc1 on SGD with momentum at half the rate",
    "groups": [
      {"params": ".*\\.bias", "weight_decay": 0},
      {"params": "fc1\\..*", "optimizer": "momentum", "momentum": 0.8, "nesterov": true,
       "lr_scale": 0.5},
      {"params": "emb.*", "optimizer": "adam", "betas": [0.8, 0.99], "eps": 1e-6,
       "weight_decay": 0.001, "comment": "embeddings"}
    ],
    "schedule": {"type": "cosine", "warmup_steps": 10, "total_steps": 100, "min_lr": 0.001},
    "scaler": {"init_scale": 1024, "growth_factor": 4, "backoff_factor": 0.25,
               "growth_interval": 100, "hysteresis": 2, "min_scale": 1, "max_scale": 65536,
               "max_consecutive_skips": 7}
  })",
                                    options);
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(options.groups.size(), 3u);
  const auto& bias = options.groups[0];
  EXPECT_EQ(bias.params, ".*\\.bias");
  EXPECT_EQ(bias.where, path_ + ": groups[0]");
  EXPECT_EQ(bias.optimizer, Optimizer::kAdamW);  // --optimizer's default
  EXPECT_EQ(bias.weight_decay, 0.0f);
  EXPECT_EQ(bias.lr_scale, 1.0f);
  const auto& fc1 = options.groups[1];
  EXPECT_EQ(fc1.optimizer, Optimizer::kMomentum);
  EXPECT_EQ(fc1.momentum, 0.8f);
  EXPECT_TRUE(fc1.nesterov);
  EXPECT_EQ(fc1.lr_scale, 0.5f);
  EXPECT_EQ(fc1.weight_decay, -1.0f);  // the optimizer's default: 0 for momentum
  const auto& emb = options.groups[2];
  EXPECT_EQ(emb.optimizer, Optimizer::kAdam);
  EXPECT_EQ(emb.beta1, 0.8f);
  EXPECT_EQ(emb.beta2, 0.99f);
  EXPECT_EQ(emb.epsilon, 1e-6f);
  EXPECT_EQ(emb.weight_decay, 0.001f);
  EXPECT_EQ(options.lr_schedule,
            R"({"min_lr":0.001,"total_steps":100,"type":"cosine","warmup_steps":10})");
  EXPECT_EQ(options.init_scale, 1024.0f);
  EXPECT_EQ(options.growth_factor, 4.0f);
  EXPECT_EQ(options.backoff_factor, 0.25f);
  EXPECT_EQ(options.growth_interval, 100);
  EXPECT_EQ(options.hysteresis, 2);
  EXPECT_EQ(options.min_scale, 1.0f);
  EXPECT_EQ(options.max_scale, 65536.0f);
  EXPECT_EQ(options.max_consecutive_skips, 7);
  // What the file does not name keeps the command line's value.
  EXPECT_EQ(options.optimizer, Optimizer::kAdamW);
  EXPECT_EQ(options.lr, 0.01f);
}

TEST_F(TrainConfigTest, GroupsInheritWhatTheyLeaveOutFromTheCommandLine) {
  TrainingOptions options = Flags();
  options.optimizer = Optimizer::kMomentum;  // --optimizer=momentum --weight-decay=0.05
  options.weight_decay = 0.05f;              // --momentum=0.7 --nesterov
  options.momentum = 0.7f;
  options.nesterov = true;
  ASSERT_TRUE(
      Apply(R"({"groups": [{"params": "a"}, {"params": "b", "optimizer": "adamw"}]})", options)
          .ok());
  ASSERT_EQ(options.groups.size(), 2u);
  EXPECT_EQ(options.groups[0].optimizer, Optimizer::kMomentum);
  EXPECT_EQ(options.groups[0].weight_decay, 0.05f);
  EXPECT_EQ(options.groups[0].momentum, 0.7f);
  EXPECT_TRUE(options.groups[0].nesterov);
  EXPECT_EQ(options.groups[1].optimizer, Optimizer::kAdamW);
  EXPECT_EQ(options.groups[1].weight_decay, 0.05f);
  EXPECT_EQ(options.groups[1].beta1, 0.9f);
  EXPECT_EQ(options.groups[1].beta2, 0.999f);
  EXPECT_EQ(options.groups[1].epsilon, 1e-8f);
  EXPECT_TRUE(options.lr_schedule.empty());  // no schedule: constant, nothing recorded
}

TEST_F(TrainConfigTest, FileErrors) {
  TrainingOptions options = Flags();
  const absl::Status missing = ApplyTrainConfig((dir_ / "none.json").string(), options);
  EXPECT_EQ(ExitCodeFor(missing), kExitUsage);
  EXPECT_THAT(std::string(missing.message()), HasSubstr("cannot open the --train-config file"));
  ExpectError("{\"groups\": [", "invalid JSON at the end of the file");
  ExpectError(R"({"scaler": {"init_scale": 1e400}})",
              "invalid JSON: number overflow parsing '1e400'");
  ExpectError(R"({"groups": [], "groups": []})", "\"groups\" appears twice");
  ExpectError("[]", "expected an object {\"groups\": [...]");
  ExpectError(R"({"group": []})",
              "group: unknown key (expected groups, schedule, scaler, comment)");
  ExpectError(R"({"comment": 3})", "comment: expected a string, got number 3");
}

TEST_F(TrainConfigTest, GroupErrorsNameTheJsonPath) {
  ExpectError(R"({"groups": {"params": "a"}})", "groups: expected an array of groups, got object");
  ExpectError(R"({"groups": ["a"]})", "groups[0]: expected an object {\"params\"");
  ExpectError(R"({"groups": [{"weight_decay": 0}]})",
              "groups[0].params: expected a regex (RE2, full match on parameter names), got "
              "nothing");
  ExpectError(R"({"groups": [{"params": ""}]})", "groups[0].params: expected a regex");
  ExpectError(R"({"groups": [{"params": "("}]})", "groups[0].params: '(': missing )");
  ExpectError(R"({"groups": [{"params": "a"}, {"params": "b", "wd": 0}]})",
              "groups[1].wd: unknown key (expected params, optimizer, lr_scale, weight_decay,");
  ExpectError(R"({"groups": [{"params": "a", "optimizer": "lamb"}]})",
              "groups[0].optimizer: expected \"sgd\", \"momentum\", \"adam\" or \"adamw\", got "
              "string \"lamb\"");
  ExpectError(R"({"groups": [{"params": "a", "weight_decay": "0.1"}]})",
              "groups[0].weight_decay: expected a number >= 0, got string \"0.1\"");
  ExpectError(R"({"groups": [{"params": "a", "weight_decay": -0.1}]})",
              "groups[0].weight_decay: expected a number >= 0, got number -0.1");
  ExpectError(R"({"groups": [{"params": "a", "lr_scale": 0}]})",
              "groups[0].lr_scale: expected a number > 0, got number 0");
  ExpectError(R"({"groups": [{"params": "a", "lr_scale": 1e300}]})",
              "groups[0].lr_scale: expected a number > 0, got number 1e+300");
  ExpectError(R"({"groups": [{"params": "a", "betas": [0.9]}]})",
              "groups[0].betas: expected [beta1, beta2], got array");
  ExpectError(R"({"groups": [{"params": "a", "betas": [0.9, 1.0]}]})",
              "groups[0].betas[1]: expected a number in [0, 1), got number 1.0");
  ExpectError(R"({"groups": [{"params": "a", "eps": -1e-8}]})",
              "groups[0].eps: expected a number >= 0");
  ExpectError(R"({"groups": [{"params": "a", "optimizer": "sgd", "betas": [0.9, 0.99]}]})",
              "groups[0].betas: applies to adam and adamw, not to sgd");
  ExpectError(R"({"groups": [{"params": "a", "momentum": 0.9}]})",
              "groups[0].momentum: applies to momentum, not to adamw");  // adamw from the flags
  ExpectError(R"({"groups": [{"params": "a", "optimizer": "momentum", "dampening": 2}]})",
              "groups[0].dampening: expected a number in [0, 1], got number 2");
  ExpectError(R"({"groups": [{"params": "a", "optimizer": "momentum", "nesterov": 1}]})",
              "groups[0].nesterov: expected true or false, got number 1");
  ExpectError(
      R"({"groups": [{"params": "a", "optimizer": "momentum", "momentum": 0, "nesterov": true}]})",
      "groups[0].nesterov: Nesterov momentum needs momentum > 0 and dampening 0");
}

TEST_F(TrainConfigTest, ScheduleErrorsNameTheJsonPath) {
  ExpectError(R"({"schedule": "cosine"})",
              "schedule: expected an object {\"type\": \"constant\", \"linear_warmup\", "
              "\"cosine\", ...}, got string \"cosine\"");
  ExpectError(R"({"schedule": {}})",
              "schedule.type: expected one of \"constant\", "
              "\"linear_warmup\", \"cosine\", got nothing");
  ExpectError(R"({"schedule": {"type": "step"}})",
              "schedule.type: expected one of \"constant\", \"linear_warmup\", \"cosine\", got "
              "\"step\"");
  ExpectError(R"({"schedule": {"type": "constant", "warmup_steps": 5}})",
              "schedule.warmup_steps: unknown key for type \"constant\" (it takes no other key)");
  ExpectError(R"({"schedule": {"type": "linear_warmup", "total_steps": 5, "warmup_steps": 2}})",
              "schedule.total_steps: unknown key for type \"linear_warmup\" (it takes "
              "warmup_steps)");
  ExpectError(R"({"schedule": {"type": "linear_warmup"}})",
              "schedule: \"warmup_steps\" is missing (an integer >= 1)");
  ExpectError(R"({"schedule": {"type": "linear_warmup", "warmup_steps": 1.5}})",
              "schedule.warmup_steps: expected an integer >= 1, got number 1.5");
  ExpectError(R"({"schedule": {"type": "linear_warmup", "warmup_steps": 0}})",
              "schedule.warmup_steps: expected an integer >= 1, got number 0");
  ExpectError(R"({"schedule": {"type": "cosine", "warmup_steps": 10}})",
              "schedule: \"total_steps\" is missing (an integer >= 1)");
  ExpectError(R"({"schedule": {"type": "cosine", "warmup_steps": 10, "total_steps": 10}})",
              "schedule.warmup_steps: 10 must be less than total_steps (10)");
  ExpectError(R"({"schedule": {"type": "cosine", "total_steps": 10, "min_lr": -1}})",
              "schedule.min_lr: expected a number >= 0, got number -1");
  ExpectError(R"({"schedule": {"type": "cosine", "total_steps": 10, "min_lr": 0.5}})",
              "schedule.min_lr: 0.5 is above the base learning rate --lr 0.01");
  // min_lr equal to --lr is allowed although 0.01 is not a float: both are compared as floats.
  TrainingOptions options = Flags();  // --lr 0.01
  EXPECT_TRUE(
      Apply(R"({"schedule": {"type": "cosine", "total_steps": 10, "min_lr": 0.01}})", options)
          .ok());
}

TEST_F(TrainConfigTest, ScalerErrorsNameTheJsonPath) {
  ExpectError(R"({"scaler": []})", "scaler: expected an object, got array");
  ExpectError(R"({"scaler": {"init": 1}})", "scaler.init: unknown key (expected init_scale,");
  ExpectError(R"({"scaler": {"init_scale": 0}})",
              "scaler.init_scale: expected a number >= 1.17549435e-38, got number 0");
  // A subnormal scale has an infinite inverse: unscaling would put inf into the weights.
  ExpectError(R"({"scaler": {"init_scale": 1e-40}})",
              "scaler.init_scale: expected a number >= 1.17549435e-38, got number 1e-40");
  ExpectError(R"({"scaler": {"growth_factor": 1}})",
              "scaler.growth_factor: expected a number > 1, got number 1");
  ExpectError(R"({"scaler": {"backoff_factor": 1}})",
              "scaler.backoff_factor: expected a number in (0, 1), got number 1");
  ExpectError(R"({"scaler": {"growth_interval": 0}})",
              "scaler.growth_interval: expected an integer >= 1, got number 0");
  ExpectError(R"({"scaler": {"hysteresis": true}})",
              "scaler.hysteresis: expected an integer >= 1, got boolean true");
  ExpectError(R"({"scaler": {"max_consecutive_skips": 0}})",
              "scaler.max_consecutive_skips: expected an integer >= 1, got number 0");
  ExpectError(R"({"scaler": {"min_scale": 8, "max_scale": 4, "init_scale": 4}})",
              "scaler.min_scale: 8 is above max_scale (4)");
  ExpectError(R"({"scaler": {"max_scale": 1024}})",
              "scaler.init_scale: 65536 is above max_scale (1024)");
  TrainingOptions options = Flags();
  options.loss_scale = TrainingOptions::LossScale::kStatic;  // --loss-scale=static:128
  options.init_scale = 128;
  const absl::Status status = Apply(R"({"scaler": {"init_scale": 1024}})", options);
  EXPECT_EQ(ExitCodeFor(status), kExitUsage);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("scaler.init_scale: --loss-scale=static:V sets the scale too; give one"));
  EXPECT_EQ(options.init_scale, 128.0f);
}

}  // namespace
}  // namespace ampc
