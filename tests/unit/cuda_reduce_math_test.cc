// The arithmetic of the reduce-family CUDA kernels (kernels/cuda/reduce_math.h) against the CPU
// backend, on the host: a sequential mirror of each kernel built from reduce_math.h's functions
// (identity, map, combine, finish; the per-element formulas; the loss's reduction rule) must give
// the CPU kernels' outputs bit for bit, since both sum in the same order here. Also the axis
// coalescing, against a brute-force walk of the original shape. Needs no GPU; the GPU kernels
// themselves are checked against the CPU in the parity tests where a GPU is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/reduce_common.h"
#include "kernels/cuda/reduce_math.h"
#include "passes/opset/gradient_ops.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/session.h"
#include "tests/support/model_text.h"

namespace ampc {
namespace {

using cuda::CoalesceReduce;
using cuda::LossReduction;
using cuda::ReduceLayout;
using cuda::ReduceOp;
using reduce::StoreAs;  // rounds once to storage type T, as the CPU kernels

#define TEST_TYPES                                                                               \
  DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble, DType::kInt8, DType::kInt32, \
      DType::kInt64, DType::kUint8

// ---- Tensors and CPU runs ----------------------------------------------------------------------

// Deterministic pseudo-random values in [lo, hi) (a fixed LCG).
std::vector<double> Pseudo(int64_t n, double lo, double hi, uint32_t seed) {
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = lo + (hi - lo) * static_cast<double>(seed >> 8) / static_cast<double>(1u << 24);
  }
  return v;
}

template <typename T>
double Widen(T v) {
  return static_cast<double>(Compute<T>::Load(v));
}

// A host tensor of `dtype` holding `values`, each rounded (or, for integers, truncated) once.
Tensor MakeTensor(DType dtype, const Shape& shape, const std::vector<double>& values) {
  Tensor t = Tensor::Host(dtype, shape);
  EXPECT_EQ(t.size(), static_cast<int64_t>(values.size()));
  Dispatch<TEST_TYPES>(dtype, [&]<typename T>() {
    for (int64_t i = 0; i < t.size(); ++i) t.data<T>()[i] = StoreAs<T>(values[i]);
  });
  return t;
}

std::vector<double> Doubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.size()));
  Dispatch<TEST_TYPES>(t.dtype(), [&]<typename T>() {
    for (size_t i = 0; i < v.size(); ++i) v[i] = Widen(t.data<T>()[i]);
  });
  return v;
}

std::string TypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kDouble:
      return "double";
    case DType::kInt8:
      return "int8";
    case DType::kUint8:
      return "uint8";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    default:
      return "float";
  }
}

// The outputs of a one-node model (ONNX text after the header) run on the CPU backend.
std::vector<Tensor> RunCpu(const std::string& graph, const std::vector<Tensor>& inputs) {
  static CpuBackend* backend = new CpuBackend(2);
  RegisterGradientOpSchemas();
  const std::string text =
      absl::StrCat(R"(<ir_version: 8, opset_import: ["" : 17, "ai.ampc" : 1]>)", "\n", graph);
  auto session = Session::Create(testing::ParseModelText(text), DefaultRegistry(), *backend);
  EXPECT_TRUE(session.ok()) << session.status() << "\n" << text;
  if (!session.ok()) return {};
  auto outputs = (*session)->Run(inputs);
  EXPECT_TRUE(outputs.ok()) << outputs.status() << "\n" << text;
  return outputs.ok() ? *std::move(outputs) : std::vector<Tensor>();
}

// Equal as values, NaN equal to NaN; at most 5 mismatches reported.
void ExpectSame(const std::vector<double>& actual, const std::vector<double>& expected,
                const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  ASSERT_FALSE(expected.empty()) << what;
  int reported = 0;
  for (size_t i = 0; i < actual.size() && reported < 5; ++i) {
    const bool same =
        actual[i] == expected[i] || (std::isnan(actual[i]) && std::isnan(expected[i]));
    if (!same) {
      ADD_FAILURE() << what << " [" << i << "]: CPU " << actual[i] << ", mirror " << expected[i];
      ++reported;
    }
  }
}

// The offsets of each row of `shape` along `axis` ([outer, n, inner]), rows in (outer, inner)
// order, each row's elements in axis order.
std::vector<std::vector<int64_t>> RowsAlong(const Shape& shape, int axis) {
  int64_t outer = 1, n = shape[axis], inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<std::vector<int64_t>> rows;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<int64_t>& row = rows.emplace_back();
      for (int64_t k = 0; k < n; ++k) row.push_back((o * n + k) * inner + i);
    }
  }
  return rows;
}

// ---- Axis coalescing ---------------------------------------------------------------------------

