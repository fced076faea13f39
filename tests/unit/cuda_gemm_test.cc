// kernels/cuda/gemm.h: cuBLASLt GEMM against a double-precision reference on the host. Small
// integer inputs make every product, sum and result exact in FP32 accumulation and in FP16/BF16
// storage, so those cases must match exactly; random inputs check a tolerance. The batch-run
// planning for MatMul's broadcasting and argument checks run without a GPU; the rest skips where
// the CUDA backend is not built or no GPU is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels/numerics/half.h"

#ifdef AMPC_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/cuda/gemm.h"
#include "runtime/core/cuda_device.h"
#endif

namespace ampc {
namespace {

#ifdef AMPC_HAVE_CUDA
using cuda::BatchRun;
using cuda::ElemType;
using cuda::Gemm;
using cuda::GemmArgs;
using cuda::GemmResult;

// ---- MatMulBatchRuns (host only) ----

// Every output batch's (A, B) matrix offsets, expanded from the runs.
std::vector<std::pair<int64_t, int64_t>> Expand(const std::vector<BatchRun>& runs) {
  std::vector<std::pair<int64_t, int64_t>> offsets;
  for (const BatchRun& r : runs) {
    EXPECT_EQ(r.first, static_cast<int64_t>(offsets.size()));
    EXPECT_GE(r.stride_a, 0);
    EXPECT_GE(r.stride_b, 0);
    for (int64_t i = 0; i < r.count; ++i) {
      offsets.push_back({r.offset_a + i * r.stride_a, r.offset_b + i * r.stride_b});
    }
  }
  return offsets;
}

// The same offsets by numpy's rule, one output index at a time.
std::vector<std::pair<int64_t, int64_t>> BruteForce(const std::vector<int64_t>& a,
                                                    const std::vector<int64_t>& b,
                                                    const std::vector<int64_t>& out) {
  int64_t total = 1;
  for (int64_t d : out) total *= d;
  std::vector<std::pair<int64_t, int64_t>> offsets;
  for (int64_t flat = 0; flat < total; ++flat) {
    std::vector<int64_t> index(out.size());
    for (int64_t d = static_cast<int64_t>(out.size()) - 1, rest = flat; d >= 0; --d) {
      index[d] = rest % out[d];
      rest /= out[d];
    }
    auto offset = [&](const std::vector<int64_t>& dims) {
      int64_t o = 0;
      const size_t skip = out.size() - dims.size();
      for (size_t d = 0; d < dims.size(); ++d)
        o = o * dims[d] + (dims[d] == 1 ? 0 : index[skip + d]);
      return o;
    };
    offsets.push_back({offset(a), offset(b)});
  }
  return offsets;
}

TEST(MatMulBatchRunsTest, RunsReproduceNumpyBroadcasting) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{}, {}},         {{3}, {3}},          {{3}, {}},           {{}, {5}},
      {{2, 1}, {1, 3}}, {{2, 3}, {3}},       {{4, 1, 2}, {3, 1}}, {{1, 3, 1}, {2, 1, 4}},
      {{2, 2, 2}, {1}}, {{5, 1}, {1, 1, 7}}, {{1}, {6}}};
  for (const auto& [a, b] : cases) {
    std::vector<int64_t> out;
    std::vector<BatchRun> runs;
    ASSERT_TRUE(cuda::MatMulBatchRuns(a, b, out, runs));
    EXPECT_EQ(Expand(runs), BruteForce(a, b, out));
  }
}

TEST(MatMulBatchRunsTest, FewRunsForTheCommonShapes) {
  std::vector<int64_t> out;
  std::vector<BatchRun> runs;
  ASSERT_TRUE(cuda::MatMulBatchRuns({8, 12}, {8, 12}, out, runs));  // attention scores
  EXPECT_EQ(out, (std::vector<int64_t>{8, 12}));
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].count, 96);
  EXPECT_EQ(runs[0].stride_a, 1);
  EXPECT_EQ(runs[0].stride_b, 1);
  ASSERT_TRUE(cuda::MatMulBatchRuns({8, 12}, {}, out, runs));  // a weight shared by all
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].stride_b, 0);
  ASSERT_TRUE(cuda::MatMulBatchRuns({2, 1}, {1, 3}, out, runs));
  EXPECT_EQ(runs.size(), 2u);
}

