// The arithmetic of the reduce-family CUDA kernels (reduce.cu) that does not depend on how the
// work is split over threads: each reduction's identity, element map, combine and finish; the
// per-element formulas of softmax, the cross-entropy loss, layer normalization and their
// gradients; the loss's reduction rule; and the coalescing of a reduction's axes. The same
// functions run in the kernels and in the host test that checks them against the CPU backend
// (tests/unit/cuda_reduce_math_test.cc). Values are compute types: FP16/BF16 are loaded to
// float before they get here, and results are rounded once by the caller.
#ifndef AMPC_KERNELS_CUDA_REDUCE_MATH_H_
#define AMPC_KERNELS_CUDA_REDUCE_MATH_H_

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "kernels/numerics/host_device.h"

namespace ampc::cuda {

// ---- Types -------------------------------------------------------------------------------------

// What sums of compute type C accumulate in: itself for float and double, 64-bit integers for
// integers (as the CPU backend's reduce::Acc).
template <typename C>
using AccOf = std::conditional_t<std::is_floating_point_v<C>, C,
                                 std::conditional_t<std::is_signed_v<C>, int64_t, uint64_t>>;

// What log/exp/sqrt of compute type C happen in: float for float, double otherwise.
template <typename C>
using FloatOf = std::conditional_t<std::is_same_v<C, float>, float, double>;

AMPC_HD inline float Exp(float v) { return expf(v); }
AMPC_HD inline double Exp(double v) { return exp(v); }
AMPC_HD inline float Log(float v) { return logf(v); }
AMPC_HD inline double Log(double v) { return log(v); }
AMPC_HD inline float Sqrt(float v) { return sqrtf(v); }
AMPC_HD inline double Sqrt(double v) { return sqrt(v); }

template <typename V>
AMPC_HD bool IsNan(V v) {
  if constexpr (std::is_floating_point_v<V>) {
    return v != v;
  } else {
    return false;
  }
}

template <typename F>
AMPC_HD F QuietNan() {
  return static_cast<F>(NAN);
}

// -inf/+inf for floats, the lowest/highest value for integers: what max/min of nothing give.
template <typename C>
AMPC_HD C Lowest() {
  if constexpr (std::is_same_v<C, float>) {
    return -HUGE_VALF;
  } else if constexpr (std::is_same_v<C, double>) {
    return -HUGE_VAL;
  } else if constexpr (std::is_same_v<C, int8_t>) {
    return INT8_MIN;
  } else if constexpr (std::is_same_v<C, int32_t>) {
    return INT32_MIN;
  } else if constexpr (std::is_same_v<C, int64_t>) {
    return INT64_MIN;
  } else {
    static_assert(std::is_unsigned_v<C>, "a type Lowest does not know");
    return C{0};
  }
}
template <typename C>
AMPC_HD C Highest() {
  if constexpr (std::is_same_v<C, float>) {
    return HUGE_VALF;
  } else if constexpr (std::is_same_v<C, double>) {
    return HUGE_VAL;
  } else if constexpr (std::is_same_v<C, int8_t>) {
    return INT8_MAX;
  } else if constexpr (std::is_same_v<C, int32_t>) {
    return INT32_MAX;
  } else if constexpr (std::is_same_v<C, int64_t>) {
    return INT64_MAX;
  } else if constexpr (std::is_same_v<C, uint8_t>) {
    return UINT8_MAX;
  } else {
    static_assert(std::is_same_v<C, uint64_t>, "a type Highest does not know");
    return UINT64_MAX;
  }
}

// ---- Reductions --------------------------------------------------------------------------------
// Each op: Identity(), Map(element), Combine(a, b) (associative; a holds earlier elements) and
// Finish(accumulated, count) -> the value rounded to the output type. Combine of Max/Min lets a NaN
// win, as the CPU's sequential loop does.

enum class ReduceOp { kSum, kSumSquare, kMean, kProd, kL1, kL2, kLogSum, kLogSumExp, kMax, kMin };

template <typename C>
struct SumReduce {
  using A = AccOf<C>;
  static AMPC_HD A Identity() { return A{0}; }
  static AMPC_HD A Map(C v) { return static_cast<A>(v); }
  static AMPC_HD A Combine(A a, A b) { return a + b; }
  static AMPC_HD A Finish(A a, int64_t) { return a; }
};

template <typename C>
struct SumSquareReduce : SumReduce<C> {
  using A = AccOf<C>;
  static AMPC_HD A Map(C v) { return static_cast<A>(v) * static_cast<A>(v); }
};

template <typename C>
struct MeanReduce : SumReduce<C> {
  using A = AccOf<C>;
  static AMPC_HD A Finish(A a, int64_t n) {
    if constexpr (std::is_integral_v<A>) {
      if (n == 0) return A{0};  // an integer mean of nothing: 0 rather than a trap
    }
    return a / static_cast<A>(n);
  }
};

template <typename C>
struct ProdReduce : SumReduce<C> {
  using A = AccOf<C>;
  static AMPC_HD A Identity() { return A{1}; }
  static AMPC_HD A Combine(A a, A b) { return a * b; }
};

template <typename C>
struct L1Reduce : SumReduce<C> {
  using A = AccOf<C>;
  static AMPC_HD A Map(C v) {
    const A a = static_cast<A>(v);
    if constexpr (std::is_unsigned_v<A>) {
      return a;
    } else {
      return a < 0 ? -a : a;
    }
  }
};

template <typename C>
struct L2Reduce : SumSquareReduce<C> {
  using A = AccOf<C>;
  static AMPC_HD FloatOf<C> Finish(A a, int64_t) { return Sqrt(static_cast<FloatOf<C>>(a)); }
};

template <typename C>
struct LogSumReduce : SumReduce<C> {
  using A = AccOf<C>;
  static AMPC_HD FloatOf<C> Finish(A a, int64_t) { return Log(static_cast<FloatOf<C>>(a)); }
};

template <typename C, bool kMax>
struct ExtremeReduce {
  using A = C;
  static AMPC_HD A Identity() { return kMax ? Lowest<C>() : Highest<C>(); }
  static AMPC_HD A Map(C v) { return v; }
  static AMPC_HD A Combine(A a, A b) {
    if (IsNan(a)) return a;
    if (IsNan(b)) return b;
    return (kMax ? b > a : b < a) ? b : a;
  }
  static AMPC_HD A Finish(A a, int64_t) { return a; }
};
template <typename C>
using MaxReduce = ExtremeReduce<C, true>;
template <typename C>
using MinReduce = ExtremeReduce<C, false>;

// LogSumExp takes two passes: the max (MaxReduce), then the sum of exp(x - max) (this op, with
// the max passed to Map), and gives max + log(sum), or the max itself when it is infinite or NaN
// (which also makes the log-sum-exp of nothing -inf).
template <typename C>
struct LogSumExpReduce {
  using F = FloatOf<C>;
  using A = F;
  static AMPC_HD A Identity() { return F{0}; }
  static AMPC_HD A Map(C v, C max) { return Exp(static_cast<F>(v) - static_cast<F>(max)); }
  static AMPC_HD A Combine(A a, A b) { return a + b; }
  static AMPC_HD F Finish(C max, A sum) {
    const F m = static_cast<F>(max);
    if (IsNan(m) || m == Highest<F>() || m == Lowest<F>()) return m;
    return m + Log(sum);
  }
};

// ---- Softmax -----------------------------------------------------------------------------------
// Rows are normalised with their max m subtracted and sum = sum(exp(x - m)).

template <typename F>
AMPC_HD F SoftmaxValue(F x, F max, F sum) {
  return Exp(x - max) / sum;
}
template <typename F>
AMPC_HD F LogSoftmaxValue(F x, F max, F log_sum) {
  return (x - max) - log_sum;
}

// SoftmaxGrad: dx = y * (dy - sum(dy * y)); its sum's terms are dy * y.
template <typename F>
AMPC_HD F SoftmaxGradTerm(F dy, F y) {
  return dy * y;
}
template <typename F>
AMPC_HD F SoftmaxGradValue(F dy, F y, F sum) {
  return y * (dy - sum);
}
// LogSoftmaxGrad: dx = dy - exp(y) * sum(dy).
template <typename F>
AMPC_HD F LogSoftmaxGradValue(F dy, F y, F sum) {
  return dy - Exp(y) * sum;
}

// ---- SoftmaxCrossEntropyLoss -------------------------------------------------------------------
// Scores [N, C, d...] are rows (n, d) of C classes; log_prob = x - max - log(sum(exp(x - max))).
// An element's loss is -weight[label] * log_prob[label] (weight 1 without weights), and 0 with
// weight 0 where the label is ignore_index. "sum" sums the element losses, "mean" divides that sum
// by the sum of the weights applied (the count of labels not ignored without weights).

enum class LossReduction { kNone, kSum, kMean };

template <typename F>
AMPC_HD F CrossEntropyLogProb(F x, F max, F log_sum) {
  return x - max - log_sum;
}

template <typename F>
AMPC_HD F CrossEntropyElementLoss(F weight, F log_prob_at_label) {
  return -weight * log_prob_at_label;
}

// The loss output of reduction "sum" or "mean" from the summed element losses and weights.
template <typename F>
AMPC_HD F ReducedLoss(LossReduction reduction, F loss_sum, F weight_sum) {
  return reduction == LossReduction::kMean ? loss_sum / weight_sum : loss_sum;
}

// The gradient of the loss output with respect to one element's loss, times the element's
// weight: k = weight * dloss[i] ("none"), weight * dloss ("sum"), weight * (dloss / weight_sum)
// ("mean").
template <typename F>
AMPC_HD F LossGradFactor(LossReduction reduction, F weight, F dloss, F weight_sum) {
  return weight * (reduction == LossReduction::kMean ? dloss / weight_sum : dloss);
}

// dscores[n, c, d] = k * (exp(log_prob[n, c, d]) - [c == label]); 0 where the label is ignored
// (k is 0 there).
template <typename F>
AMPC_HD F CrossEntropyGradValue(F k, F log_prob, bool is_label) {
  return k * (Exp(log_prob) - (is_label ? F{1} : F{0}));
}

// Whether a label takes part, and whether it is a valid class. A label that is neither ignored
// nor in [0, classes) is an error on the CPU backend; the CUDA kernels, which cannot stop the
// step, give NaN for its loss and gradient.
AMPC_HD inline bool LabelIgnored(int64_t label, bool has_ignore, int64_t ignore_index) {
  return has_ignore && label == ignore_index;
}
AMPC_HD inline bool LabelValid(int64_t label, int64_t classes) {
  return label >= 0 && label < classes;
}

// ---- LayerNormalization ------------------------------------------------------------------------
// Two passes as the CPU's: mean = sum(x) / n, var = sum((x - mean)^2) / n,
// inv_std = 1 / sqrt(var + epsilon), y = (x - mean) * inv_std * scale + bias.

template <typename F>
AMPC_HD F InvStdDev(F var, float epsilon) {
  return F{1} / Sqrt(var + static_cast<F>(epsilon));
}

template <typename F>
AMPC_HD F LayerNormValue(F x, F mean, F inv_std, F scale, F bias) {
  return (x - mean) * inv_std * scale + bias;
}

// LayerNormalizationGrad with xhat = (x - mean) * inv_std and g = dy * scale:
// dx = inv_std * (g - mean(g) - xhat * mean(g * xhat)), dscale = sum(dy * xhat), dbias = sum(dy).
template <typename F>
AMPC_HD F LayerNormXhat(F x, F mean, F inv_std) {
  return (x - mean) * inv_std;
}
template <typename F>
AMPC_HD F LayerNormGradDx(F g, F xhat, F inv_std, F mean_g, F mean_gx) {
  return inv_std * (g - mean_g - xhat * mean_gx);
}

// ---- Axis coalescing (host) --------------------------------------------------------------------

inline constexpr int kMaxReduceDims = 8;

// A reduction's input after coalescing: dims of size 1 dropped and neighbouring dims that are both
// reduced or both kept merged, outermost first. `rank` 0 is a single element.
struct ReduceLayout {
  int rank = 0;
  int64_t sizes[kMaxReduceDims] = {};
  bool reduced[kMaxReduceDims] = {};
};

// Coalesces `dims` (row-major, `rank` of them) with the dims in `axes` (non-negative, distinct)
// reduced. False when more than kMaxReduceDims dims remain (kept and reduced dims alternating
// over 9 or more dims).
inline bool CoalesceReduce(const int64_t* dims, int rank, const int* axes, int num_axes,
                           ReduceLayout* layout) {
  *layout = ReduceLayout{};
  for (int d = 0; d < rank; ++d) {
    if (dims[d] == 1) continue;
    bool reduced = false;
    for (int a = 0; a < num_axes; ++a) reduced = reduced || axes[a] == d;
    const int last = layout->rank - 1;
    if (last >= 0 && layout->reduced[last] == reduced) {
      layout->sizes[last] *= dims[d];
      continue;
    }
    if (layout->rank == kMaxReduceDims) return false;
    layout->sizes[layout->rank] = dims[d];
    layout->reduced[layout->rank] = reduced;
    ++layout->rank;
  }
  return true;
}

// The layout as [outer, n, inner] (n reduced) when it is at most kept, reduced, kept; false for
// a layout with two or more separate runs of reduced dims, or kept dims between them.
struct OuterReduceInner {
  int64_t outer = 1, n = 1, inner = 1;
};
inline bool AsOuterReduceInner(const ReduceLayout& layout, OuterReduceInner* view) {
  *view = OuterReduceInner{};
  int d = 0;
  if (d < layout.rank && !layout.reduced[d]) view->outer = layout.sizes[d++];
  if (d < layout.rank && layout.reduced[d]) view->n = layout.sizes[d++];
  if (d < layout.rank && !layout.reduced[d]) view->inner = layout.sizes[d++];
  return d == layout.rank;
}

}  // namespace ampc::cuda

#endif  // AMPC_KERNELS_CUDA_REDUCE_MATH_H_