// For every element of `shape`: (output index, position in its reduction), from the original dims
// (kept dims row-major give the output, reduced dims row-major the position).
std::vector<std::pair<int64_t, int64_t>> BruteForceRoles(const Shape& shape,
                                                         const std::vector<int>& axes) {
  std::vector<std::pair<int64_t, int64_t>> roles;
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t flat = 0; flat < ElementCount(shape); ++flat) {
    int64_t rest = flat;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      index[d] = rest % shape[d];
      rest /= shape[d];
    }
    int64_t out = 0, pos = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      const bool reduced = std::find(axes.begin(), axes.end(), static_cast<int>(d)) != axes.end();
      (reduced ? pos : out) = (reduced ? pos : out) * shape[d] + index[d];
    }
    roles.emplace_back(out, pos);
  }
  return roles;
}

// The same from a coalesced layout.
std::vector<std::pair<int64_t, int64_t>> LayoutRoles(const ReduceLayout& layout) {
  int64_t total = 1;
  for (int d = 0; d < layout.rank; ++d) total *= layout.sizes[d];
  std::vector<std::pair<int64_t, int64_t>> roles;
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rest = flat, out = 0, pos = 0, out_scale = 1, pos_scale = 1;
    for (int d = layout.rank - 1; d >= 0; --d) {
      const int64_t i = rest % layout.sizes[d];
      rest /= layout.sizes[d];
      if (layout.reduced[d]) {
        pos += i * pos_scale;
        pos_scale *= layout.sizes[d];
      } else {
        out += i * out_scale;
        out_scale *= layout.sizes[d];
      }
    }
    roles.emplace_back(out, pos);
  }
  return roles;
}

TEST(CudaReduceMathTest, CoalescingKeepsEveryElementsOutputAndPosition) {
  struct Case {
    Shape shape;
    std::vector<int> axes;
  };
  const Case cases[] = {
      {{2, 3, 4}, {1}},       {{2, 3, 4}, {0, 2}},    {{2, 3, 4}, {1, 2}},
      {{2, 3, 4}, {}},        {{2, 3, 4}, {0, 1, 2}}, {{2, 1, 3, 1, 4}, {1, 2, 3}},
      {{1, 1, 5}, {0}},       {{3, 2, 2, 5}, {1, 2}}, {{2, 3, 2, 3, 2}, {0, 2, 4}},
      {{4, 1, 1, 3}, {0, 3}}, {{2, 0, 3}, {0}},
  };
  for (const Case& c : cases) {
    ReduceLayout layout;
    ASSERT_TRUE(CoalesceReduce(c.shape.data(), static_cast<int>(c.shape.size()), c.axes.data(),
                               static_cast<int>(c.axes.size()), &layout));
    const std::string what = absl::StrCat("shape [", absl::StrJoin(c.shape, ","), "] axes {",
                                          absl::StrJoin(c.axes, ","), "}");
    for (int d = 0; d < layout.rank; ++d) {
      EXPECT_NE(layout.sizes[d], 1) << what << ": a size-1 dim was kept";
      if (d > 0) {
        EXPECT_NE(layout.reduced[d], layout.reduced[d - 1]) << what << ": not merged";
      }
    }
    EXPECT_EQ(LayoutRoles(layout), BruteForceRoles(c.shape, c.axes)) << what;
  }
}

TEST(CudaReduceMathTest, OuterReduceInnerViewOnlyForOneRunOfReducedDims) {
  const Shape shape = {2, 3, 4, 5};
  const std::vector<int> middle = {1, 2}, split = {0, 2};
  ReduceLayout layout;
  cuda::OuterReduceInner view;
  ASSERT_TRUE(CoalesceReduce(shape.data(), 4, middle.data(), 2, &layout));
  ASSERT_TRUE(cuda::AsOuterReduceInner(layout, &view));
  EXPECT_EQ(view.outer, 2);
  EXPECT_EQ(view.n, 12);
  EXPECT_EQ(view.inner, 5);
  ASSERT_TRUE(CoalesceReduce(shape.data(), 4, split.data(), 2, &layout));
  EXPECT_FALSE(cuda::AsOuterReduceInner(layout, &view));
}

TEST(CudaReduceMathTest, CoalescingRefusesMoreThanMaxDimsOfAlternatingRuns) {
  const Shape shape(cuda::kMaxReduceDims + 1, 2);
  std::vector<int> even;
  for (int d = 0; d < static_cast<int>(shape.size()); d += 2) even.push_back(d);
  ReduceLayout layout;
  EXPECT_FALSE(CoalesceReduce(shape.data(), static_cast<int>(shape.size()), even.data(),
                              static_cast<int>(even.size()), &layout));
  EXPECT_TRUE(CoalesceReduce(shape.data(), cuda::kMaxReduceDims, even.data(),
                             static_cast<int>(even.size()) - 1, &layout));
  EXPECT_EQ(layout.rank, cuda::kMaxReduceDims);
}

// ---- Reductions --------------------------------------------------------------------------------

