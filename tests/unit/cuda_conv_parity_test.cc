// The CUDA CNN family against the CPU kernels: Conv (and FusedConv), ConvGrad, MaxPool,
// AveragePool, GlobalAveragePool, MaxPoolGrad, BatchNormalization (inference and training) and
// BatchNormalizationGrad, each in FP32, FP16 and BF16 over groups, strides, pads (symmetric,
// asymmetric, auto_pad), dilations, 1-D/3-D and odd sizes. The GPU runs skip, counted as skipped,
// where no GPU is present; every case's model is also run on the CPU alone, here, so a model
// that does not load or run is caught without a GPU.
//
// Tolerances (relative L2 over each output, tests/support/cuda_parity.h):
// - kExact (0): MaxPool, AveragePool, MaxPoolGrad and BatchNormalization's inference form visit
//   and round in the CPU's order (pool.h, norm.h), so they must agree bit for bit.
// - FP32 1e-5: cuDNN (FMA, no TF32) and the per-channel sums add in another order than the CPU;
//   the difference is a few FP32 ulps of sums of at most a few thousand terms.
// - FP16 1e-3, BF16 1e-2: both backends round an FP32 result once, so they differ where the two
//   FP32 sums straddle a rounding boundary; a Conv with a bias rounds twice on the GPU (cuDNN's
//   output, then + bias): up to one ulp on about a quarter of the elements, a relative L2 of
//   about half an ulp: ~4e-4 for FP16 (u = 2^-11), ~3e-3 for BF16 (u = 2^-8).
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_replace.h"
#include "kernels/cpu/cpu_kernels.h"
#include "passes/opset/training_ops.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/session.h"
#include "tests/support/cuda_parity.h"
#include "tests/support/model_text.h"

namespace ampc {
namespace {

using testing::ValueRange;

constexpr char kHeader[] = R"(<ir_version: 8, opset_import: ["" : 17, "ai.ampc" : 1]>)";
constexpr double kExact = 0;
const std::vector<std::string> kAllTypes = {"float", "float16", "bfloat16"};

// One model of the family; "$T" in `graph` is the element type under test.
struct OpCase {
  std::string name;
  std::string graph;
  std::map<std::string, ValueRange> ranges = {};
  bool exact = false;
  std::string header = kHeader;
  std::vector<std::string> types = kAllTypes;
};

void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

std::string ModelText(const OpCase& c, const std::string& type) {
  return c.header + "\n" + absl::StrReplaceAll(c.graph, {{"$T", type}});
}

double Tolerance(const OpCase& c, const std::string& type) {
  if (c.exact) return kExact;
  return type == "float" ? 1e-5 : type == "float16" ? 1e-3 : 1e-2;
}

const ValueRange kPositive{0.5, 2};  // variances and inverse standard deviations

std::vector<OpCase> ConvCases() {
  return {
      {"ConvPad1Bias", R"(g ($T[2, 3, 7, 6] x, $T[4, 3, 3, 3] w, $T[4] b) => ($T[] y) {
  y = Conv <pads = [1, 1, 1, 1]> (x, w, b)
})"},
      // out: H (9+1+1-3)/2+1 = 5, W (8+2+2-5)/1+1 = 8
      {"ConvGroupsStridesDilations",
       R"(g ($T[2, 4, 9, 8] x, $T[6, 2, 3, 3] w, $T[6] b) => ($T[] y) {
  y = Conv <group = 2, strides = [2, 1], dilations = [1, 2], pads = [1, 2, 1, 2]> (x, w, b)
})"},
      {"ConvDepthwise", R"(g ($T[1, 5, 6, 6] x, $T[5, 1, 3, 3] w) => ($T[] y) {
  y = Conv <group = 5, pads = [1, 1, 1, 1]> (x, w)
})"},
      // SAME_UPPER, in 8, k 3, stride 2: pads 0 and 1, which cuDNN cannot give (explicit padding)
      {"ConvSameUpperStride2", R"(g ($T[2, 3, 8, 8] x, $T[4, 3, 3, 3] w, $T[4] b) => ($T[] y) {
  y = Conv <auto_pad = "SAME_UPPER", strides = [2, 2]> (x, w, b)
})"},
      // odd sizes, kernel 3x2, pads (0, 1 | 2, 0): out 7x5, explicit padding
      {"ConvAsymmetricPadsOddSizes",
       R"(g ($T[1, 3, 7, 5] x, $T[2, 3, 3, 2] w, $T[2] b) => ($T[] y) {
  y = Conv <pads = [0, 1, 2, 0]> (x, w, b)
})"},
      // stride 2 over 8 with k 3 and no pads: the last input row and column are read by no window
      {"ConvStrideLeavesTail", R"(g ($T[1, 2, 8, 8] x, $T[3, 2, 3, 3] w) => ($T[] y) {
  y = Conv <strides = [2, 2]> (x, w)
})"},
      {"Conv1D", R"(g ($T[2, 3, 11] x, $T[4, 3, 3] w, $T[4] b) => ($T[] y) {
  y = Conv <strides = [2], pads = [1, 1]> (x, w, b)
})"},
      {"Conv3D", R"(g ($T[1, 2, 4, 5, 6] x, $T[3, 2, 2, 3, 3] w) => ($T[] y) {
  y = Conv <pads = [0, 1, 1, 0, 1, 1]> (x, w)
})"},
      {"ConvPointwise", R"(g ($T[2, 8, 5, 5] x, $T[4, 8, 1, 1] w, $T[4] b) => ($T[] y) {
  y = Conv (x, w, b)
})"},
      // FP32 Conv -> Relu becomes FusedConv in every Session (runtime/conv_fusion.h)
      {"ConvRelu", R"(g ($T[2, 3, 7, 6] x, $T[4, 3, 3, 3] w, $T[4] b) => ($T[] r) {
  y = Conv <pads = [1, 1, 1, 1]> (x, w, b)
  r = Relu (y)
})"},
  };
}

