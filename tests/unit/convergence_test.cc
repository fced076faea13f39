// Convergence (CI-sized, docs/training.md): the bundled Fashion-MNIST MLP compiled by `ampc
// --train` and trained by `ampc train` on the CPU reaches 0.85 test accuracy in FP32, FP16-AMP
// and BF16-AMP, with the same seed and data order. The full-sized runs (MLP >= 0.88, CNN >= 0.91,
// AMP within 0.5 points of FP32) are a benchmark: tools/bench-convergence.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "absl/strings/numbers.h"
#include "models/mlp.h"
#include "tests/support/subprocess.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";

class ConvergenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ConvergenceTest, MlpReachesEightyFivePercentOnFashionMnist) {
  if (!fs::exists(kFashionMnist)) GTEST_SKIP() << "Fashion-MNIST is not installed (tools/setup)";
  const std::string dtype = GetParam();
  char pattern[] = "/tmp/ampc-convergence-XXXXXX";
  const fs::path dir = mkdtemp(pattern);
  const std::string forward = (dir / "mlp.onnx").string();
  const std::string compiled = (dir / "mlp.train.onnx").string();
  std::ofstream(forward, std::ios::binary) << models::BuildMlp({}).SerializeAsString();
  auto r = testing::RunProcess({AMPC_BINARY, forward, "-o", compiled, "--train", "--loss", "loss",
                                "--dtype", dtype, "--optimizer", "adam", "--lr", "0.001"},
                               dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = testing::RunProcess(
      {AMPC_BINARY, "train", compiled, "--data", "fashion-mnist", "--batch", "64", "--epochs", "3",
       "--seed", "0", "--log-every", "500", "--device", "cpu"},
      dir.string());
  fs::remove_all(dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::smatch match;
  ASSERT_TRUE(std::regex_search(
      r.out, match,
      std::regex(R"(epoch 3: test accuracy ([0-9.]+), \d+ steps applied, (\d+) skipped)")))
      << r.out;
  double accuracy = 0;
  ASSERT_TRUE(absl::SimpleAtod(match[1].str(), &accuracy));
  EXPECT_GE(accuracy, 0.85) << dtype << "\n" << r.out;
  int64_t skipped = -1;
  ASSERT_TRUE(absl::SimpleAtoi(match[2].str(), &skipped));
  // FP16 may skip the first few steps while the scale backs off from 65536; the others never do.
  EXPECT_LE(skipped, dtype == "fp16" ? 20 : 0) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ConvergenceTest, ::testing::Values("fp32", "fp16", "bf16"));

}  // namespace
}  // namespace ampc