template <typename T, typename Op>
double MirrorRow(const T* x, const std::vector<int64_t>& offsets) {
  using C = typename Compute<T>::type;
  const int64_t n = static_cast<int64_t>(offsets.size());
  if constexpr (std::is_same_v<Op, cuda::LogSumExpReduce<C>>) {
    using Max = cuda::MaxReduce<C>;
    C max = Max::Identity();
    for (int64_t o : offsets) max = Max::Combine(max, Compute<T>::Load(x[o]));
    typename Op::A sum = Op::Identity();
    for (int64_t o : offsets) sum = Op::Combine(sum, Op::Map(Compute<T>::Load(x[o]), max));
    return Widen(StoreAs<T>(Op::Finish(max, sum)));
  } else {
    typename Op::A acc = Op::Identity();
    for (int64_t o : offsets) acc = Op::Combine(acc, Op::Map(Compute<T>::Load(x[o])));
    return Widen(StoreAs<T>(Op::Finish(acc, n)));
  }
}

template <typename T>
double MirrorReduceRow(ReduceOp op, const T* x, const std::vector<int64_t>& offsets) {
  using C = typename Compute<T>::type;
  switch (op) {
    case ReduceOp::kSum:
      return MirrorRow<T, cuda::SumReduce<C>>(x, offsets);
    case ReduceOp::kSumSquare:
      return MirrorRow<T, cuda::SumSquareReduce<C>>(x, offsets);
    case ReduceOp::kMean:
      return MirrorRow<T, cuda::MeanReduce<C>>(x, offsets);
    case ReduceOp::kProd:
      return MirrorRow<T, cuda::ProdReduce<C>>(x, offsets);
    case ReduceOp::kL1:
      return MirrorRow<T, cuda::L1Reduce<C>>(x, offsets);
    case ReduceOp::kL2:
      return MirrorRow<T, cuda::L2Reduce<C>>(x, offsets);
    case ReduceOp::kLogSum:
      return MirrorRow<T, cuda::LogSumReduce<C>>(x, offsets);
    case ReduceOp::kLogSumExp:
      return MirrorRow<T, cuda::LogSumExpReduce<C>>(x, offsets);
    case ReduceOp::kMax:
      return MirrorRow<T, cuda::MaxReduce<C>>(x, offsets);
    case ReduceOp::kMin:
      return MirrorRow<T, cuda::MinReduce<C>>(x, offsets);
  }
  return 0;
}

// The reduction of x over `axes` by the mirror: outputs in kept-dims order, each output's
// elements in reduced-dims order (the CPU's order).
std::vector<double> MirrorReduce(ReduceOp op, const Tensor& x, const std::vector<int>& axes) {
  std::vector<std::vector<int64_t>> rows;
  const auto roles = BruteForceRoles(x.shape(), axes);
  for (size_t flat = 0; flat < roles.size(); ++flat) {
    const auto [out, pos] = roles[flat];
    if (static_cast<size_t>(out) >= rows.size()) rows.resize(out + 1);
    rows[out].push_back(static_cast<int64_t>(flat));  // flat order is pos order within a row
  }
  if (roles.empty()) {  // n == 0: every output reduces nothing
    int64_t outputs = 1;
    for (size_t d = 0; d < x.shape().size(); ++d) {
      if (std::find(axes.begin(), axes.end(), static_cast<int>(d)) == axes.end()) {
        outputs *= x.shape()[d];
      }
    }
    rows.resize(outputs);
  }
  std::vector<double> y;
  Dispatch<TEST_TYPES>(x.dtype(), [&]<typename T>() {
    for (const auto& row : rows) y.push_back(MirrorReduceRow(op, x.data<T>(), row));
  });
  return y;
}

struct ReduceCase {
  const char* name;
  ReduceOp op;
  double lo, hi;  // float inputs in [lo, hi)
  bool small_ints;
};

constexpr ReduceCase kReduceCases[] = {
    {"ReduceSum", ReduceOp::kSum, -2, 2, false},
    {"ReduceSumSquare", ReduceOp::kSumSquare, -2, 2, false},
    {"ReduceMean", ReduceOp::kMean, -2, 2, false},
    {"ReduceProd", ReduceOp::kProd, 0.6, 1.5, false},
    {"ReduceL1", ReduceOp::kL1, -2, 2, false},
    {"ReduceL2", ReduceOp::kL2, -2, 2, false},
    {"ReduceLogSum", ReduceOp::kLogSum, 0.1, 2, false},
    {"ReduceLogSumExp", ReduceOp::kLogSumExp, -8, 8, false},
    {"ReduceMax", ReduceOp::kMax, -2, 2, true},
    {"ReduceMin", ReduceOp::kMin, -2, 2, true},
};