std::vector<OpCase> ConvGradCases() {
  const char* kGrad = "dx, dw, db = ai.ampc.ConvGrad";
  auto grad = [&](const std::string& inputs, const std::string& attributes) {
    return "g (" + inputs + ") => ($T[] dx, $T[] dw, $T[] db) {\n  " + kGrad + " <" + attributes +
           "> (dy, x, w)\n}";
  };
  return {
      {"ConvGradPad1",
       grad("$T[2, 4, 7, 6] dy, $T[2, 3, 7, 6] x, $T[4, 3, 3, 3] w", "pads = [1, 1, 1, 1]")},
      {"ConvGradGroupsStridesDilations",
       grad("$T[2, 6, 5, 8] dy, $T[2, 4, 9, 8] x, $T[6, 2, 3, 3] w",
            "group = 2, strides = [2, 1], dilations = [1, 2], pads = [1, 2, 1, 2]")},
      {"ConvGradDepthwise", grad("$T[1, 5, 6, 6] dy, $T[1, 5, 6, 6] x, $T[5, 1, 3, 3] w",
                                 "group = 5, pads = [1, 1, 1, 1]")},
      {"ConvGradSameUpperStride2", grad("$T[2, 4, 4, 4] dy, $T[2, 3, 8, 8] x, $T[4, 3, 3, 3] w",
                                        "auto_pad = \"SAME_UPPER\", strides = [2, 2]")},
      {"ConvGradAsymmetricPadsOddSizes",
       grad("$T[1, 2, 7, 5] dy, $T[1, 3, 7, 5] x, $T[2, 3, 3, 2] w", "pads = [0, 1, 2, 0]")},
      {"ConvGradStrideLeavesTail",
       grad("$T[1, 3, 3, 3] dy, $T[1, 2, 8, 8] x, $T[3, 2, 3, 3] w", "strides = [2, 2]")},
      {"ConvGrad1D",
       grad("$T[2, 4, 6] dy, $T[2, 3, 11] x, $T[4, 3, 3] w", "strides = [2], pads = [1, 1]")},
  };
}

