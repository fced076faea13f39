// Reductions (ReduceSum ... ReduceLogSumExp), ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax, CumSum,
// CumProd, TopK and the two classification losses. Sums accumulate in FP32 (FP64 for FP64 inputs)
// and each output is rounded once.
#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/lane_sums.h"
#include "kernels/cpu/reduce_common.h"
#include "kernels/cpu/reduce_loss.h"
#include "kernels/cpu/reduce_scan.h"
#include "kernels/cpu/reduce_softmax.h"
#include "kernels/cpu/scratch_arena.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

using reduce::Acc;
using reduce::FloatAcc;
using reduce::LoadAcc;
using reduce::StoreAs;

// Which input elements feed each output element of a reduction.
struct ReducePlan {
  bool noop = false;  // empty axes with noop_with_empty_axes: the output is the input
  Shape output_shape;
  std::vector<int64_t> kept_sizes, kept_strides;  // the kept dims of the input, in order
  // Reduced elements, relative to an output's first element, in the input's order; left empty
  // when `rows` is set.
  std::vector<int64_t> offsets;
  // When asked for and the kept dims of more than one element are one run: the input as [outer,
  // kept, inner], summed over (outer, inner) in that order.
  std::optional<RowBlock> rows;
};

// The input as [reduced dims before, kept dims, reduced dims after], when the kept dims longer
// than 1 are adjacent and no dim is empty.
std::optional<RowBlock> RowsOf(const Shape& shape, const std::vector<bool>& reduced) {
  RowBlock block{1, 1, 1};
  int phase = 0;  // 0: before the kept run, 1: in it, 2: after it
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t size = shape[d];
    if (size == 0) return std::nullopt;
    if (size == 1) continue;
    if (!reduced[d]) {
      if (phase == 2) return std::nullopt;
      phase = 1;
      block.rows *= size;
    } else {
      (phase == 0 ? block.outer : block.inner) *= size;
      if (phase == 1) phase = 2;
    }
  }
  return block;
}

absl::StatusOr<ReducePlan> PlanReduce(const KernelContext& context, bool by_rows) {
  const Tensor& x = context.in(0);
  const int rank = x.rank();
  AMPC_ASSIGN_OR_RETURN(const reduce::ReducedDims dims, reduce::ReadReducedDims(context));
  ReducePlan plan;
  if (dims.noop) {
    plan.noop = true;
    return plan;
  }
  const std::vector<bool>& reduced = dims.reduced;
  const bool keepdims = dims.keepdims;
  std::vector<int64_t> strides(rank, 1), reduced_sizes, reduced_strides;
  for (int d = rank - 2; d >= 0; --d) strides[d] = strides[d + 1] * x.dim(d + 1);
  for (int d = 0; d < rank; ++d) {
    if (reduced[d]) {
      if (keepdims) plan.output_shape.push_back(1);
      reduced_sizes.push_back(x.dim(d));
      reduced_strides.push_back(strides[d]);
    } else {
      plan.output_shape.push_back(x.dim(d));
      plan.kept_sizes.push_back(x.dim(d));
      plan.kept_strides.push_back(strides[d]);
    }
  }
  if (by_rows) plan.rows = RowsOf(x.shape(), reduced);
  if (plan.rows) return plan;
  // Offsets of the reduced elements in the input's order (an odometer over the reduced dims).
  const int64_t count = ElementCount(reduced_sizes);
  plan.offsets.reserve(count);
  std::vector<int64_t> index(reduced_sizes.size(), 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < count; ++i) {
    plan.offsets.push_back(offset);
    for (int d = static_cast<int>(index.size()) - 1; d >= 0; --d) {
      offset += reduced_strides[d];
      if (++index[d] < reduced_sizes[d]) break;
      offset -= index[d] * reduced_strides[d];
      index[d] = 0;
    }
  }
  return plan;
}

using Offsets = std::span<const int64_t>;