void CheckReduce(const ReduceCase& c, DType dtype, const Shape& shape, const std::vector<int>& axes,
                 bool with_nan) {
  const bool integer = dtype != DType::kFloat && dtype != DType::kFloat16 &&
                       dtype != DType::kBFloat16 && dtype != DType::kDouble;
  // Integers in {1, 2, 3} ({1, 2} for products, so 60 of them fit in int64).
  std::vector<double> values =
      integer ? Pseudo(ElementCount(shape), 1, c.op == ReduceOp::kProd ? 3 : 4, 5)
              : Pseudo(ElementCount(shape), c.lo, c.hi, 5);
  if (integer) {
    for (double& v : values) v = std::floor(v);
  }
  if (with_nan && values.size() > 7) values[7] = NAN;
  const Tensor x = MakeTensor(dtype, shape, values);
  const std::string type = TypeName(dtype);
  // Opset 17 (libonnx 1.12's last): ReduceSum takes axes as an input, the others as an attribute.
  const bool axes_input = c.op == ReduceOp::kSum;
  const std::string graph =
      absl::StrCat("g (", type, "[", absl::StrJoin(shape, ","), "] x",
                   axes_input ? absl::StrCat(", int64[", axes.size(), "] axes") : "", ") => (",
                   type, "[] y) { y = ", c.name, "<keepdims = 0",
                   axes_input ? "" : absl::StrCat(", axes = [", absl::StrJoin(axes, ","), "]"),
                   ">(x", axes_input ? ", axes" : "", ") }");
  std::vector<Tensor> inputs = {x};
  if (axes_input) {
    inputs.push_back(MakeTensor(DType::kInt64, {static_cast<int64_t>(axes.size())},
                                std::vector<double>(axes.begin(), axes.end())));
  }
  const std::vector<Tensor> out = RunCpu(graph, inputs);
  ASSERT_EQ(out.size(), 1u) << graph;
  ExpectSame(Doubles(out[0]), MirrorReduce(c.op, x, axes),
             absl::StrCat(c.name, " ", type, " [", absl::StrJoin(shape, ","), "] axes {",
                          absl::StrJoin(axes, ","), "}", with_nan ? " with a NaN" : ""));
}

TEST(CudaReduceMathTest, ReductionsMatchTheCpuKernels) {
  const std::vector<std::vector<int>> axis_sets = {{0}, {1}, {2}, {0, 2}, {1, 2}, {0, 1, 2}};
  for (const ReduceCase& c : kReduceCases) {
    std::vector<DType> types = {DType::kFloat,  DType::kFloat16, DType::kBFloat16,
                                DType::kDouble, DType::kInt32,   DType::kInt64};
    if (c.small_ints) types.insert(types.end(), {DType::kInt8, DType::kUint8});
    for (DType dtype : types) {
      for (const auto& axes : axis_sets) CheckReduce(c, dtype, {3, 4, 5}, axes, false);
    }
    CheckReduce(c, DType::kFloat, {3, 4, 5}, {1}, true);
    CheckReduce(c, DType::kFloat16, {3, 1, 5}, {0, 1}, true);
  }
}

TEST(CudaReduceMathTest, ReductionsOfNothingMatchTheCpuKernels) {
  for (const ReduceCase& c : kReduceCases) {
    CheckReduce(c, DType::kFloat, {2, 0, 3}, {1}, false);
    // An integer log of nothing is a log(0) cast to an integer: not a case to pin.
    if (c.op != ReduceOp::kLogSum && c.op != ReduceOp::kLogSumExp) {
      CheckReduce(c, DType::kInt32, {2, 0, 3}, {1}, false);
    }
  }
}

// ---- Softmax and its gradients -----------------------------------------------------------------

std::vector<double> MirrorSoftmax(const Tensor& x, int axis, bool log) {
  std::vector<double> y(static_cast<size_t>(x.size()));
  Dispatch<AMPC_FLOAT_TYPES>(x.dtype(), [&]<typename T>() {
    using F = cuda::FloatOf<typename Compute<T>::type>;
    const T* p = x.data<T>();
    for (const auto& row : RowsAlong(x.shape(), axis)) {
      F max = cuda::MaxReduce<F>::Identity(), sum = 0;
      for (int64_t o : row) max = cuda::MaxReduce<F>::Combine(max, Compute<T>::Load(p[o]));
      for (int64_t o : row) sum += cuda::Exp(F(Compute<T>::Load(p[o])) - max);
      const F log_sum = cuda::Log(sum);
      for (int64_t o : row) {
        const F v = Compute<T>::Load(p[o]);
        y[o] = Widen(StoreAs<T>(log ? cuda::LogSoftmaxValue(v, max, log_sum)
                                    : cuda::SoftmaxValue(v, max, sum)));
      }
    }
  });
  return y;
}