std::vector<OpCase> PoolCases() {
  std::vector<OpCase> cases = {
      {"MaxPool2x2Indices", R"(g ($T[2, 3, 8, 6] x) => ($T[] y, int64[] i) {
  y, i = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (x)
})"},
      {"MaxPool3x3Stride2Pad1Indices", R"(g ($T[2, 3, 7, 6] x) => ($T[] y, int64[] i) {
  y, i = MaxPool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]> (x)
})"},
      {"MaxPoolCeilMode", R"(g ($T[1, 2, 7, 7] x) => ($T[] y) {
  y = MaxPool <kernel_shape = [2, 2], strides = [2, 2], ceil_mode = 1> (x)
})"},
      {"MaxPoolDilations", R"(g ($T[1, 2, 9, 8] x) => ($T[] y, int64[] i) {
  y, i = MaxPool <kernel_shape = [2, 2], dilations = [2, 2]> (x)
})"},
      {"MaxPoolColumnMajorIndices", R"(g ($T[1, 2, 5, 6] x) => ($T[] y, int64[] i) {
  y, i = MaxPool <kernel_shape = [3, 3], storage_order = 1> (x)
})"},
      {"MaxPoolSameUpper", R"(g ($T[1, 2, 8, 8] x) => ($T[] y, int64[] i) {
  y, i = MaxPool <kernel_shape = [3, 3], strides = [2, 2], auto_pad = "SAME_UPPER"> (x)
})"},
      {"MaxPool1D", R"(g ($T[2, 3, 10] x) => ($T[] y, int64[] i) {
  y, i = MaxPool <kernel_shape = [3], strides = [2], pads = [1, 1]> (x)
})"},
      {"MaxPool3D", R"(g ($T[1, 2, 4, 5, 6] x) => ($T[] y, int64[] i) {
  y, i = MaxPool <kernel_shape = [2, 2, 2], strides = [2, 2, 2]> (x)
})"},
      {"AveragePoolExcludePad", R"(g ($T[2, 3, 7, 6] x) => ($T[] y) {
  y = AveragePool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]> (x)
})"},
      {"AveragePoolIncludePad", R"(g ($T[2, 3, 7, 6] x) => ($T[] y) {
  y = AveragePool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1],
                   count_include_pad = 1> (x)
})"},
      {"AveragePoolCeilModeIncludePad", R"(g ($T[1, 2, 7, 7] x) => ($T[] y) {
  y = AveragePool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], ceil_mode = 1,
                   count_include_pad = 1> (x)
})"},
      {"AveragePoolSameLower", R"(g ($T[1, 2, 8, 8] x) => ($T[] y) {
  y = AveragePool <kernel_shape = [3, 3], strides = [2, 2], auto_pad = "SAME_LOWER"> (x)
})"},
      {"AveragePool1D", R"(g ($T[2, 3, 10] x) => ($T[] y) {
  y = AveragePool <kernel_shape = [4], strides = [3]> (x)
})"},
      {"AveragePool3D", R"(g ($T[1, 2, 4, 5, 6] x) => ($T[] y) {
  y = AveragePool <kernel_shape = [2, 3, 3], strides = [1, 2, 2], pads = [0, 1, 1, 0, 1, 1]> (x)
})"},
      // dilations from opset 19
      {"AveragePoolDilationsIncludePad",
       R"(g ($T[1, 2, 9, 8] x) => ($T[] y) {
  y = AveragePool <kernel_shape = [2, 2], dilations = [2, 2], pads = [1, 1, 1, 1],
                   count_include_pad = 1> (x)
})",
       {},
       false,
       R"(<ir_version: 9, opset_import: ["" : 19]>)"},
      // MaxPool's indices into MaxPoolGrad; overlapping windows add several dy into one element
      {"MaxPoolGradOverlapping", R"(g ($T[2, 3, 6, 5] x, $T[2, 3, 6, 5] dy) => ($T[] dx) {
  y, i = MaxPool <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (x)
  dx = ai.ampc.MaxPoolGrad (dy, i, x)
})"},
      {"MaxPoolGradStride2Pad1", R"(g ($T[2, 3, 7, 6] x, $T[2, 3, 4, 3] dy) => ($T[] dx) {
  y, i = MaxPool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]> (x)
  dx = ai.ampc.MaxPoolGrad (dy, i, x)
})"},
      {"MaxPoolGrad2x2", R"(g ($T[1, 2, 8, 6] x, $T[1, 2, 4, 3] dy) => ($T[] dx) {
  y, i = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (x)
  dx = ai.ampc.MaxPoolGrad (dy, i, x)
})"},
  };
  for (OpCase& c : cases) c.exact = true;
  cases.push_back({"GlobalAveragePool", R"(g ($T[2, 3, 7, 5] x) => ($T[] y) {
  y = GlobalAveragePool (x)
})"});
  cases.push_back({"GlobalAveragePool1D", R"(g ($T[2, 4, 9] x) => ($T[] y) {
  y = GlobalAveragePool (x)
})"});
  cases.push_back({"GlobalAveragePoolLargePlanes", R"(g ($T[3, 5, 40, 33] x) => ($T[] y) {
  y = GlobalAveragePool (x)
})"});
  return cases;
}

