// Every model of ONNX's own test suite loads, verifies and saves back without losing anything.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "compiler/model_io.h"
#include "google/protobuf/util/message_differencer.h"
#include "passes/verify_input.h"
#include "tests/support/model_text.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> CorpusModels(const std::string& folder) {
  return ampc::testing::CorpusModels(AMPC_CORPUS_DIR, folder);
}

class CorpusRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(CorpusRoundTrip, LoadVerifySaveIsLossless) {
  const std::vector<fs::path> models = CorpusModels(GetParam());
  if (models.empty()) GTEST_SKIP() << "libonnx-testdata is not installed (tools/setup installs it)";
  char pattern[] = "/tmp/ampc-corpus-XXXXXX";
  const fs::path dir = mkdtemp(pattern);
  int round_tripped = 0;
  for (const fs::path& path : models) {
    SCOPED_TRACE(path.string());
    absl::StatusOr<LoadedModel> loaded = LoadModel(path.string());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const onnx::ModelProto original = loaded->model;
    ModelContext context(loaded->model, path.string());
    absl::StatusOr<PassResult> verified = VerifyInput().Run(context);
    ASSERT_TRUE(verified.ok()) << verified.status();
    EXPECT_FALSE(verified->changed) << "the corpus is sorted; verify-input must not change it";
    const std::string out = (dir / "out.onnx").string();
    ASSERT_TRUE(SaveModel(context.model, out).ok());
    absl::StatusOr<LoadedModel> reloaded = LoadModel(out);
    ASSERT_TRUE(reloaded.ok()) << reloaded.status();
    std::string difference;
    google::protobuf::util::MessageDifferencer differencer;
    differencer.ReportDifferencesToString(&difference);
    EXPECT_TRUE(differencer.Compare(original, reloaded->model)) << difference;
    ++round_tripped;
  }
  fs::remove_all(dir);
  std::cout << GetParam() << ": " << round_tripped << " of " << models.size()
            << " models loaded, verified and saved back proto-equal\n";
  EXPECT_EQ(round_tripped, static_cast<int>(models.size()));
}

INSTANTIATE_TEST_SUITE_P(OnnxTestData, CorpusRoundTrip,
                         ::testing::Values("node", "pytorch-converted", "pytorch-operator",
                                           "simple"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace ampc