std::vector<double> MirrorSoftmaxGrad(const Tensor& dy, const Tensor& y, int axis, bool log) {
  std::vector<double> dx(static_cast<size_t>(y.size()));
  Dispatch<AMPC_FLOAT_TYPES>(y.dtype(), [&]<typename T>() {
    using F = typename Compute<T>::type;
    const T* pdy = dy.data<T>();
    const T* py = y.data<T>();
    for (const auto& row : RowsAlong(y.shape(), axis)) {
      F sum = 0;
      for (int64_t o : row) {
        const F g = Compute<T>::Load(pdy[o]);
        sum += log ? g : cuda::SoftmaxGradTerm(g, F(Compute<T>::Load(py[o])));
      }
      for (int64_t o : row) {
        const F g = Compute<T>::Load(pdy[o]), v = Compute<T>::Load(py[o]);
        dx[o] = Widen(StoreAs<T>(log ? cuda::LogSoftmaxGradValue(g, v, sum)
                                     : cuda::SoftmaxGradValue(g, v, sum)));
      }
    }
  });
  return dx;
}

TEST(CudaReduceMathTest, SoftmaxAndItsGradientsMatchTheCpuKernels) {
  const Shape shape = {3, 4, 5};
  for (DType dtype : {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble}) {
    const std::string t = absl::StrCat(TypeName(dtype), "[3,4,5]");
    for (int axis : {0, 1, 2}) {
      std::vector<double> values = Pseudo(60, -6, 6, 3);
      values[11] = 30;  // a large logit: the max must be subtracted
      const Tensor x = MakeTensor(dtype, shape, values);
      const Tensor dy = MakeTensor(dtype, shape, Pseudo(60, -1, 1, 4));
      for (bool log : {false, true}) {
        const std::string op = log ? "LogSoftmax" : "Softmax";
        const std::string what = absl::StrCat(op, " ", t, " axis ", axis);
        const std::vector<Tensor> y = RunCpu(
            absl::StrCat("g (", t, " x) => (", t, " y) { y = ", op, "<axis = ", axis, ">(x) }"),
            {x});
        ASSERT_EQ(y.size(), 1u) << what;
        ExpectSame(Doubles(y[0]), MirrorSoftmax(x, axis, log), what);
        const std::vector<Tensor> dx =
            RunCpu(absl::StrCat("g (", t, " dy, ", t, " y) => (", t, " dx) { dx = ai.ampc.", op,
                                "Grad<axis = ", axis, ">(dy, y) }"),
                   {dy, y[0]});
        ASSERT_EQ(dx.size(), 1u) << what;
        ExpectSame(Doubles(dx[0]), MirrorSoftmaxGrad(dy, y[0], axis, log), what + " grad");
      }
    }
  }
}

// ---- SoftmaxCrossEntropyLoss -------------------------------------------------------------------

struct LossCase {
  Shape scores;  // [N, C, d...]
  std::vector<double> labels;
  LossReduction reduction;
  bool weights;
  bool ignore;  // ignore_index = 2
};

constexpr int64_t kIgnoreIndex = 2;

const char* ReductionName(LossReduction r) {
  return r == LossReduction::kNone ? "none" : r == LossReduction::kSum ? "sum" : "mean";
}

// Loss, log_prob and dscores (for dloss `g`) by the mirror.
struct LossMirror {
  std::vector<double> loss, log_prob, dscores;
};

template <typename T>
LossMirror MirrorLoss(const LossCase& c, const Tensor& scores, const Tensor* weights,
                      const Tensor& dloss) {
  using F = cuda::FloatOf<typename Compute<T>::type>;
  const T* x = scores.data<T>();
  const int64_t classes = c.scores[1];
  const auto rows = RowsAlong(scores.shape(), 1);  // row r = (n, d) is label r
  std::vector<F> log_prob(static_cast<size_t>(scores.size()));
  LossMirror m;
  m.log_prob.resize(log_prob.size());
  F loss_sum = 0, weight_sum = 0;
  std::vector<F> applied(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    F max = cuda::MaxReduce<F>::Identity(), sum = 0;
    for (int64_t o : rows[r]) max = cuda::MaxReduce<F>::Combine(max, Compute<T>::Load(x[o]));
    for (int64_t o : rows[r]) sum += cuda::Exp(F(Compute<T>::Load(x[o])) - max);
    const F log_sum = cuda::Log(sum);
    for (int64_t o : rows[r]) {
      log_prob[o] = cuda::CrossEntropyLogProb(F(Compute<T>::Load(x[o])), max, log_sum);
      m.log_prob[o] = Widen(StoreAs<T>(log_prob[o]));
    }
    const int64_t label = static_cast<int64_t>(c.labels[r]);
    F element = 0, weight = 0;
    if (!cuda::LabelIgnored(label, c.ignore, kIgnoreIndex)) {
      EXPECT_TRUE(cuda::LabelValid(label, classes));
      weight = weights == nullptr ? F{1} : F(Compute<T>::Load(weights->data<T>()[label]));
      element = cuda::CrossEntropyElementLoss(weight, log_prob[rows[r][label]]);
    }
    applied[r] = weight;
    if (c.reduction == LossReduction::kNone) m.loss.push_back(Widen(StoreAs<T>(element)));
    loss_sum += element;
    weight_sum += weight;
  }
  if (c.reduction != LossReduction::kNone) {
    m.loss.push_back(Widen(StoreAs<T>(cuda::ReducedLoss(c.reduction, loss_sum, weight_sum))));
  }
  // The gradient, from the rounded log_prob the grad op reads.
  m.dscores.resize(log_prob.size());
  const T* g = dloss.data<T>();
  for (size_t r = 0; r < rows.size(); ++r) {
    const int64_t label = static_cast<int64_t>(c.labels[r]);
    const bool ignored = cuda::LabelIgnored(label, c.ignore, kIgnoreIndex);
    const F dl = Compute<T>::Load(g[c.reduction == LossReduction::kNone ? r : 0]);
    const F k = cuda::LossGradFactor(c.reduction, applied[r], dl, weight_sum);
    for (int64_t cls = 0; cls < classes; ++cls) {
      const int64_t o = rows[r][cls];
      const F lp = Compute<T>::Load(StoreAs<T>(log_prob[o]));
      m.dscores[o] =
          ignored ? 0.0 : Widen(StoreAs<T>(cuda::CrossEntropyGradValue(k, lp, cls == label)));
    }
  }
  return m;
}