TEST(MatMulBatchRunsTest, IncompatibleAndEmptyBatches) {
  std::vector<int64_t> out;
  std::vector<BatchRun> runs;
  EXPECT_FALSE(cuda::MatMulBatchRuns({2}, {3}, out, runs));
  EXPECT_FALSE(cuda::MatMulBatchRuns({4, 2}, {3, 1}, out, runs));
  ASSERT_TRUE(cuda::MatMulBatchRuns({0}, {1}, out, runs));
  EXPECT_EQ(out, std::vector<int64_t>{0});
  EXPECT_TRUE(runs.empty());
}

TEST(CudaGemmArgsTest, BadArgumentsAreRejectedBeforeAnyCudaCall) {
  Gemm gemm;
  GemmArgs args;
  args.m = args.n = args.k = 4;
  int dummy[64];
  args.a = args.b = args.c = dummy;
  args.type = ElemType::kInt32;
  GemmResult r = gemm.Run(args, nullptr);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("element type 6 is not FP32, FP16 or BF16"), std::string::npos)
      << r.message;
  args.type = ElemType::kFloat;
  args.lda = 3;
  r = gemm.Run(args, nullptr);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("leading dimension"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("FP32 GEMM M=4 N=4 K=4"), std::string::npos) << r.message;
  args.lda = 0;
  args.batch = 2;
  args.stride_c = 8;  // the second output matrix would overlap the first
  r = gemm.Run(args, nullptr);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("overlap"), std::string::npos) << r.message;
  EXPECT_EQ(gemm.plan_count(), 0u);
}

// ---- on the GPU ----