// The sum-like reductions: a term of each element, summed, then a finish of the sum and the
// number of terms n.
template <typename TermOf, typename FinishOf>
struct SumOfTerms {
  static constexpr bool kSumOfTerms = true;
  template <typename A>
  static A Term(A v) {
    return TermOf::Of(v);
  }
  template <typename T>
  static auto Finish(Acc<T> sum, int64_t n) {
    return FinishOf::Of(sum, n);
  }
  template <typename T>
  static auto Run(const T* x, Offsets offsets) {
    const auto n = static_cast<int64_t>(offsets.size());
    return Finish<T>(reduce::ChunkedSum<Acc<T>>(
                         n, [&](int64_t j) { return TermOf::Of(LoadAcc(x[offsets[j]])); }),
                     n);
  }
};

// Terms.
struct Value {
  template <typename A>
  static A Of(A v) {
    return v;
  }
};
struct Square {
  template <typename A>
  static A Of(A v) {
    return v * v;
  }
};
struct Magnitude {
  template <typename A>
  static A Of(A v) {
    if constexpr (std::is_unsigned_v<A>) {
      return v;
    } else {
      return v < 0 ? -v : v;
    }
  }
};

// Finishes; sqrt and log of an integer sum in double.
template <typename S>
using Real = std::conditional_t<std::is_floating_point_v<S>, S, double>;
struct Total {
  template <typename S>
  static S Of(S sum, int64_t) {
    return sum;
  }
};
struct Root {
  template <typename S>
  static Real<S> Of(S sum, int64_t) {
    return std::sqrt(static_cast<Real<S>>(sum));
  }
};
struct Log {
  template <typename S>
  static Real<S> Of(S sum, int64_t) {
    return std::log(static_cast<Real<S>>(sum));
  }
};
struct Mean {
  template <typename S>
  static S Of(S sum, int64_t n) {
    if constexpr (std::is_integral_v<S>) {
      if (n == 0) return 0;  // an integer mean of nothing: 0 rather than a trap
    }
    return sum / static_cast<S>(n);
  }
};

using SumOp = SumOfTerms<Value, Total>;
using SumSquareOp = SumOfTerms<Square, Total>;
using L1Op = SumOfTerms<Magnitude, Total>;
using L2Op = SumOfTerms<Square, Root>;
using LogSumOp = SumOfTerms<Value, Log>;
using MeanOp = SumOfTerms<Value, Mean>;

struct ProdOp {
  template <typename T>
  static Acc<T> Run(const T* x, Offsets offsets) {
    Acc<T> prod{1};
    for (int64_t o : offsets) prod *= LoadAcc(x[o]);
    return prod;
  }
};
// Max and min propagate NaN; over no elements they give -inf/+inf (the lowest/highest integer,
// false/true for bool).
template <bool kMax>
struct ExtremeOp {
  template <typename T>
  static typename Compute<T>::type Run(const T* x, Offsets offsets) {
    using C = typename Compute<T>::type;
    using Limits = std::numeric_limits<C>;
    C best = Limits::has_infinity ? (kMax ? -Limits::infinity() : Limits::infinity())
                                  : (kMax ? Limits::lowest() : Limits::max());
    for (int64_t o : offsets) {
      const C v = Compute<T>::Load(x[o]);
      if ((kMax ? v > best : v < best) || v != v) best = v;
      if (best != best) break;
    }
    return best;
  }
};
// log(sum(exp(x))) as max + log(sum(exp(x - max))), so large inputs do not overflow.
struct LogSumExpOp {
  template <typename T>
  static FloatAcc<T> Run(const T* x, Offsets offsets) {
    using F = FloatAcc<T>;
    const F max = static_cast<F>(ExtremeOp<true>::Run(x, offsets));
    if (std::isinf(max) || std::isnan(max)) return max;  // also: no elements gives -inf
    const F sum = reduce::ChunkedSum<F>(static_cast<int64_t>(offsets.size()), [&](int64_t j) {
      return std::exp(static_cast<F>(Compute<T>::Load(x[offsets[j]])) - max);
    });
    return max + std::log(sum);
  }
};

template <typename Op>
concept SumsTerms = Op::kSumOfTerms;