std::vector<OpCase> BatchNormCases() {
  const std::map<std::string, ValueRange> statistics = {{"v", kPositive}};
  const std::map<std::string, ValueRange> saved = {{"r", kPositive}, {"m", {-1, 1}}};
  return {
      {"BatchNormInference",
       R"(g ($T[2, 3, 5, 4] x, $T[3] s, $T[3] b, $T[3] m, $T[3] v) => ($T[] y) {
  y = BatchNormalization <epsilon = 0.001> (x, s, b, m, v)
})",
       statistics, true},
      {"BatchNormInferenceRank2",
       R"(g ($T[6, 4] x, $T[4] s, $T[4] b, $T[4] m, $T[4] v) => ($T[] y) {
  y = BatchNormalization (x, s, b, m, v)
})",
       statistics, true},
      // opset 8, spatial = 0: a scale, bias, mean and variance per element of a plane
      {"BatchNormInferencePerElement",
       R"(g ($T[2, 3, 4, 5] x, $T[3, 4, 5] s, $T[3, 4, 5] b, $T[3, 4, 5] m, $T[3, 4, 5] v)
    => ($T[] y) {
  y = BatchNormalization <spatial = 0> (x, s, b, m, v)
})",
       statistics,
       true,
       R"(<ir_version: 8, opset_import: ["" : 8]>)",
       {"float", "float16"}},
      {"BatchNormTraining",
       R"(g ($T[4, 3, 5, 6] x, $T[3] s, $T[3] b, $T[3] m, $T[3] v) => ($T[] y, $T[] rm, $T[] rv) {
  y, rm, rv = BatchNormalization <training_mode = 1, momentum = 0.8> (x, s, b, m, v)
})",
       statistics},
      // 8 * 64 * 64 = 32768 elements per channel: two blocks each in the first stage
      {"BatchNormTrainingTwoStage",
       R"(g ($T[8, 4, 64, 64] x, $T[4] s, $T[4] b, $T[4] m, $T[4] v) => ($T[] y, $T[] rm, $T[] rv) {
  y, rm, rv = BatchNormalization <training_mode = 1> (x, s, b, m, v)
})",
       statistics},
      {"BatchNormGrad",
       R"(g ($T[2, 3, 5, 4] dy, $T[2, 3, 5, 4] x, $T[3] s, $T[3] m, $T[3] r)
    => ($T[] dx, $T[] ds, $T[] db) {
  dx, ds, db = ai.ampc.BatchNormalizationGrad <epsilon = 0.001> (dy, x, s, m, r)
})",
       saved},
      {"BatchNormGradTwoStage",
       R"(g ($T[8, 4, 64, 64] dy, $T[8, 4, 64, 64] x, $T[4] s, $T[4] m, $T[4] r)
    => ($T[] dx, $T[] ds, $T[] db) {
  dx, ds, db = ai.ampc.BatchNormalizationGrad (dy, x, s, m, r)
})",
       saved},
  };
}