class DeviceBytes {
 public:
  explicit DeviceBytes(size_t n) : size_(n) {
    EXPECT_EQ(cudaMalloc(&data_, n == 0 ? 1 : n), cudaSuccess);
  }
  ~DeviceBytes() { cudaFree(data_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  void* data() const { return data_; }
  void Upload(const std::vector<uint8_t>& bytes) {
    ASSERT_LE(bytes.size(), size_);
    EXPECT_EQ(cudaMemcpy(data_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<uint8_t> Download() const {
    std::vector<uint8_t> bytes(size_);
    EXPECT_EQ(cudaMemcpy(bytes.data(), data_, size_, cudaMemcpyDeviceToHost), cudaSuccess);
    return bytes;
  }

 private:
  void* data_ = nullptr;
  size_t size_;
};

size_t SizeOf(ElemType type) { return type == ElemType::kFloat ? 4 : 2; }

std::vector<uint8_t> Encode(ElemType type, const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * SizeOf(type));
  for (size_t i = 0; i < values.size(); ++i) {
    if (type == ElemType::kFloat) {
      std::memcpy(&bytes[i * 4], &values[i], 4);
    } else {
      const uint16_t bits =
          type == ElemType::kFloat16 ? FloatToHalf(values[i]) : FloatToBFloat16(values[i]);
      std::memcpy(&bytes[i * 2], &bits, 2);
    }
  }
  return bytes;
}

std::vector<float> Decode(ElemType type, const std::vector<uint8_t>& bytes) {
  std::vector<float> values(bytes.size() / SizeOf(type));
  for (size_t i = 0; i < values.size(); ++i) {
    if (type == ElemType::kFloat) {
      std::memcpy(&values[i], &bytes[i * 4], 4);
    } else {
      uint16_t bits;
      std::memcpy(&bits, &bytes[i * 2], 2);
      values[i] = type == ElemType::kFloat16 ? HalfToFloat(bits) : BFloat16ToFloat(bits);
    }
  }
  return values;
}

// The values as the type stores them.
std::vector<float> Rounded(ElemType type, const std::vector<float>& values) {
  return Decode(type, Encode(type, values));
}

const char* Name(ElemType type) {
  return type == ElemType::kFloat ? "FP32" : type == ElemType::kFloat16 ? "FP16" : "BF16";
}

struct Case {
  ElemType type = ElemType::kFloat;
  bool trans_a = false, trans_b = false;
  int64_t m = 1, n = 1, k = 1;
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false, relu = false;
  int64_t batch = 1;
  bool broadcast_a = false, broadcast_b = false;  // stride 0
  bool allow_tf32 = false;

  std::string Describe() const {
    return std::string(Name(type)) + " ta=" + std::to_string(trans_a) +
           " tb=" + std::to_string(trans_b) + " m=" + std::to_string(m) +
           " n=" + std::to_string(n) + " k=" + std::to_string(k) +
           " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta) +
           " bias=" + std::to_string(bias) + " relu=" + std::to_string(relu) +
           " batch=" + std::to_string(batch) + " bcast=" + std::to_string(broadcast_a) +
           std::to_string(broadcast_b);
  }
};

// Values for the operands: `small_integers` in {-1, 0, 1} for A and B and [-8, 8] for C and bias
// (every result then exact in BF16), else uniform in [-1, 1).
struct Inputs {
  bool small_integers = true;
  uint32_t seed = 1;
  float Next(bool operand) {
    seed = seed * 1664525u + 1013904223u;
    const uint32_t r = seed >> 8;
    if (!small_integers) return -1.0f + 2.0f * static_cast<float>(r) / static_cast<float>(1u << 24);
    return operand ? static_cast<float>(static_cast<int>(r % 3) - 1)
                   : static_cast<float>(static_cast<int>(r % 17) - 8);
  }
  std::vector<float> Many(size_t n, bool operand) {
    std::vector<float> v(n);
    for (float& x : v) x = Next(operand);
    return v;
  }
};

// Runs the case on the GPU and compares with the double-precision reference: exactly (after
// rounding to the type) when tolerance is 0, else within tolerance times the sum of the
// magnitudes that made each element.
void RunCase(Gemm& gemm, const Case& c, Inputs inputs, double tolerance) {
  SCOPED_TRACE(c.Describe());
  const int64_t mk = c.m * c.k, kn = c.k * c.n, mn = c.m * c.n;
  const int64_t batches_a = c.broadcast_a ? 1 : c.batch, batches_b = c.broadcast_b ? 1 : c.batch;
  const std::vector<float> a = Rounded(c.type, inputs.Many(batches_a * mk, true));
  const std::vector<float> b = Rounded(c.type, inputs.Many(batches_b * kn, true));
  std::vector<float> c0 = Rounded(c.type, inputs.Many(c.batch * mn, false));
  if (c.beta == 0.0f) std::fill(c0.begin(), c0.end(), NAN);  // must not be read
  const std::vector<float> bias = Rounded(c.type, inputs.Many(c.n, false));
  DeviceBytes da(a.size() * SizeOf(c.type)), db(b.size() * SizeOf(c.type));
  DeviceBytes dc(c0.size() * SizeOf(c.type)), dbias(bias.size() * SizeOf(c.type));
  da.Upload(Encode(c.type, a));
  db.Upload(Encode(c.type, b));
  dc.Upload(Encode(c.type, c0));
  dbias.Upload(Encode(c.type, bias));

  GemmArgs args;
  args.type = c.type;
  args.trans_a = c.trans_a;
  args.trans_b = c.trans_b;
  args.m = c.m;
  args.n = c.n;
  args.k = c.k;
  args.a = da.data();
  args.b = db.data();
  args.c = dc.data();
  args.alpha = c.alpha;
  args.beta = c.beta;
  args.bias = c.bias ? dbias.data() : nullptr;
  args.relu = c.relu;
  args.batch = c.batch;
  args.stride_a = c.broadcast_a ? 0 : mk;
  args.stride_b = c.broadcast_b ? 0 : kn;
  args.stride_c = mn;
  args.allow_tf32 = c.allow_tf32;
  const GemmResult result = gemm.Run(args, nullptr);
  ASSERT_TRUE(result.ok) << result.message;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = Decode(c.type, dc.Download());

  for (int64_t batch = 0; batch < c.batch; ++batch) {
    const float* pa = a.data() + (c.broadcast_a ? 0 : batch * mk);
    const float* pb = b.data() + (c.broadcast_b ? 0 : batch * kn);
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double sum = 0.0, magnitude = 0.0;
        for (int64_t p = 0; p < c.k; ++p) {
          const double x = c.trans_a ? pa[p * c.m + i] : pa[i * c.k + p];
          const double y = c.trans_b ? pb[j * c.k + p] : pb[p * c.n + j];
          sum += x * y;
          magnitude += std::abs(x * y);
        }
        const size_t at = static_cast<size_t>(batch * mn + i * c.n + j);
        double want = c.alpha * sum;
        magnitude *= std::abs(c.alpha);
        if (c.beta != 0.0f) {
          want += c.beta * static_cast<double>(c0[at]);
          magnitude += std::abs(c.beta * static_cast<double>(c0[at]));
        }
        if (c.bias) {
          want += bias[j];
          magnitude += std::abs(bias[j]);
        }
        if (c.relu && want < 0) want = 0;
        if (tolerance == 0) {
          const float exact = Rounded(c.type, {static_cast<float>(want)})[0];
          ASSERT_EQ(got[at], exact) << "batch " << batch << " row " << i << " column " << j;
        } else {
          ASSERT_NEAR(got[at], want, tolerance * (magnitude + 1e-30))
              << "batch " << batch << " row " << i << " column " << j;
        }
      }
    }
  }
}

class CudaGemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA GPU found";
  }
};

