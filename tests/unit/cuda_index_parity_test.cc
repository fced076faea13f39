// Gather, ScatterND and Sum on the CUDA backend against the CPU backend
// (tests/support/cuda_parity.h). Gather and ScatterND move or combine elements without
// arithmetic beyond the CPU's own (ScatterND applies the updates to one place in ONNX's order,
// each rounded), so they must match bit for bit, with indices on the host or on the GPU; Sum
// rounds once, as the CPU does.
// Skipped, and counted as skipped, where no GPU is present.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/support/cuda_parity.h"

namespace ampc {
namespace {

using testing::ExpectCudaMatchesCpu;
using testing::ParityCase;
using testing::ValueRange;

constexpr char kHeader[] = "<ir_version: 8, opset_import: [\"\" : 17]>\n";

std::vector<ParityCase> Cases() {
  std::vector<ParityCase> cases;
  for (const std::string type : {"float", "float16", "bfloat16", "int64", "double"}) {
    for (const std::string axis : {"0", "1", "-1"}) {
      cases.push_back(
          {.model = kHeader + ("g (" + type + "[3, 5, 7] x, int64[4, 2] i) => (" + type +
                               "[?, ?, ?, ?] y) { y = Gather <axis = " + axis + "> (x, i) }"),
           .ranges = {{"i", ValueRange{-3, 3}}},
           .tolerance = 0});
    }
  }
  // Rows of 3 FP16 values (6 bytes): the 2-byte word path; token ids as a transformer feeds them.
  cases.push_back({.model = std::string(kHeader) +
                            "g (float16[50, 3] e, int64[8, 16] t) => (float16[8, 16, 3] y) "
                            "{ y = Gather(e, t) }",
                   .ranges = {{"t", ValueRange{0, 50}}},
                   .tolerance = 0});
  // int32 indices.
  cases.push_back({.model = std::string(kHeader) +
                            "g (float[3, 5, 8] x, int32[4, 2] i) => (float[3, 4, 2, 8] y) "
                            "{ y = Gather <axis = 1> (x, i) }",
                   .ranges = {{"i", ValueRange{-5, 5}}},
                   .tolerance = 0});
  // Tuples of two components; 8 destinations (a power of two: the sort's key width).
  cases.push_back({.model = std::string(kHeader) +
                            "g (float[4, 2, 5] d, int64[30, 2] i, float[30, 5] u) => "
                            "(float[4, 2, 5] y) { y = ScatterND <reduction = \"add\"> (d, i, u) }",
                   .ranges = {{"i", ValueRange{-2, 2}}},
                   .tolerance = 0});
  cases.push_back({.model = std::string(kHeader) +
                            "g (double[8, 3] d, int64[40, 1] i, double[40, 3] u) => "
                            "(double[8, 3] y) { y = ScatterND <reduction = \"min\"> (d, i, u) }",
                   .ranges = {{"i", ValueRange{-8, 8}}},
                   .tolerance = 0});
  // 40 index tuples into 6 rows: many duplicates, in no particular order.
  for (const std::string type : {"float", "float16", "bfloat16"}) {
    for (const std::string reduction : {"add", "none", "max", "mul"}) {
      cases.push_back(
          {.model = kHeader +
                    ("g (" + type + "[6, 5] d, int64[40, 1] i, " + type + "[40, 5] u) => (" + type +
                     "[6, 5] y) { y = ScatterND <reduction = \"" + reduction + "\"> (d, i, u) }"),
           .ranges = {{"i", ValueRange{-6, 6}}},
           .tolerance = 0});
    }
  }
  for (const std::string type : {"float", "float16", "bfloat16", "int64"}) {
    cases.push_back(
        {.model = kHeader + ("g (" + type + "[33, 17] a, " + type + "[33, 17] b, " + type +
                             "[33, 17] c) => (" + type + "[33, 17] y) { y = Sum(a, b, c) }"),
         .tolerance = 0});
  }
  // 24 inputs: a constant each of a 24-layer encoder's layers reads accumulates 24 gradients.
  std::string inputs, names;
  for (int k = 0; k < 24; ++k) {
    absl::StrAppend(&inputs, k == 0 ? "" : ", ", "float16[7, 9] x", k);
    absl::StrAppend(&names, k == 0 ? "" : ", ", "x", k);
  }
  cases.push_back({.model = absl::StrCat(kHeader, "g (", inputs,
                                         ") => (float16[7, 9] y) { y = Sum(", names, ") }"),
                   .tolerance = 0});
  return cases;
}

TEST(CudaIndexParityTest, ModelsRunOnTheCpuAndHaveCudaKernels) {
  for (const ParityCase& parity : Cases()) {
    SCOPED_TRACE(parity.model);
    testing::ExpectRunsOnCpuWithCudaKernels(parity);
  }
}

TEST(CudaIndexParityTest, GatherScatterNdAndSumMatchTheCpuBitForBit) {
  AMPC_SKIP_WITHOUT_GPU();
  for (const ParityCase& parity : Cases()) {
    SCOPED_TRACE(parity.model);
    ExpectCudaMatchesCpu(parity);
  }
}

// Indices already on the GPU (a captured training step's token ids): read there, no wait for
// the GPU; ScatterND groups its tuples with a radix sort on the device. The same bits.
TEST(CudaIndexParityTest, GatherAndScatterNdWithIndicesOnTheGpuMatchTheCpuBitForBit) {
  AMPC_SKIP_WITHOUT_GPU();
  for (ParityCase parity : Cases()) {
    if (parity.model.find("Sum(") != std::string::npos) continue;
    SCOPED_TRACE(parity.model);
    parity.inputs_on_gpu = true;
    ExpectCudaMatchesCpu(parity);
  }
}

}  // namespace
}  // namespace ampc
