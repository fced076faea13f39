// The reduce family on the CUDA backend against the CPU backend (tests/support/cuda_parity.h):
// every reduction, Softmax/LogSoftmax and their grads, SoftmaxCrossEntropyLoss and its grad,
// LayerNormalization and its grad, over each element type and each shape class the launchers
// tell apart (short and long contiguous rows, strided rows, reduced dims split by kept ones).
// Also: the loss is the same bits run to run, and a label out of range gives NaN, not a crash.
// Skipped, and counted as skipped, where no GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/cpu_kernels.h"
#ifdef AMPC_HAVE_CUDA
#include "kernels/cuda/reduce.h"
#endif
#include "passes/opset/training_ops.h"
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
using testing::ValueRange;

const std::vector<std::string> kFloatTypes = {"float", "float16", "bfloat16", "double"};

// Relative L2 tolerance for outputs of `type`: a few rounding steps of the type (FP16/BF16 results
// are FP32 results rounded once, so only near-ties may round the other way).
double Tolerance(const std::string& type) {
  if (type == "float16") return 2e-3;
  if (type == "bfloat16") return 1.5e-2;
  if (type == "double") return 1e-11;
  if (type == "float") return 2e-5;
  return 0;  // integers: exact
}

std::string Model(const std::string& graph) {
  return absl::StrCat(R"(<ir_version: 8, opset_import: ["" : 17, "ai.ampc" : 1]>)", "\n", graph);
}

std::string Dims(const std::vector<int64_t>& shape) { return absl::StrJoin(shape, ","); }

void Check(const ParityCase& parity) {
  SCOPED_TRACE(parity.model);
  ExpectCudaMatchesCpu(parity);
}

// ---- Reductions --------------------------------------------------------------------------------

struct ReduceShape {
  std::vector<int64_t> shape;
  std::vector<int64_t> axes;  // empty: all (the axes attribute or input left out)
  int keepdims;
};

// The launcher's paths: short contiguous rows (a warp each), long ones (a block each), strided
// rows (inner > 1: 32 to a block; few and long: a block each), reduced dims split by a kept one
// (general: a warp or a block each), everything, and size-1 dims; then few long rows cut into
// chunks whose partials a second launch combines: a whole tensor, per-channel statistics of an
// NCHW batch (general), a tall narrow strided column (a row to a block), and columns of a bias
// gradient's [n, c] sum over n, also under an outer dim (32 columns to a block).
const std::vector<ReduceShape> kReduceShapes = {
    {{64, 300}, {1}, 0},
    {{8, 5000}, {-1}, 1},
    {{300, 70}, {0}, 0},
    {{4, 50, 33}, {1}, 1},
    {{5000, 3}, {0}, 0},
    {{6, 40, 7}, {0, 2}, 0},
    {{40, 3, 50}, {0, 2}, 1},
    {{3, 4, 5}, {}, 0},
    {{5, 1, 9, 1}, {1, 2}, 1},
    {{64, 300}, {}, 0},
    {{16, 8, 32, 32}, {0, 2, 3}, 1},
    {{20000, 3}, {0}, 0},
    {{4096, 96}, {0}, 0},
    {{3, 2048, 40}, {1}, 1},
};

ValueRange ReduceRange(const std::string& op, bool integer) {
  if (op == "ReduceProd") return integer ? ValueRange{1, 3} : ValueRange{0.95, 1.05};
  if (op == "ReduceLogSum" || op == "ReduceLogSumExp") {
    return integer ? ValueRange{1, 4} : ValueRange{0.1, 4};
  }
  return integer ? ValueRange{-9, 10} : ValueRange{-2, 2};
}

