// BatchNormalization's batch statistics and BatchNormalizationGrad's sums, several channels side
// by side (LaneSums, kStatLanes, kGradLanes): each channel still sums in reduce::ChunkedSum's
// order, so the statistics equal ReduceMean's bit for bit, and nothing depends on the thread count.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/substitute.h"
#include "kernels/cpu/lane_sums.h"
#include "tests/support/grad_op_check.h"

namespace ampc {
namespace {

using testing::ModelOf;
using testing::Pseudo;
using testing::ToTensor;

TEST(LaneSumsTest, EveryLaneIsChunkedSumWhateverPiecesTheTermsComeIn) {
  // Values spanning 2^-12..2^12 so that the order of float adds shows in the low bits.
  std::vector<float> terms(3 * reduce::kSumChunk + 5);
  uint32_t seed = 7;
  for (float& t : terms) {
    seed = seed * 1664525u + 1013904223u;
    t = static_cast<float>(seed >> 8) * 0x1p-24f * static_cast<float>(1 << (seed % 24)) * 0x1p-12f;
  }
  for (int64_t n : {int64_t{1}, reduce::kSumChunk - 1, reduce::kSumChunk, reduce::kSumChunk + 1,
                    static_cast<int64_t>(terms.size())}) {
    for (int64_t piece : {int64_t{1}, int64_t{784}, int64_t{4096}, int64_t{5000}}) {
      LaneSums<float, 2> sums;
      for (int64_t begin = 0; begin < n; begin += piece) {
        sums.Add(std::min(piece, n - begin), [&](int k, int64_t j) {
          return k == 0 ? terms[begin + j] : -2 * terms[begin + j];
        });
      }
      const float lane0 = reduce::ChunkedSum<float>(n, [&](int64_t j) { return terms[j]; });
      const float lane1 = reduce::ChunkedSum<float>(n, [&](int64_t j) { return -2 * terms[j]; });
      EXPECT_EQ(sums.Result(0), lane0) << n << " terms in pieces of " << piece;
      EXPECT_EQ(sums.Result(1), lane1) << n << " terms in pieces of " << piece;
    }
  }
}

std::vector<Tensor> RunWith(int threads, const onnx::ModelProto& model,
                            const std::vector<Tensor>& inputs) {
  CpuBackend backend(threads);
  RegisterGradientOpSchemas();
  auto session = Session::Create(model, DefaultRegistry(), backend);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return {};
  auto out = (*session)->Run(inputs);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  std::vector<Tensor> host;  // copies: the backend goes away
  for (const Tensor& t : *out) {
    Tensor h = Tensor::Host(t.dtype(), t.shape());
    std::memcpy(h.raw(), t.raw(), t.bytes());
    host.push_back(std::move(h));
  }
  return host;
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

// The outputs at 1 thread, after checking them bit for bit against 2 and 3 threads.
std::vector<Tensor> ThreadIndependent(const onnx::ModelProto& model,
                                      const std::vector<Tensor>& inputs) {
  std::vector<Tensor> one = RunWith(1, model, inputs);
  for (int threads : {2, 3}) {
    std::vector<Tensor> other = RunWith(threads, model, inputs);
    EXPECT_EQ(one.size(), other.size());
    for (size_t i = 0; i < one.size() && i < other.size(); ++i) {
      EXPECT_TRUE(SameBits(one[i], other[i])) << "output " << i << " at " << threads << " threads";
    }
  }
  return one;
}

TEST(BatchNormLanesTest, GradientSumsAndDxDoNotDependOnTheThreadCount) {
  // 6 channels: one group of 4 side by side and 2 alone; planes of 700 span two blocks.
  for (DType dtype : {DType::kFloat, DType::kFloat16}) {
    const onnx::ModelProto model = ModelOf(R"(
g ($T[5, 6, 700] dy, $T[5, 6, 700] x, $T[6] s, float[6] m, float[6] r)
  => ($T[5, 6, 700] dx, $T[6] ds, $T[6] db) {
  dx, ds, db = ai.ampc.BatchNormalizationGrad(dy, x, s, m, r)
}
)",
                                           dtype);
    const std::vector<Tensor> out =
        ThreadIndependent(model, {ToTensor(Pseudo(dtype, {5, 6, 700}, -1, 1, 11)),
                                  ToTensor(Pseudo(dtype, {5, 6, 700}, -3, 5, 12)),
                                  ToTensor(Pseudo(dtype, {6}, 0.5, 2, 13)),
                                  ToTensor(Pseudo(DType::kFloat, {6}, -1, 1, 14)),
                                  ToTensor(Pseudo(DType::kFloat, {6}, 0.5, 2, 15))});
    EXPECT_EQ(out.size(), 3u);
  }
}

// 11 channels: one group of 8 side by side and 3 alone; 3 x 2000 values per channel cross a
// chunk boundary inside a row.
TEST(BatchNormLanesTest, BatchStatisticsAreReduceMeansAtAnyThreadCount) {
  for (DType dtype : {DType::kFloat, DType::kFloat16, DType::kBFloat16}) {
    // momentum 0: the running statistics are the batch ones, rounded once to the output type.
    const onnx::ModelProto model = ModelOf(R"(
g ($T[3, 11, 40, 50] x, $T[11] s, $T[11] b, $T[11] m, $T[11] v)
  => ($T[3, 11, 40, 50] y, float[1, 11, 1, 1] mean, float[1, 11, 1, 1] var, $T[11] rm, $T[11] rv) {
  y, rm, rv = BatchNormalization<training_mode = 1, momentum = 0.0>(x, s, b, m, v)
  xf = Cast<to = 1>(x)
  mean = ReduceMean<axes = [0, 2, 3]>(xf)
  d = Sub(xf, mean)
  sq = Mul(d, d)
  var = ReduceMean<axes = [0, 2, 3]>(sq)
}
)",
                                           dtype);
    const Shape p = {11};
    const std::vector<Tensor> out = ThreadIndependent(
        model, {ToTensor(Pseudo(dtype, {3, 11, 40, 50}, -3, 5, 1)),
                ToTensor(Pseudo(dtype, p, 0.5, 2, 2)), ToTensor(Pseudo(dtype, p, -1, 1, 3)),
                ToTensor(Pseudo(dtype, p, -1, 1, 4)), ToTensor(Pseudo(dtype, p, 0.5, 2, 5))});
    ASSERT_EQ(out.size(), 5u);
    Dispatch<DType::kFloat, DType::kFloat16, DType::kBFloat16>(dtype, [&]<typename T>() {
      for (int64_t c = 0; c < 11; ++c) {
        for (int k : {0, 1}) {
          const T want = Compute<T>::Store(out[1 + k].data<float>()[c]);
          EXPECT_EQ(std::memcmp(&out[3 + k].data<T>()[c], &want, sizeof(T)), 0)
              << (k == 0 ? "mean" : "var") << " of channel " << c << ", " << DTypeName(dtype);
        }
      }
    });
  }
}

}  // namespace
}  // namespace ampc