// The ai.ampc versions (passes/opset/standard_op_versions.h) that BF16 training compiles Conv and
// the pools to: the same kernels, reached through the other domain.
std::vector<OpCase> AmpcVersionCases() {
  const std::vector<std::string> bf16 = {"bfloat16"};
  return {
      {"AmpcConvPad1Bias",
       R"(g ($T[2, 3, 7, 6] x, $T[4, 3, 3, 3] w, $T[4] b) => ($T[] y) {
  y = ai.ampc.Conv <pads = [1, 1, 1, 1]> (x, w, b)
})",
       {},
       false,
       kHeader,
       bf16},
      {"AmpcMaxPool3x3Stride2Pad1Indices",
       R"(g ($T[2, 3, 7, 6] x) => ($T[] y, int64[] i) {
  y, i = ai.ampc.MaxPool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]> (x)
})",
       {},
       true,
       kHeader,
       bf16},
      {"AmpcAveragePoolPad1",
       R"(g ($T[2, 3, 7, 6] x) => ($T[] y) {
  y = ai.ampc.AveragePool <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (x)
})",
       {},
       true,
       kHeader,
       bf16},
      {"AmpcGlobalAveragePool",
       R"(g ($T[2, 3, 7, 6] x) => ($T[] y) {
  y = ai.ampc.GlobalAveragePool (x)
})",
       {},
       false,
       kHeader,
       bf16},
  };
}

std::vector<OpCase> AllCases() {
  std::vector<OpCase> all;
  for (auto cases :
       {ConvCases(), ConvGradCases(), PoolCases(), BatchNormCases(), AmpcVersionCases()}) {
    all.insert(all.end(), cases.begin(), cases.end());
  }
  return all;
}

// (case, element type), for every type the case takes.
using Param = std::tuple<OpCase, std::string>;

std::vector<Param> AllParams() {
  std::vector<Param> params;
  for (const OpCase& c : AllCases()) {
    for (const std::string& type : c.types) params.emplace_back(c, type);
  }
  return params;
}

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  return std::get<0>(info.param).name + "_" + std::get<1>(info.param);
}

class CudaConvParityTest : public ::testing::TestWithParam<Param> {};

TEST_P(CudaConvParityTest, MatchesTheCpu) {
  AMPC_SKIP_WITHOUT_GPU();
  const auto& [c, type] = GetParam();
  testing::ExpectCudaMatchesCpu({ModelText(c, type), c.ranges, Tolerance(c, type)});
}

// The FP16 and BF16 convolutions again with cuDNN made to run them NHWC on transposed copies
// (AMPC_CUDNN_LAYOUT, which fails where cuDNN cannot; left to timing, a shape may take either
// layout).
TEST_P(CudaConvParityTest, MatchesTheCpuInNhwc) {
  AMPC_SKIP_WITHOUT_GPU();
  const auto& [c, type] = GetParam();
  if (type == "float" || c.name.find("Conv") == std::string::npos) {
    GTEST_SKIP() << "FP32, and ops other than convolutions, run NCHW only";
  }
  struct ForcedLayout {  // for this test only, however it ends
    ForcedLayout() { setenv("AMPC_CUDNN_LAYOUT", "nhwc", 1); }
    ~ForcedLayout() { unsetenv("AMPC_CUDNN_LAYOUT"); }
  } nhwc;
  testing::ExpectCudaMatchesCpu({ModelText(c, type), c.ranges, Tolerance(c, type)});
}

// Without a GPU: the case's model loads and runs on the CPU backend (the reference side).
TEST_P(CudaConvParityTest, ModelRunsOnTheCpu) {
  const auto& [c, type] = GetParam();
  RegisterAmpcSchemas();
  const onnx::ModelProto model = testing::ParseModelText(ModelText(c, type));
  CpuBackend cpu(2);
  auto session = Session::Create(model, DefaultRegistry(), cpu);
  ASSERT_TRUE(session.ok()) << session.status();
  auto outputs = (*session)->Run(testing::RandomInputs(model, c.ranges, 1));
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  for (const Tensor& output : *outputs) EXPECT_GT(output.size(), 0);
}

INSTANTIATE_TEST_SUITE_P(Family, CudaConvParityTest, ::testing::ValuesIn(AllParams()), ParamName);

}  // namespace
}  // namespace ampc