ParityCase ReduceCase(const std::string& op, const std::string& type, const ReduceShape& s) {
  const bool integer = Tolerance(type) == 0;
  const std::string axes = absl::StrJoin(s.axes, ", ");
  std::string body;
  if (op == "ReduceSum") {  // axes as an input (opset 13+), read on the host
    body = s.axes.empty()
               ? absl::StrCat("y = ReduceSum<keepdims = ", s.keepdims, ">(x)")
               : absl::StrCat("axes = Constant <value = int64[", s.axes.size(), "] {", axes,
                              "}> ()\n  y = ReduceSum<keepdims = ", s.keepdims, ">(x, axes)");
  } else {
    body = absl::StrCat("y = ", op, "<keepdims = ", s.keepdims,
                        s.axes.empty() ? "" : absl::StrCat(", axes = [", axes, "]"), ">(x)");
  }
  ParityCase c;
  c.model = Model(
      absl::StrCat("g (", type, "[", Dims(s.shape), "] x) => (", type, "[] y) {\n  ", body, "\n}"));
  c.ranges = {{"x", ReduceRange(op, integer)}};
  // A product of thousands of factors rounds thousands of times, in another order on the GPU.
  c.tolerance = op == "ReduceProd" && !integer ? 10 * Tolerance(type) : Tolerance(type);
  return c;
}

const std::vector<std::string> kReductions = {
    "ReduceSum", "ReduceSumSquare", "ReduceMean",      "ReduceProd", "ReduceL1",
    "ReduceL2",  "ReduceLogSum",    "ReduceLogSumExp", "ReduceMax",  "ReduceMin"};

#ifdef AMPC_HAVE_CUDA
// The split policy (kernels/cuda/reduce.cu), by hand: a row splits into chunks of at least 4096
// elements when it has 8192 or more and rows * chunks stays within 2048; strided rows (columns)
// split 32 to a block, in chunks of 512, while there are at most 256 groups of 32. Each partial
// takes 8 bytes. Host code: no GPU needed.
TEST(CudaReduceParityTest, WorkspaceFollowsTheSplitPolicy) {
  auto bytes = [](cuda::ReduceOp op, std::vector<int64_t> dims, std::vector<int> axes) {
    return cuda::ReduceWorkspaceBytes(op, dims.data(), static_cast<int>(dims.size()), axes.data(),
                                      static_cast<int>(axes.size()));
  };
  using cuda::ReduceOp;
  EXPECT_EQ(bytes(ReduceOp::kSum, {64, 300}, {0, 1}), 1u * 5 * 8);  // 19200 in chunks of 4096
  EXPECT_EQ(bytes(ReduceOp::kMean, {16, 8, 32, 32}, {0, 2, 3}), 8u * 4 * 8);  // 16384 each
  EXPECT_EQ(bytes(ReduceOp::kSum, {4096, 96}, {0}), 96u * 8 * 8);             // columns: 4096 / 512
  EXPECT_EQ(bytes(ReduceOp::kMax, {3, 2048, 40}, {1}), 120u * 4 * 8);
  EXPECT_EQ(bytes(ReduceOp::kSum, {300, 70}, {0}), 0u);           // columns too short
  EXPECT_EQ(bytes(ReduceOp::kSum, {8, 5000}, {1}), 0u);           // rows too short
  EXPECT_EQ(bytes(ReduceOp::kSum, {2000, 9000}, {1}), 0u);        // enough rows already
  EXPECT_EQ(bytes(ReduceOp::kLogSumExp, {64, 300}, {0, 1}), 0u);  // never splits
}
#endif

// Without a GPU: every reduction case is a valid model that runs on the CPU, with CUDA kernels.
TEST(CudaReduceParityTest, ReductionModelsRunOnTheCpuAndHaveCudaKernels) {
  for (const std::string& op : kReductions) {
    for (const ReduceShape& s : kReduceShapes) {
      const ParityCase c = ReduceCase(op, "float", s);
      SCOPED_TRACE(c.model);
      testing::ExpectRunsOnCpuWithCudaKernels(c);
    }
  }
}

