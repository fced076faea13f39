// The pass order (compiler/pipeline.h): the standard pipeline for each combination of flags, a
// --passes list with what --train and --target-opset add to it, and --print-pipeline's text. The
// expected orders are the ones docs/architecture.md describes.
#include "compiler/pipeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ampc {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The options of these command-line flags ("--dtype=fp32", "--train", "--loss-op",
// "--target-opset") and this --passes list.
PipelineOptions Flags(std::vector<std::string> flags, std::vector<std::string> passes = {}) {
  PipelineOptions options;
  for (const std::string& flag : flags) {
    if (flag == "--dtype=fp32") options.autocast = false;
    if (flag == "--train") options.train = true;
    if (flag == "--loss-op") options.loss_op = true;
    if (flag == "--target-opset") options.target_opset = true;
  }
  options.passes = std::move(passes);
  return options;
}

std::vector<std::string> Names(const PipelineOptions& options) {
  std::vector<std::string> names;
  for (const Placement& placement : PipelineFor(options)) names.push_back(placement.pass);
  return names;
}

TEST(PipelineTest, StandardOrder) {
  EXPECT_THAT(Names(Flags({})), ElementsAre("verify-input", "upgrade-opset", "infer-types",
                                            "autocast", "insert-casts", "fold-casts", "verify"));
}

TEST(PipelineTest, Fp32RunsNoCastPasses) {
  EXPECT_THAT(Names(Flags({"--dtype=fp32"})),
              ElementsAre("verify-input", "upgrade-opset", "infer-types", "verify"));
}

TEST(PipelineTest, TrainPlacesTheStepAfterTheCastPasses) {
  EXPECT_THAT(Names(Flags({"--train"})),
              ElementsAre("verify-input", "upgrade-opset", "untie", "infer-types", "lift-dropout",
                          "split-sequences", "autocast", "insert-casts", "fold-casts",
                          "dropout-mode", "training-step", "dropout-step", "verify"));
  EXPECT_THAT(
      Names(Flags({"--dtype=fp32", "--train"})),
      ElementsAre("verify-input", "upgrade-opset", "untie", "infer-types", "lift-dropout",
                  "split-sequences", "dropout-mode", "training-step", "dropout-step", "verify"));
}

TEST(PipelineTest, UntieRunsOnlyForTrainBeforeTheTypesAndTheCasts) {
  EXPECT_THAT(Names(Flags({})), ::testing::Not(::testing::Contains("untie")));
  const std::vector<Placement> train = PipelineFor(Flags({"--train"}));
  ASSERT_EQ(train[2].pass, "untie");
  EXPECT_THAT(train[2].reason, HasSubstr("--untie"));
  // A list that lacks it gets it under --train, before the types.
  EXPECT_THAT(
      Names(Flags({"--train"}, {"infer-types", "verify"})),
      ElementsAre("verify-input", "upgrade-opset", "untie", "infer-types", "lift-dropout",
                  "split-sequences", "dropout-mode", "training-step", "dropout-step", "verify"));
}

TEST(PipelineTest, LossOpIsAddedAndTypedBeforeAutocast) {
  EXPECT_THAT(Names(Flags({"--train", "--loss-op"})),
              ElementsAre("verify-input", "upgrade-opset", "untie", "infer-types", "lift-dropout",
                          "split-sequences", "loss-op", "infer-types", "autocast", "insert-casts",
                          "fold-casts", "dropout-mode", "training-step", "dropout-step", "verify"));
}

TEST(PipelineTest, APassesListRunsAfterVerifyInputAsGiven) {
  EXPECT_THAT(Names(Flags({}, {"autocast", "verify-input", "infer-types"})),
              ElementsAre("verify-input", "autocast", "infer-types"));
  // --dtype=fp32 does not remove what a list names.
  EXPECT_THAT(Names(Flags({"--dtype=fp32"}, {"autocast"})),
              ElementsAre("verify-input", "autocast"));
}

TEST(PipelineTest, TrainAddsWhatTheStepNeedsToAList) {
  EXPECT_THAT(Names(Flags({"--train"}, {"autocast", "verify"})),
              ElementsAre("verify-input", "upgrade-opset", "untie", "infer-types", "lift-dropout",
                          "split-sequences", "autocast", "dropout-mode", "training-step",
                          "dropout-step", "verify"));
  // Without verify the step goes last; with --loss-op the loss comes after the first typing.
  EXPECT_THAT(Names(Flags({"--train", "--loss-op"}, {"infer-types", "autocast"})),
              ElementsAre("verify-input", "upgrade-opset", "untie", "infer-types", "lift-dropout",
                          "split-sequences", "loss-op", "infer-types", "autocast", "dropout-mode",
                          "training-step", "dropout-step"));
  // A list that names training-step is kept as it is.
  EXPECT_THAT(Names(Flags({"--train"}, {"training-step"})),
              ElementsAre("verify-input", "training-step"));
}

TEST(PipelineTest, TargetOpsetConvertsFirstInAList) {
  EXPECT_THAT(Names(Flags({"--target-opset"}, {"infer-types"})),
              ElementsAre("verify-input", "upgrade-opset", "infer-types"));
  EXPECT_THAT(Names(Flags({"--target-opset"}, {"infer-types", "upgrade-opset"})),
              ElementsAre("verify-input", "infer-types", "upgrade-opset"));
}

TEST(PipelineTest, EveryPlacementHasAReasonNamingTheFlagThatAddedIt) {
  for (const PipelineOptions& options : {Flags({}), Flags({"--train"}), Flags({}, {"autocast"})}) {
    for (const Placement& placement : PipelineFor(options)) {
      EXPECT_FALSE(placement.reason.empty()) << placement.pass;
    }
  }
  const std::vector<Placement> listed = PipelineFor(Flags({"--target-opset"}, {"verify"}));
  EXPECT_THAT(listed[1].reason, HasSubstr("--target-opset"));
  EXPECT_EQ(listed[2].reason, "--passes");
}

TEST(PipelineTest, TextIsOneAlignedLinePerPass) {
  EXPECT_EQ(PipelineText({{"verify", "last"}, {"insert-casts", "the plan"}}),
            "verify        last\n"
            "insert-casts  the plan\n");
}

TEST(PipelineTest, CreatePipelineRefusesAnUnknownPassNamingTheKnownOnes) {
  absl::StatusOr<std::vector<std::unique_ptr<Pass>>> passes =
      CreatePipeline(PipelineFor(Flags({}, {"autocats"})), {});
  ASSERT_FALSE(passes.ok());
  EXPECT_THAT(passes.status().message(), HasSubstr("unknown pass 'autocats'; known passes: "));
  EXPECT_THAT(passes.status().message(), HasSubstr("fold-casts"));
}

}  // namespace
}  // namespace ampc
