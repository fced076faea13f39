// Gemm and MatMul on the CUDA backend against the CPU backend (tests/support/cuda_parity.h):
// every transpose, alpha/beta and shape of C for Gemm; numpy batch broadcasting and 1-D operands
// for MatMul; FP32, FP16 and BF16. Both backends accumulate in FP32 and round once, so FP16/BF16
// outputs differ only where the two summation orders straddle a rounding boundary: the
// tolerances (relative L2) are well below what FP16 or BF16 accumulation would give.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/session.h"
#include "tests/support/cuda_parity.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"

#ifdef AMPC_HAVE_CUDA
#include "runtime/core/cuda_backend.h"
#endif

namespace ampc {
namespace {

using testing::ExpectCudaMatchesCpu;
using testing::ParityCase;

constexpr char kHeader[] = R"(<ir_version: 8, opset_import: ["" : 17]>)";

struct Type {
  const char* name;
  double tolerance;
};
const Type kTypes[] = {{"float", 1e-5}, {"float16", 1e-4}, {"bfloat16", 5e-4}};

std::string Dims(const std::vector<int>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string Float(float x) { return std::to_string(x); }

TEST(CudaLinalgParityTest, GemmEveryTransposeAlphaBetaAndShapeOfC) {
  AMPC_SKIP_WITHOUT_GPU();
  const int m = 33, n = 47, k = 64;
  const std::vector<std::vector<int>> c_shapes = {{}, {n}, {1, n}, {m, 1}, {m, n}, {1}, {1, 1}};
  const std::pair<float, float> scalars[] = {
      {1.0f, 1.0f}, {0.5f, 2.0f}, {1.0f, 0.0f}, {-1.5f, 0.25f}};
  uint32_t seed = 1;
  for (const Type& type : kTypes) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      for (auto [alpha, beta] : scalars) {
        for (int c = -1; c < static_cast<int>(c_shapes.size()); ++c) {  // -1: no C
          const std::string T = type.name;
          const std::string a = T + Dims(ta ? std::vector<int>{k, m} : std::vector<int>{m, k});
          const std::string b = T + Dims(tb ? std::vector<int>{n, k} : std::vector<int>{k, n});
          const std::string c_input = c < 0 ? "" : ", " + T + Dims(c_shapes[c]) + " c";
          ParityCase parity;
          parity.model = std::string(kHeader) + " g (" + a + " a, " + b + " b" + c_input +
                         ") => (" + T + Dims({m, n}) + " y) { y = Gemm<alpha = " + Float(alpha) +
                         ", beta = " + Float(beta) + ", transA = " + std::to_string(ta) +
                         ", transB = " + std::to_string(tb) + ">(a, b" + (c < 0 ? "" : ", c") +
                         ") }";
          parity.tolerance = type.tolerance;
          parity.seed = seed++;
          SCOPED_TRACE(parity.model);
          ExpectCudaMatchesCpu(parity);
        }
      }
    }
  }
}

TEST(CudaLinalgParityTest, GemmWithAnEmptyInnerDimension) {
  AMPC_SKIP_WITHOUT_GPU();
  for (const Type& type : kTypes) {
    const std::string T = type.name;
    ParityCase parity;
    parity.model = std::string(kHeader) + " g (" + T + "[5,0] a, " + T + "[0,7] b, " + T +
                   "[7] c) => (" + T + "[5,7] y) { y = Gemm<beta = 0.5>(a, b, c) }";
    parity.tolerance = 0;
    SCOPED_TRACE(parity.model);
    ExpectCudaMatchesCpu(parity);
  }
}

TEST(CudaLinalgParityTest, MatMulBroadcastsBatchesAndVectors) {
  AMPC_SKIP_WITHOUT_GPU();
  const std::vector<std::pair<std::vector<int>, std::vector<int>>> shapes = {
      {{3, 40}, {40, 5}},              // one product
      {{2, 3, 40}, {40, 5}},           // B shared: batches folded into rows
      {{2, 3, 40}, {2, 40, 5}},        // one strided batch
      {{40, 5}, {2, 5, 40}},           // A shared: stride 0
      {{2, 1, 3, 40}, {1, 3, 40, 5}},  // two runs
      {{5, 1, 3, 40}, {2, 40, 6}},     // broadcasting on both sides
      {{40}, {40, 5}},                 // a row vector
      {{2, 3, 40}, {40}},              // a column vector
      {{40}, {40}},                    // a dot product
      {{0, 3, 4}, {4, 5}},             // no batches
      {{3, 0}, {0, 5}}};               // an empty inner dimension
  uint32_t seed = 100;
  for (const Type& type : kTypes) {
    for (const auto& [a, b] : shapes) {
      // The output shape by numpy's rule.
      const bool a_vector = a.size() == 1, b_vector = b.size() == 1;
      std::vector<int> batch_a(a.begin(), a.end() - (a_vector ? 1 : 2));
      std::vector<int> batch_b(b.begin(), b.end() - (b_vector ? 1 : 2));
      const size_t rank = std::max(batch_a.size(), batch_b.size());
      batch_a.insert(batch_a.begin(), rank - batch_a.size(), 1);
      batch_b.insert(batch_b.begin(), rank - batch_b.size(), 1);
      std::vector<int> out;
      for (size_t d = 0; d < rank; ++d) out.push_back(batch_a[d] == 1 ? batch_b[d] : batch_a[d]);
      if (!a_vector) out.push_back(a[a.size() - 2]);
      if (!b_vector) out.push_back(b.back());
      const std::string T = type.name;
      ParityCase parity;
      parity.model = std::string(kHeader) + " g (" + T + Dims(a) + " a, " + T + Dims(b) +
                     " b) => (" + T + Dims(out) + " y) { y = MatMul(a, b) }";
      parity.tolerance = type.tolerance;
      parity.seed = seed++;
      SCOPED_TRACE(parity.model);
      ExpectCudaMatchesCpu(parity);
    }
  }
}

#ifdef AMPC_HAVE_CUDA
// The relative L2 error of `model`'s output y on a CUDA backend (TF32 allowed or not) against the
// CPU, on one random input.
double CudaError(const std::string& model_text, bool allow_tf32) {
  const onnx::ModelProto model = testing::ParseModelText(model_text);
  const std::vector<Tensor> inputs = testing::RandomInputs(model, {}, 7);
  CpuBackend cpu(1);
  auto gpu = CudaBackend::Create(0);
  EXPECT_TRUE(gpu.ok()) << gpu.status();
  if (!gpu.ok()) return -1;
  (*gpu)->set_allow_tf32(allow_tf32);
  auto on_cpu = Session::Create(model, DefaultRegistry(), cpu);
  auto on_gpu = Session::Create(model, DefaultRegistry(), **gpu);
  EXPECT_TRUE(on_cpu.ok() && on_gpu.ok());
  if (!on_cpu.ok() || !on_gpu.ok()) return -1;
  auto expected = (*on_cpu)->Run(inputs);
  auto actual = (*on_gpu)->Run(inputs);
  EXPECT_TRUE(expected.ok() && actual.ok());
  if (!expected.ok() || !actual.ok()) return -1;
  auto host = ToHost((*actual)[0]);
  EXPECT_TRUE(host.ok());
  const std::vector<float> e = testing::Values<float>((*expected)[0]);
  const std::vector<float> a = testing::Values<float>(*host);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    diff += (static_cast<double>(a[i]) - e[i]) * (static_cast<double>(a[i]) - e[i]);
    norm += static_cast<double>(e[i]) * e[i];
  }
  return std::sqrt(diff / norm);
}