TEST(CudaReduceParityTest, EveryReductionOverEveryShapeClassInFloat) {
  AMPC_SKIP_WITHOUT_GPU();
  for (const std::string& op : kReductions) {
    for (const ReduceShape& s : kReduceShapes) Check(ReduceCase(op, "float", s));
  }
}

TEST(CudaReduceParityTest, ReductionsInFp16Bf16AndDouble) {
  AMPC_SKIP_WITHOUT_GPU();
  for (const std::string type : {"float16", "bfloat16", "double"}) {
    for (const std::string& op : kReductions) {
      for (const ReduceShape& s :
           {kReduceShapes[0], kReduceShapes[1], kReduceShapes[3], kReduceShapes[4],
            kReduceShapes[5], kReduceShapes[9], kReduceShapes[10], kReduceShapes[12]}) {
        Check(ReduceCase(op, type, s));
      }
    }
  }
}

TEST(CudaReduceParityTest, IntegerReductionsAreExact) {
  AMPC_SKIP_WITHOUT_GPU();
  for (const std::string type : {"int32", "int64"}) {
    for (const std::string op :
         {"ReduceSum", "ReduceSumSquare", "ReduceMean", "ReduceL1", "ReduceMax", "ReduceMin"}) {
      for (const ReduceShape& s : kReduceShapes) Check(ReduceCase(op, type, s));
    }
    Check(ReduceCase("ReduceProd", type, {{6, 40}, {1}, 0}));
  }
  for (const std::string type : {"int8", "uint8"}) {
    for (const std::string op : {"ReduceMax", "ReduceMin"}) {
      for (const ReduceShape& s : kReduceShapes) {
        ParityCase c = ReduceCase(op, type, s);
        c.ranges = {{"x", type == "int8" ? ValueRange{-128, 128} : ValueRange{0, 256}}};
        Check(c);
      }
    }
  }
}

TEST(CudaReduceParityTest, NoopWithEmptyAxesAndKeepdims) {
  AMPC_SKIP_WITHOUT_GPU();
  Check({Model(R"(g (float[4, 6] x) => (float[4, 6] y, float[1, 1] z) {
  y = ReduceSum<noop_with_empty_axes = 1>(x)
  z = ReduceMax<keepdims = 1>(x)
})")});
}

// ---- Softmax -----------------------------------------------------------------------------------

struct SoftmaxShape {
  std::vector<int64_t> shape;
  int axis;
};

const std::vector<SoftmaxShape> kSoftmaxShapes = {{{64, 300}, -1},  {{16, 3000}, 1},
                                                  {{4, 50, 33}, 1}, {{300, 70}, 0},
                                                  {{5000, 3}, 0},   {{2, 3, 4, 5}, 2}};

TEST(CudaReduceParityTest, SoftmaxAndLogSoftmax) {
  AMPC_SKIP_WITHOUT_GPU();
  for (const std::string& type : kFloatTypes) {
    for (const std::string op : {"Softmax", "LogSoftmax"}) {
      for (const SoftmaxShape& s : kSoftmaxShapes) {
        const std::string t = absl::StrCat(type, "[", Dims(s.shape), "]");
        Check({.model = Model(absl::StrCat("g (", t, " x) => (", t, " y) {\n  y = ", op,
                                           "<axis = ", s.axis, ">(x)\n}")),
               .ranges = {{"x", {-8, 8}}},
               .tolerance = Tolerance(type)});
      }
    }
  }
}

TEST(CudaReduceParityTest, SoftmaxBeforeOpset13FlattensFromTheAxis) {
  AMPC_SKIP_WITHOUT_GPU();
  Check({.model = R"(<ir_version: 7, opset_import: ["" : 11]>
g (float[4, 5, 6] x) => (float[4, 5, 6] y, float[4, 5, 6] z) {
  y = Softmax<axis = 1>(x)
  z = LogSoftmax<axis = 1>(x)
})",
         .ranges = {{"x", {-8, 8}}},
         .tolerance = Tolerance("float")});
}

