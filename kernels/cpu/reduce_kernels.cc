// Reductions (ReduceSum ... ReduceLogSumExp), ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax, CumSum,
// CumProd, TopK and the two classification losses. Sums accumulate in FP32 (FP64 for FP64 inputs)
// and each output is rounded once.
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/reduce_common.h"
#include "kernels/cpu/reduce_loss.h"
#include "kernels/cpu/reduce_scan.h"
#include "kernels/cpu/reduce_softmax.h"
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
  std::vector<int64_t> offsets;  // reduced elements, relative to an output's first element
};

absl::StatusOr<ReducePlan> PlanReduce(const KernelContext& context) {
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

struct SumOp {
  template <typename T>
  static Acc<T> Run(const T* x, Offsets offsets) {
    return reduce::ChunkedSum<Acc<T>>(static_cast<int64_t>(offsets.size()),
                                      [&](int64_t j) { return LoadAcc(x[offsets[j]]); });
  }
};
struct SumSquareOp {
  template <typename T>
  static Acc<T> Run(const T* x, Offsets offsets) {
    return reduce::ChunkedSum<Acc<T>>(static_cast<int64_t>(offsets.size()), [&](int64_t j) {
      const Acc<T> v = LoadAcc(x[offsets[j]]);
      return v * v;
    });
  }
};
struct L1Op {
  template <typename T>
  static Acc<T> Run(const T* x, Offsets offsets) {
    return reduce::ChunkedSum<Acc<T>>(static_cast<int64_t>(offsets.size()), [&](int64_t j) {
      const Acc<T> v = LoadAcc(x[offsets[j]]);
      if constexpr (std::is_unsigned_v<Acc<T>>) {
        return v;
      } else {
        return v < 0 ? -v : v;
      }
    });
  }
};
struct L2Op {
  template <typename T>
  static FloatAcc<T> Run(const T* x, Offsets offsets) {
    return std::sqrt(static_cast<FloatAcc<T>>(SumSquareOp::Run(x, offsets)));
  }
};
struct LogSumOp {
  template <typename T>
  static FloatAcc<T> Run(const T* x, Offsets offsets) {
    return std::log(static_cast<FloatAcc<T>>(SumOp::Run(x, offsets)));
  }
};
struct MeanOp {
  template <typename T>
  static Acc<T> Run(const T* x, Offsets offsets) {
    const Acc<T> sum = SumOp::Run(x, offsets);
    if constexpr (std::is_integral_v<Acc<T>>) {
      if (offsets.empty()) return 0;  // an integer mean of nothing: 0 rather than a trap
    }
    return sum / static_cast<Acc<T>>(offsets.size());
  }
};
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

template <typename Op, typename T>
absl::Status ReduceTyped(KernelContext& context, const ReducePlan& plan) {
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, plan.output_shape));
  const T* x = context.in(0).data<T>();
  T* y = out->data<T>();
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
  AMPC_ASSIGN_OR_RETURN(ReducePlan plan, PlanReduce(context));
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