// A sum of terms over rows side by side (lane_sums.h): each output's terms in the offsets' order,
// so the bits are the generic loop's, without its serial wait on each add.
template <typename Op, typename T>
void ReduceRows(KernelContext& context, const RowBlock& rows, const T* x, T* y) {
  using A = Acc<T>;
  ScratchBuffer<A> sums(rows.rows);
  SumEveryRow(
      context, x, rows, [](A v) { return Op::Term(v); }, sums.data());
  const int64_t n = rows.outer * rows.inner;
  for (int64_t r = 0; r < rows.rows; ++r)
    y[r] = StoreAs<T>(Op::template Finish<T>(sums.data()[r], n));
}

template <typename Op, typename T>
absl::Status ReduceTyped(KernelContext& context, const ReducePlan& plan) {
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, plan.output_shape));
  const T* x = context.in(0).data<T>();
  T* y = out->data<T>();
  if constexpr (SumsTerms<Op> && std::is_floating_point_v<Acc<T>>) {
    if (plan.rows) {
      ReduceRows<Op>(context, *plan.rows, x, y);
      return absl::OkStatus();
    }
  }
  assert(!plan.rows);
  const int kept = static_cast<int>(plan.kept_sizes.size());
  const Offsets offsets(plan.offsets);
  reduce::ParallelFor(context, out->size(), static_cast<int64_t>(offsets.size()),
                      [&](int64_t begin, int64_t end) {
                        for (int64_t i = begin; i < end; ++i) {
                          int64_t base = 0, rest = i;
                          for (int d = kept - 1; d >= 0; --d) {
                            base += (rest % plan.kept_sizes[d]) * plan.kept_strides[d];
                            rest /= plan.kept_sizes[d];
                          }
                          y[i] = StoreAs<T>(Op::Run(x + base, offsets));
                        }
                      });
  return absl::OkStatus();
}

#define AMPC_REDUCE_TYPES \
  AMPC_FLOAT_TYPES, DType::kInt32, DType::kInt64, DType::kUint32, DType::kUint64
// ReduceMax/ReduceMin take bool from opset 20 (the empty max is false, the empty min true).
#define AMPC_MINMAX_TYPES AMPC_REDUCE_TYPES, DType::kInt8, DType::kUint8, DType::kBool

template <typename Op, DType... Ds>
absl::Status Reduce(KernelContext& context) {
  // Rows side by side for sums of float terms (LaneSums' chunks are float sums).
  const DType dtype = context.in(0).dtype();
  bool by_rows = false;
  if constexpr (SumsTerms<Op>) {
    by_rows = Dispatch<AMPC_FLOAT_TYPES>(dtype, []<typename>() {});
  }
  AMPC_ASSIGN_OR_RETURN(ReducePlan plan, PlanReduce(context, by_rows));
  if (plan.noop) {
    context.SetOutput(0, context.in(0));
    return absl::OkStatus();
  }
  absl::Status status;
  const bool handled = Dispatch<Ds...>(
      context.in(0).dtype(), [&]<typename T>() { status = ReduceTyped<Op, T>(context, plan); });
  return handled ? status : reduce::UnsupportedType(context);
}

// ArgMax/ArgMin: the index of the first (select_last_index: last) extreme along `axis`.
template <bool kMax>
absl::Status ArgExtreme(KernelContext& context) {
  const Tensor& x = context.in(0);
  const Attributes attributes = context.attributes();
  AMPC_ASSIGN_OR_RETURN(int axis,
                        reduce::NormalizeAxis(context, attributes.Int("axis", 0), x.rank()));
  const bool keepdims = attributes.Int("keepdims", 1) != 0;
  const bool last = attributes.Int("select_last_index", 0) != 0;
  const reduce::AxisLayout layout = reduce::LayoutAround(x.shape(), axis);
  if (layout.n == 0 && layout.rows() > 0) {
    return NodeError(
        context, absl::StrCat("cannot take an index over axis ", axis, " of length 0 (input shape ",
                              ShapeString(x.shape()), ")"));
  }
  Shape shape = x.shape();
  if (keepdims) {
    shape[axis] = 1;
  } else {
    shape.erase(shape.begin() + axis);
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, shape, DType::kInt64));
  int64_t* y = out->data<int64_t>();
  const bool handled = Dispatch<AMPC_FLOAT_TYPES, AMPC_INT_TYPES>(x.dtype(), [&]<typename T>() {
    const T* px = x.data<T>();
    reduce::ParallelFor(context, layout.rows(), layout.n, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* row = px + layout.RowStart(r);
        auto best = Compute<T>::Load(row[0]);
        int64_t best_index = 0;
        for (int64_t k = 1; k < layout.n; ++k) {
          const auto v = Compute<T>::Load(row[k * layout.inner]);
          if ((kMax ? v > best : v < best) || (last && v == best)) {
            best = v;
            best_index = k;
          }
        }
        y[r] = best_index;
      }
    });
  });
  return handled ? absl::OkStatus() : reduce::UnsupportedType(context);
}

}  // namespace