TEST(CudaReduceParityTest, SoftmaxGradAndLogSoftmaxGrad) {
  AMPC_SKIP_WITHOUT_GPU();
  for (const std::string& type : kFloatTypes) {
    for (const std::string op : {"SoftmaxGrad", "LogSoftmaxGrad"}) {
      for (const SoftmaxShape& s : kSoftmaxShapes) {
        const std::string t = absl::StrCat(type, "[", Dims(s.shape), "]");
        Check({.model = Model(absl::StrCat("g (", t, " dy, ", t, " y) => (", t,
                                           " dx) {\n  dx = ai.ampc.", op, "<axis = ", s.axis,
                                           ">(dy, y)\n}")),
               .ranges = {{"dy", {-1, 1}}, {"y", {op == "SoftmaxGrad" ? 0.0 : -6.0, 1}}},
               .tolerance = 2 * Tolerance(type)});
      }
    }
  }
}

// ---- SoftmaxCrossEntropyLoss -------------------------------------------------------------------

struct LossShape {
  std::vector<int64_t> scores;  // [N, C, d...]
  std::string reduction;
  bool weights;
  bool ignore;  // ignore_index = 3, a class some labels take
  std::string label_type = "int64";
};

const std::vector<LossShape> kLossShapes = {
    {{64, 10}, "mean", false, false},  {{32, 10}, "mean", true, true},
    {{8, 5, 12}, "sum", true, false},  {{8, 6, 3, 4}, "none", false, true},
    {{16, 2000}, "mean", false, true}, {{40, 7}, "sum", false, true, "int32"},
    {{4, 9, 100}, "mean", true, true},
};

struct LossText {
  std::string attributes, labels_decl, w_decl, w_use, loss_type;
};

LossText TextOf(const LossShape& s, const std::string& type) {
  std::vector<int64_t> labels = s.scores;
  labels.erase(labels.begin() + 1);
  LossText t;
  t.attributes =
      absl::StrCat("reduction = \"", s.reduction, "\"", s.ignore ? ", ignore_index = 3" : "");
  t.labels_decl = absl::StrCat(s.label_type, "[", Dims(labels), "] labels");
  t.w_decl = s.weights ? absl::StrCat(", ", type, "[", s.scores[1], "] w") : "";
  t.w_use = s.weights ? ", w" : "";
  t.loss_type = s.reduction == "none" ? absl::StrCat(type, "[", Dims(labels), "]") : type;
  return t;
}

TEST(CudaReduceParityTest, SoftmaxCrossEntropyLossWithLogProb) {
  AMPC_SKIP_WITHOUT_GPU();
  for (const std::string& type : kFloatTypes) {
    for (const LossShape& s : kLossShapes) {
      const LossText t = TextOf(s, type);
      const std::string scores = absl::StrCat(type, "[", Dims(s.scores), "]");
      Check({.model = Model(absl::StrCat(
                 "g (", scores, " x, ", t.labels_decl, t.w_decl, ") => (", t.loss_type, " loss, ",
                 scores, " log_prob) {\n  loss, log_prob = SoftmaxCrossEntropyLoss<", t.attributes,
                 ">(x, labels", t.w_use, ")\n}")),
             .ranges = {{"x", {-4, 4}},
                        {"labels", {0, static_cast<double>(s.scores[1])}},
                        {"w", {0.5, 2}}},
             .tolerance = Tolerance(type)});
    }
  }
}

TEST(CudaReduceParityTest, SoftmaxCrossEntropyLossAloneWithoutLogProb) {
  AMPC_SKIP_WITHOUT_GPU();
  Check({.model = Model(R"(g (float[20, 8] x, int64[20] labels) => (float loss) {
  loss = SoftmaxCrossEntropyLoss(x, labels)
})"),
         .ranges = {{"x", {-4, 4}}, {"labels", {0, 8}}},
         .tolerance = Tolerance("float")});
}