void CheckLoss(const LossCase& c, DType dtype) {
  Shape labels_shape = c.scores;
  labels_shape.erase(labels_shape.begin() + 1);
  const std::string t = TypeName(dtype), dims = absl::StrJoin(c.scores, ",");
  const std::string label_dims = absl::StrJoin(labels_shape, ",");
  const std::string loss_type =
      c.reduction == LossReduction::kNone ? absl::StrCat(t, "[", label_dims, "]") : t;
  std::string attributes = absl::StrCat("reduction = \"", ReductionName(c.reduction), "\"");
  if (c.ignore) absl::StrAppend(&attributes, ", ignore_index = ", kIgnoreIndex);
  const std::string w_decl = c.weights ? absl::StrCat(", ", t, "[", c.scores[1], "] w") : "";
  const std::string w_use = c.weights ? ", w" : "";
  const std::string what = absl::StrCat("SoftmaxCrossEntropyLoss ", t, "[", dims, "] ", attributes,
                                        c.weights ? " with weights" : "");

  const Tensor scores = MakeTensor(dtype, c.scores, Pseudo(ElementCount(c.scores), -3, 3, 9));
  const Tensor labels = MakeTensor(DType::kInt64, labels_shape, c.labels);
  const Tensor weights = MakeTensor(dtype, {c.scores[1]}, Pseudo(c.scores[1], 0.5, 2, 11));
  std::vector<Tensor> inputs = {scores, labels};
  if (c.weights) inputs.push_back(weights);
  const std::vector<Tensor> forward =
      RunCpu(absl::StrCat("g (", t, "[", dims, "] x, int64[", label_dims, "] labels", w_decl,
                          ") => (", loss_type, " loss, ", t, "[", dims,
                          "] log_prob) {\n  loss, log_prob = ", "SoftmaxCrossEntropyLoss<",
                          attributes, ">(x, labels", w_use, ")\n}"),
             inputs);
  ASSERT_EQ(forward.size(), 2u) << what;

  const Shape loss_shape = c.reduction == LossReduction::kNone ? labels_shape : Shape{};
  const Tensor dloss = MakeTensor(dtype, loss_shape, Pseudo(ElementCount(loss_shape), -2, 2, 13));
  std::vector<Tensor> grad_inputs = {dloss, forward[1], labels};
  if (c.weights) grad_inputs.push_back(weights);
  const std::vector<Tensor> grad =
      RunCpu(absl::StrCat("g (", loss_type, " dloss, ", t, "[", dims, "] log_prob, int64[",
                          label_dims, "] labels", w_decl, ") => (", t, "[", dims,
                          "] dx) {\n  dx = ", "ai.ampc.SoftmaxCrossEntropyLossGrad<", attributes,
                          ">(dloss, log_prob, labels", w_use, ")\n}"),
             grad_inputs);
  ASSERT_EQ(grad.size(), 1u) << what;

  LossMirror m;
  Dispatch<AMPC_FLOAT_TYPES>(dtype, [&]<typename T>() {
    m = MirrorLoss<T>(c, scores, c.weights ? &weights : nullptr, dloss);
  });
  ExpectSame(Doubles(forward[0]), m.loss, what + ": loss");
  ExpectSame(Doubles(forward[1]), m.log_prob, what + ": log_prob");
  ExpectSame(Doubles(grad[0]), m.dscores, what + ": grad");
}