// --tf32: FP32 products on tensor cores round their inputs to 10 mantissa bits, which shows as
// an error near 2^-11 against the CPU; without it they stay at FP32's. A convolution may use
// TF32 then (cuDNN picks the fastest algorithm, which need not be a tensor-core one).
TEST(CudaLinalgParityTest, Tf32OnlyWhenAllowed) {
  AMPC_SKIP_WITHOUT_GPU();
  const std::string matmul = std::string(kHeader) +
                             " g (float[256, 512] a, float[512, 256] b) => (float[256, 256] y) "
                             "{ y = MatMul(a, b) }";
  const std::string conv = std::string(kHeader) +
                           " g (float[8, 64, 16, 16] x, float[64, 64, 3, 3] w) => "
                           "(float[8, 64, 16, 16] y) { y = Conv <pads = [1, 1, 1, 1]> (x, w) }";
  EXPECT_LT(CudaError(matmul, false), 1e-5);
  const double matmul_tf32 = CudaError(matmul, true);
  EXPECT_GT(matmul_tf32, 1e-5);
  EXPECT_LT(matmul_tf32, 1e-2);
  EXPECT_LT(CudaError(conv, false), 1e-5);
  EXPECT_LT(CudaError(conv, true), 1e-2);
}
#endif

}  // namespace
}  // namespace ampc