TEST(CudaReduceParityTest, SoftmaxCrossEntropyLossGrad) {
  AMPC_SKIP_WITHOUT_GPU();
  for (const std::string& type : kFloatTypes) {
    for (const LossShape& s : kLossShapes) {
      const LossText t = TextOf(s, type);
      const std::string scores = absl::StrCat(type, "[", Dims(s.scores), "]");
      Check({.model = Model(absl::StrCat(
                 "g (", t.loss_type, " dloss, ", scores, " log_prob, ", t.labels_decl, t.w_decl,
                 ") => (", scores, " dx) {\n  dx = ai.ampc.SoftmaxCrossEntropyLossGrad<",
                 t.attributes, ">(dloss, log_prob, labels", t.w_use, ")\n}")),
             .ranges = {{"dloss", {-2, 2}},
                        {"log_prob", {-6, 0}},
                        {"labels", {0, static_cast<double>(s.scores[1])}},
                        {"w", {0.5, 2}}},
             .tolerance = Tolerance(type)});
    }
  }
}

#ifdef AMPC_HAVE_CUDA
// The loss of a "mean" reduction over many rows, run twice on the GPU, is the same bits (the
// launcher's two-stage sum has a fixed order; no atomics).
TEST(CudaReduceParityTest, LossIsBitwiseReproducible) {
  AMPC_SKIP_WITHOUT_GPU();
  RegisterAmpcSchemas();
  const onnx::ModelProto model = testing::ParseModelText(Model(R"(
g (float[4096, 50] x, int64[4096] labels, float[50] w) => (float loss) {
  loss = SoftmaxCrossEntropyLoss<reduction = "mean", ignore_index = 7>(x, labels, w)
})"));
  const std::vector<Tensor> inputs =
      testing::RandomInputs(model, {{"x", {-5, 5}}, {"labels", {0, 50}}, {"w", {0.1, 3}}}, 11);
  auto backend = CudaBackend::Create(0);
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto session = Session::Create(model, DefaultRegistry(), **backend);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<uint32_t> bits;
  for (int run = 0; run < 5; ++run) {
    auto out = (*session)->Run(inputs);
    ASSERT_TRUE(out.ok()) << out.status();
    auto host = ToHost((*out)[0]);
    ASSERT_TRUE(host.ok()) << host.status();
    uint32_t b = 0;
    std::memcpy(&b, host->raw(), sizeof(b));
    bits.push_back(b);
  }
  for (uint32_t b : bits) EXPECT_EQ(b, bits[0]);
}

// A label that is neither ignore_index nor a class: NaN loss on the GPU (the CPU fails the node).
TEST(CudaReduceParityTest, InvalidLabelGivesNaNNotACrash) {
  AMPC_SKIP_WITHOUT_GPU();
  auto backend = CudaBackend::Create(0);
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto session = Session::Create(testing::ParseModelText(Model(R"(
g (float[3, 4] x, int64[3] labels) => (float[3] loss) {
  loss = SoftmaxCrossEntropyLoss<reduction = "none">(x, labels)
})")),
                                 DefaultRegistry(), **backend);
  ASSERT_TRUE(session.ok()) << session.status();
  auto out = (*session)->Run(
      std::vector<Tensor>{testing::Floats({3, 4}, {0, 1, 2, 3, 0, 0, 0, 0, 1, 1, 1, 1}),
                          testing::Int64s({3}, {3, 4, 0})});
  ASSERT_TRUE(out.ok()) << out.status();
  auto host = ToHost((*out)[0]);
  ASSERT_TRUE(host.ok()) << host.status();
  const std::vector<float> loss = testing::Values<float>(*host);
  EXPECT_NEAR(loss[0],
              -std::log(std::exp(3.0) / (1 + std::exp(1.0) + std::exp(2.0) + std::exp(3.0))), 1e-5);
  EXPECT_TRUE(std::isnan(loss[1]));
  EXPECT_NEAR(loss[2], std::log(4.0), 1e-5);
}
#endif

// ---- LayerNormalization ------------------------------------------------------------------------

struct NormShape {
  std::vector<int64_t> x;
  int axis;
  std::vector<int64_t> scale, bias;  // trailing dims of the normalized shape
};

const std::vector<NormShape> kNormShapes = {
    {{64, 768}, -1, {768}, {768}},  {{8, 4096}, 1, {4096}, {4096}},
    {{4, 6, 32}, 1, {32}, {6, 32}}, {{10, 6, 32}, 1, {1, 32}, {6, 32}},
    {{1000, 64}, -1, {64}, {64}},   {{2, 3, 5}, 0, {3, 5}, {5}},
};

std::vector<int64_t> StatShape(const NormShape& s) {
  std::vector<int64_t> shape = s.x;
  const size_t axis = s.axis < 0 ? s.x.size() + s.axis : s.axis;
  for (size_t d = axis; d < shape.size(); ++d) shape[d] = 1;
  return shape;
}

TEST(CudaReduceParityTest, LayerNormalizationWithStatistics) {
  AMPC_SKIP_WITHOUT_GPU();
  for (const std::string& type : kFloatTypes) {
    for (const NormShape& s : kNormShapes) {
      const std::string x = absl::StrCat(type, "[", Dims(s.x), "]");
      const std::string stat = absl::StrCat("float[", Dims(StatShape(s)), "]");
      Check({.model = Model(absl::StrCat(
                 "g (", x, " x, ", type, "[", Dims(s.scale), "] s, ", type, "[", Dims(s.bias),
                 "] b) => (", x, " y, ", stat, " mean, ", stat, " inv) {\n  y, mean, inv = ",
                 "LayerNormalization<axis = ", s.axis, ", epsilon = 0.001>(x, s, b)\n}")),
             .ranges = {{"x", {3, 7}}, {"s", {0.5, 1.5}}, {"b", {-1, 1}}},
             .tolerance = Tolerance(type)});
    }
  }
}

TEST(CudaReduceParityTest, LayerNormalizationWithoutBiasOrStatistics) {
  AMPC_SKIP_WITHOUT_GPU();
  Check({.model = Model(R"(g (float16[16, 100] x, float16[100] s) => (float16[16, 100] y) {
  y = LayerNormalization(x, s)
})"),
         .tolerance = Tolerance("float16")});
}

TEST(CudaReduceParityTest, LayerNormalizationGrad) {
  AMPC_SKIP_WITHOUT_GPU();
  for (const std::string& type : kFloatTypes) {
    for (const NormShape& s : kNormShapes) {
      const std::string x = absl::StrCat(type, "[", Dims(s.x), "]");
      const std::string stat = absl::StrCat("float[", Dims(StatShape(s)), "]");
      const size_t axis = s.axis < 0 ? s.x.size() + s.axis : s.axis;
      const std::string normalized =
          absl::StrCat(type, "[", Dims(std::vector<int64_t>(s.x.begin() + axis, s.x.end())), "]");
      Check({.model = Model(absl::StrCat(
                 "g (", x, " dy, ", x, " x, ", type, "[", Dims(s.scale), "] s, ", stat, " mean, ",
                 stat, " inv) => (", x, " dx, ", normalized, " ds, ", normalized,
                 " db) {\n  dx, ds, db = ai.ampc.LayerNormalizationGrad<axis = ", s.axis,
                 ">(dy, x, s, mean, inv)\n}")),
             .ranges = {{"dy", {-1, 1}},
                        {"x", {3, 7}},
                        {"s", {0.5, 1.5}},
                        {"mean", {4, 6}},
                        {"inv", {0.5, 2}}},
             .tolerance = 2 * Tolerance(type)});
    }
  }
}

}  // namespace
}  // namespace ampc