constexpr ElemType kTypes[] = {ElemType::kFloat, ElemType::kFloat16, ElemType::kBFloat16};

TEST_F(CudaGemmTest, EveryTransposeAlphaBetaBiasAndReluExactlyOnSmallIntegers) {
  Gemm gemm;
  for (ElemType type : kTypes) {
    for (int t = 0; t < 4; ++t) {
      for (auto [alpha, beta] :
           {std::pair{1.0f, 0.0f}, {1.0f, 1.0f}, {2.0f, -1.0f}, {0.5f, 2.0f}}) {
        for (int epilogue = 0; epilogue < 4; ++epilogue) {
          Case c;
          c.type = type;
          c.trans_a = t & 1;
          c.trans_b = t & 2;
          c.m = 37;
          c.n = 45;
          c.k = 32;
          c.alpha = alpha;
          c.beta = beta;
          c.bias = epilogue & 1;
          c.relu = epilogue & 2;
          RunCase(gemm, c, Inputs{true, static_cast<uint32_t>(t + 10 * epilogue)}, 0);
        }
      }
    }
  }
}

TEST_F(CudaGemmTest, StridedBatchesWithABroadcastOperand) {
  Gemm gemm;
  for (ElemType type : kTypes) {
    for (int broadcast = 0; broadcast < 3; ++broadcast) {
      Case c;
      c.type = type;
      c.m = 16;
      c.n = 24;
      c.k = 32;
      c.batch = 5;
      c.beta = broadcast == 2 ? 1.0f : 0.0f;
      c.broadcast_a = broadcast == 1;
      c.broadcast_b = broadcast == 2;
      c.trans_b = broadcast == 2;
      c.bias = broadcast == 0;
      RunCase(gemm, c, Inputs{true, 7}, 0);
    }
  }
}

TEST_F(CudaGemmTest, EmptyInnerDimensionAndZeroAlphaScaleC) {
  Gemm gemm;
  for (ElemType type : kTypes) {
    for (float beta : {0.0f, -2.0f}) {
      Case c;
      c.type = type;
      c.m = 5;
      c.n = 7;
      c.k = 0;
      c.beta = beta;
      c.bias = true;
      c.relu = beta != 0.0f;
      RunCase(gemm, c, Inputs{true, 3}, 0);
      c.k = 9;
      c.alpha = 0.0f;  // A and B are not read: BLAS semantics
      RunCase(gemm, c, Inputs{true, 4}, 0);
    }
  }
}

TEST_F(CudaGemmTest, RandomValuesWithinTheStorageTypesRounding) {
  Gemm gemm;
  const double tolerance[] = {1e-5, 1.0 / 1024, 1.0 / 128};  // FP32 accumulation, then storage
  for (int i = 0; i < 3; ++i) {
    for (int t = 0; t < 4; ++t) {
      Case c;
      c.type = kTypes[i];
      c.trans_a = t & 1;
      c.trans_b = t & 2;
      c.m = 129;
      c.n = 257;
      c.k = 300;
      c.alpha = 0.75f;
      c.beta = 0.5f;
      c.bias = true;
      RunCase(gemm, c, Inputs{false, static_cast<uint32_t>(100 + t)}, tolerance[i]);
    }
  }
  Case tf32;
  tf32.m = 64;
  tf32.n = 64;
  tf32.k = 512;
  tf32.allow_tf32 = true;  // 10-bit mantissas (maybe truncated) when asked for
  RunCase(gemm, tf32, Inputs{false, 5}, 1.0 / 256);
}

TEST_F(CudaGemmTest, EachShapeIsPlannedOnce) {
  Gemm gemm;
  Case c;
  c.m = 8;
  c.n = 8;
  c.k = 8;
  RunCase(gemm, c, Inputs{true, 1}, 0);
  RunCase(gemm, c, Inputs{true, 2}, 0);
  EXPECT_EQ(gemm.plan_count(), 1u);
  c.k = 16;
  RunCase(gemm, c, Inputs{true, 3}, 0);
  EXPECT_EQ(gemm.plan_count(), 2u);
}

#else
TEST(CudaGemmTest, NotBuilt) { GTEST_SKIP() << "CUDA backend not built"; }
#endif

}  // namespace
}  // namespace ampc