TEST(CudaReduceMathTest, CrossEntropyLossAndGradMatchTheCpuKernels) {
  const std::vector<double> labels_2d = {0, 2, 4, 1, 2, 3};
  const std::vector<double> labels_3d = {0, 2, 3, 1, 2, 2, 0, 1};  // [N=2, d=4]
  for (LossReduction reduction :
       {LossReduction::kNone, LossReduction::kSum, LossReduction::kMean}) {
    for (bool weights : {false, true}) {
      for (bool ignore : {false, true}) {
        for (DType dtype : {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble}) {
          CheckLoss({{6, 5}, labels_2d, reduction, weights, ignore}, dtype);
          CheckLoss({{2, 4, 2, 2}, labels_3d, reduction, weights, ignore}, dtype);
        }
      }
    }
  }
}

// The "mean" rule by hand: the weighted losses over the weights applied, ignored labels taking
// part in neither (an independent check of ReducedLoss and LossGradFactor).
TEST(CudaReduceMathTest, MeanLossDividesByTheAppliedWeights) {
  // Three samples, weights 2, 3 and (ignored) 5, log_probs -1, -2, -4.
  const double loss_sum = 2 * 1 + 3 * 2, weight_sum = 2 + 3;
  EXPECT_EQ(cuda::ReducedLoss(LossReduction::kMean, loss_sum, weight_sum), 8.0 / 5.0);
  EXPECT_EQ(cuda::ReducedLoss(LossReduction::kSum, loss_sum, weight_sum), 8.0);
  EXPECT_EQ(cuda::LossGradFactor(LossReduction::kMean, 3.0, 0.5, weight_sum), 3.0 * (0.5 / 5.0));
  EXPECT_EQ(cuda::LossGradFactor(LossReduction::kSum, 3.0, 0.5, weight_sum), 1.5);
  EXPECT_TRUE(cuda::LabelIgnored(-100, true, -100));
  EXPECT_FALSE(cuda::LabelIgnored(-100, false, -100));
  EXPECT_FALSE(cuda::LabelValid(-100, 10));
  EXPECT_FALSE(cuda::LabelValid(10, 10));
}

// ---- LayerNormalization ------------------------------------------------------------------------

struct NormMirror {
  std::vector<double> y, mean, inv_std;
};

// Scale and bias are read at [j % size], as the kernels read them.
template <typename T>
NormMirror MirrorLayerNorm(const Tensor& x, const Tensor& scale, const Tensor& bias, int64_t cols,
                           float epsilon) {
  using F = typename Compute<T>::type;
  const T* p = x.data<T>();
  NormMirror m;
  for (int64_t r = 0; r < x.size() / cols; ++r) {
    const T* row = p + r * cols;
    F sum = 0, squares = 0;
    for (int64_t j = 0; j < cols; ++j) sum += Compute<T>::Load(row[j]);
    const F mean = sum / static_cast<F>(cols);
    for (int64_t j = 0; j < cols; ++j) {
      const F d = Compute<T>::Load(row[j]) - mean;
      squares += d * d;
    }
    const F inv = cuda::InvStdDev(squares / static_cast<F>(cols), epsilon);
    for (int64_t j = 0; j < cols; ++j) {
      const F s = Compute<T>::Load(scale.data<T>()[j % scale.size()]);
      const F b = Compute<T>::Load(bias.data<T>()[j % bias.size()]);
      m.y.push_back(
          Widen(StoreAs<T>(cuda::LayerNormValue(F(Compute<T>::Load(row[j])), mean, inv, s, b))));
    }
    m.mean.push_back(static_cast<float>(mean));
    m.inv_std.push_back(static_cast<float>(inv));
  }
  return m;
}

// dx, dscale, dbias from statistics in FP32.
template <typename T>
NormMirror MirrorLayerNormGrad(const Tensor& dy, const Tensor& x, const Tensor& scale,
                               const Tensor& mean_t, const Tensor& inv_t, int64_t cols) {
  using F = typename Compute<T>::type;
  const int64_t rows = x.size() / cols;
  const T* pdy = dy.data<T>();
  const T* px = x.data<T>();
  const auto load = [](const Tensor& t, int64_t i) { return F(t.data<float>()[i]); };
  const auto g_at = [&](int64_t r, int64_t j) {
    return F(Compute<T>::Load(pdy[r * cols + j])) *
           F(Compute<T>::Load(scale.data<T>()[j % scale.size()]));
  };
  const auto xhat = [&](int64_t r, int64_t j) {
    return cuda::LayerNormXhat(F(Compute<T>::Load(px[r * cols + j])), load(mean_t, r),
                               load(inv_t, r));
  };
  NormMirror m;  // y holds dx, mean dscale, inv_std dbias
  for (int64_t r = 0; r < rows; ++r) {
    F sum_g = 0, sum_gx = 0;
    for (int64_t j = 0; j < cols; ++j) {
      sum_g += g_at(r, j);
      sum_gx += g_at(r, j) * xhat(r, j);
    }
    const F mean_g = sum_g / static_cast<F>(cols), mean_gx = sum_gx / static_cast<F>(cols);
    for (int64_t j = 0; j < cols; ++j) {
      m.y.push_back(Widen(StoreAs<T>(
          cuda::LayerNormGradDx(g_at(r, j), xhat(r, j), load(inv_t, r), mean_g, mean_gx))));
    }
  }
  for (int64_t j = 0; j < cols; ++j) {
    F s = 0, b = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const F g = Compute<T>::Load(pdy[r * cols + j]);
      s += g * xhat(r, j);
      b += g;
    }
    m.mean.push_back(Widen(StoreAs<T>(s)));
    m.inv_std.push_back(Widen(StoreAs<T>(b)));
  }
  return m;
}

