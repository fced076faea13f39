// Gemm and MatMul on the CUDA backend against the CPU backend (tests/support/cuda_parity.h):
// every transpose, alpha/beta and shape of C for Gemm; numpy batch broadcasting and 1-D operands
// for MatMul; FP32, FP16 and BF16. Both backends accumulate in FP32 and round once, so FP16/BF16
// outputs differ only where the two summation orders straddle a rounding boundary: the
// tolerances (relative L2) are well below what FP16 or BF16 accumulation would give.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/cuda_parity.h"

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

}  // namespace
}  // namespace ampc