void RegisterReduceKernels(KernelRegistry& r) {
  const std::vector<DType> reduce_types = {AMPC_REDUCE_TYPES};
  const std::vector<DType> minmax_types = {AMPC_MINMAX_TYPES};
  const std::vector<DType> numeric = {AMPC_FLOAT_TYPES, AMPC_INT_TYPES};
  const std::vector<DType> floats = {AMPC_FLOAT_TYPES};
  const std::vector<DType> index_types = {DType::kInt32, DType::kInt64};
  r.Register("cpu", "ReduceSum", reduce_types, Reduce<SumOp, AMPC_REDUCE_TYPES>);
  r.Register("cpu", "ReduceSumSquare", reduce_types, Reduce<SumSquareOp, AMPC_REDUCE_TYPES>);
  r.Register("cpu", "ReduceMean", reduce_types, Reduce<MeanOp, AMPC_REDUCE_TYPES>);
  r.Register("cpu", "ReduceProd", reduce_types, Reduce<ProdOp, AMPC_REDUCE_TYPES>);
  r.Register("cpu", "ReduceL1", reduce_types, Reduce<L1Op, AMPC_REDUCE_TYPES>);
  r.Register("cpu", "ReduceL2", reduce_types, Reduce<L2Op, AMPC_REDUCE_TYPES>);
  r.Register("cpu", "ReduceLogSum", reduce_types, Reduce<LogSumOp, AMPC_REDUCE_TYPES>);
  r.Register("cpu", "ReduceLogSumExp", reduce_types, Reduce<LogSumExpOp, AMPC_REDUCE_TYPES>);
  r.Register("cpu", "ReduceMax", minmax_types, Reduce<ExtremeOp<true>, AMPC_MINMAX_TYPES>);
  r.Register("cpu", "ReduceMin", minmax_types, Reduce<ExtremeOp<false>, AMPC_MINMAX_TYPES>);
  r.Register("cpu", "ArgMax", numeric, ArgExtreme<true>);
  r.Register("cpu", "ArgMin", numeric, ArgExtreme<false>);
  r.Register("cpu", "Softmax", floats, reduce::SoftmaxLike<reduce::SoftmaxKind::kSoftmax>);
  r.Register("cpu", "LogSoftmax", floats, reduce::SoftmaxLike<reduce::SoftmaxKind::kLogSoftmax>);
  r.Register("cpu", "Hardmax", floats, reduce::SoftmaxLike<reduce::SoftmaxKind::kHardmax>);
  r.Register("cpu", "", "CumSum", {{0, reduce_types}, {1, index_types}}, reduce::CumSum);
  r.Register("cpu", "", "CumProd", {{0, reduce_types}, {1, index_types}}, reduce::CumProd);
  r.Register("cpu", "", "TopK", {{0, numeric}, {1, {DType::kInt64}}}, reduce::TopK);
  r.Register("cpu", "", "SoftmaxCrossEntropyLoss", {{0, floats}, {1, index_types}, {2, floats}},
             reduce::SoftmaxCrossEntropyLoss);
  r.Register("cpu", "", "NegativeLogLikelihoodLoss", {{0, floats}, {1, index_types}, {2, floats}},
             reduce::NegativeLogLikelihoodLoss);
}

}  // namespace ampc