TEST(CudaReduceMathTest, LayerNormalizationAndGradMatchTheCpuKernels) {
  const Shape shape = {3, 4, 6};
  struct Case {
    int axis;
    Shape scale, bias;  // suffixes of the normalized shape
  };
  const Case cases[] = {{1, {4, 6}, {4, 6}}, {1, {6}, {1, 6}}, {2, {6}, {6}}, {0, {6}, {4, 6}}};
  constexpr float kEpsilon = 1e-3f;
  for (DType dtype : {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble}) {
    for (const Case& c : cases) {
      const std::string t = TypeName(dtype);
      const std::string what = absl::StrCat("LayerNormalization ", t, " axis ", c.axis, " scale [",
                                            absl::StrJoin(c.scale, ","), "]");
      int64_t cols = 1;
      Shape stat_shape = shape;
      for (size_t d = c.axis; d < shape.size(); ++d) {
        cols *= shape[d];
        stat_shape[d] = 1;
      }
      std::vector<double> xv = Pseudo(72, -2, 2, 21);
      for (double& v : xv) v += 5;  // a mean far from 0: the two-pass variance matters
      const Tensor x = MakeTensor(dtype, shape, xv);
      const Tensor scale = MakeTensor(dtype, c.scale, Pseudo(ElementCount(c.scale), 0.5, 1.5, 22));
      const Tensor bias = MakeTensor(dtype, c.bias, Pseudo(ElementCount(c.bias), -1, 1, 23));
      const auto decl = [&](const std::string& type, const Shape& s, const std::string& name) {
        return absl::StrCat(type, "[", absl::StrJoin(s, ","), "] ", name);
      };
      const std::vector<Tensor> forward =
          RunCpu(absl::StrCat("g (", decl(t, shape, "x"), ", ", decl(t, c.scale, "s"), ", ",
                              decl(t, c.bias, "b"), ") => (", decl(t, shape, "y"), ", ",
                              decl("float", stat_shape, "m"), ", ", decl("float", stat_shape, "r"),
                              ") {\n  y, m, r = LayerNormalization<axis = ", c.axis,
                              ", epsilon = 0.001>(x, s, b)\n}"),
                 {x, scale, bias});
      ASSERT_EQ(forward.size(), 3u) << what;
      ASSERT_EQ(forward[1].dtype(), DType::kFloat) << what;

      const Tensor dy = MakeTensor(dtype, shape, Pseudo(72, -1, 1, 24));
      const Shape normalized(shape.begin() + c.axis, shape.end());
      const std::vector<Tensor> grad =
          RunCpu(absl::StrCat("g (", decl(t, shape, "dy"), ", ", decl(t, shape, "x"), ", ",
                              decl(t, c.scale, "s"), ", ", decl("float", stat_shape, "m"), ", ",
                              decl("float", stat_shape, "r"), ") => (", decl(t, shape, "dx"), ", ",
                              decl(t, normalized, "ds"), ", ", decl(t, normalized, "db"),
                              ") {\n  dx, ds, db = ai.ampc.LayerNormalizationGrad<axis = ", c.axis,
                              ">(dy, x, s, m, r)\n}"),
                 {dy, x, scale, forward[1], forward[2]});
      ASSERT_EQ(grad.size(), 3u) << what;

      Dispatch<AMPC_FLOAT_TYPES>(dtype, [&]<typename T>() {
        const NormMirror m = MirrorLayerNorm<T>(x, scale, bias, cols, kEpsilon);
        ExpectSame(Doubles(forward[0]), m.y, what + ": Y");
        ExpectSame(Doubles(forward[1]), m.mean, what + ": Mean");
        ExpectSame(Doubles(forward[2]), m.inv_std, what + ": InvStdDev");
        const NormMirror g = MirrorLayerNormGrad<T>(dy, x, scale, forward[1], forward[2], cols);
        ExpectSame(Doubles(grad[0]), g.y, what + ": dx");
        ExpectSame(Doubles(grad[1]), g.mean, what + ": dscale");
        ExpectSame(Doubles(grad[2]), g.inv_std, what + ": dbias");
      });
    }
  }
}

}  // namespace
}  // namespace ampc
