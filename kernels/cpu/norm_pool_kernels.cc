// Pooling ops: MaxPool (with optional Indices), AveragePool, LpPool, GlobalAveragePool,
// GlobalMaxPool and GlobalLpPool over N x C x D1 x ... x Dk inputs. Sums accumulate in FP32 (FP64
// for double) and each output is rounded once. Registered from RegisterNormKernels.
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/norm_common.h"
#include "kernels/cpu/pool_plan.h"
#include "kernels/cpu/reduce_common.h"
#include "kernels/cpu/scratch_arena.h"

namespace ampc {
namespace {

template <typename C>
bool IsNan(C v) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

// A quiet NaN of type C where C has one, else v.
template <typename C>
C NanOr(C v) {
  if constexpr (std::numeric_limits<C>::has_quiet_NaN) {
    return std::numeric_limits<C>::quiet_NaN();
  } else {
    return v;
  }
}

using pool::AxisWindow;
using pool::ListWindow;
using pool::MakePlan;
using pool::MakeWindowLists;
using pool::PoolPlan;
using pool::Window2D;
using pool::WindowLists;

// Calls fn(plane, out index, window) for every output element, planes in parallel; `window` is a
// Window2D or a ListWindow (count(), padded(), first(), ForEach(visit)).
template <typename Fn>
void ForEachPlaneWindow(KernelContext& context, const PoolPlan& plan, Fn&& fn) {
  const auto parallel = [&](auto&& plane) {
    CpuOf(context.backend())
        .pool()
        .ParallelFor(
            plan.planes,
            std::max<int64_t>(
                1, kElementwiseGrain / std::max<int64_t>(1, plan.out_size * plan.window_size)),
            [&](int64_t begin, int64_t end) {
              for (int64_t p = begin; p < end; ++p) plane(p);
            });
  };
  const int dims = static_cast<int>(plan.in.size());
  if (dims <= 2) {
    const AxisWindow whole_row{0, 1, 1};
    const std::vector<AxisWindow> one_row = {whole_row};
    const std::vector<AxisWindow>& rows = dims == 2 ? plan.axes[0] : one_row;
    const std::vector<AxisWindow>& cols = plan.axes[dims - 1];
    const int64_t row_step = dims == 2 ? plan.dilations[0] : 1;
    const int64_t col_step = plan.dilations[dims - 1];
    const int64_t width = plan.in[dims - 1];
    const auto run = [&]<bool kDense>() {
      parallel([&](int64_t p) {
        int64_t o = 0;
        for (const AxisWindow& r : rows) {
          for (const AxisWindow& c : cols)
            fn(p, o++, Window2D<kDense>{r, c, row_step, col_step, width});
        }
      });
    };
    if (row_step == 1 && col_step == 1) {
      run.template operator()<true>();
    } else {
      run.template operator()<false>();
    }
    return;
  }
  const WindowLists lists = MakeWindowLists(plan);
  parallel([&](int64_t p) {
    for (int64_t o = 0; o < plan.out_size; ++o) {
      const std::span<const int64_t> offsets(lists.offsets.data() + lists.begin[o],
                                             lists.offsets.data() + lists.begin[o + 1]);
      fn(p, o, ListWindow{offsets, lists.padded[o]});
    }
  });
}

// Row-major in-plane offset to the column-major one (storage_order=1).
int64_t ColumnMajor(const PoolPlan& plan, int64_t offset) {
  int64_t result = 0, stride = 1;
  std::vector<int64_t> index(plan.in.size());
  for (int d = static_cast<int>(plan.in.size()) - 1; d >= 0; --d) {
    index[d] = offset % plan.in[d];
    offset /= plan.in[d];
  }
  for (size_t d = 0; d < plan.in.size(); ++d) {
    result += index[d] * stride;
    stride *= plan.in[d];
  }
  return result;
}

// Whether every window of a 2-D pool is 2x2 with stride 2, inside the input (no padding, no
// dilation, no ceil_mode window cut off).
bool IsPlain2x2(const PoolPlan& plan) {
  if (plan.in.size() != 2 || plan.window_size != 4) return false;
  if (plan.dilations[0] != 1 || plan.dilations[1] != 1) return false;
  for (const std::vector<AxisWindow>& axis : plan.axes) {
    for (size_t o = 0; o < axis.size(); ++o) {
      if (axis[o].count != 2 || axis[o].first != 2 * static_cast<int64_t>(o)) return false;
    }
  }
  return true;
}

// One output row of a plain 2x2 MaxPool from its two input rows (in the compute type). With
// kIndices, each window's taps are taken in row-major order as MaxPool's general loop takes them
// (a larger value or a NaN replaces the best), `at` receiving the flat input offset of the winner
// (`top` is at flat offset `first`, `bottom` one `width` on); without, NaN as in MaxPool.
template <bool kIndices, typename C>
void MaxRow2x2(const C* top, const C* bottom, int64_t n, C* out, int64_t* at, int64_t first,
               int64_t width) {
  for (int64_t j = 0; j < n; ++j) {
    const C a = top[2 * j], b = top[2 * j + 1], c = bottom[2 * j], d = bottom[2 * j + 1];
    if constexpr (kIndices) {
      C best = a;
      int64_t offset = first + 2 * j;
      const auto step = [&](C v, int64_t o) {
        const bool take = (int{v > best} | int{IsNan(v)}) != 0;
        best = BitSelect(take, v, best);
        offset = BitSelect(take, o, offset);
      };
      step(b, first + 2 * j + 1);
      step(c, first + width + 2 * j);
      step(d, first + width + 2 * j + 1);
      out[j] = best;
      at[j] = offset;
    } else {
      const auto max = [](C x, C y) { return x > y ? x : y; };
      // `|`, not `||`: no branches in the inner loop.
      const bool nan = (int{IsNan(a)} | int{IsNan(b)} | int{IsNan(c)} | int{IsNan(d)}) != 0;
      const C best = max(max(a, b), max(c, d));
      out[j] = nan ? NanOr(best) : best;
    }
  }
}

// MaxPool over plain 2x2 windows (IsPlain2x2), the common downsampling: two input rows per output
// row and no per-window bookkeeping, so the loop vectorises; FP16/BF16 planes widened to float and
// the results rounded a plane at a time. Indices (row-major) where `indices` is not null.
template <typename T, bool kIndices>
void MaxPool2x2(KernelContext& context, const PoolPlan& plan, const T* px, T* py,
                int64_t* indices) {
  using C = typename Compute<T>::type;
  constexpr bool kWiden = !std::is_same_v<T, C>;
  const int64_t width = plan.in[1], out_rows = plan.out[0], out_cols = plan.out[1];
  ParallelFor(context, plan.planes, plan.in_size, [&](int64_t begin, int64_t end) {
    ScratchBuffer<C> buffer(kWiden ? plan.in_size + plan.out_size : 0);
    for (int64_t p = begin; p < end; ++p) {
      const int64_t first = p * plan.in_size, o = p * plan.out_size;
      const C* in = reinterpret_cast<const C*>(px + first);
      C* out = reinterpret_cast<C*>(py + o);
      if constexpr (kWiden) {
        WidenToAcc(px + first, plan.in_size, buffer.data());
        in = buffer.data();
        out = buffer.data() + plan.in_size;
      }
      for (int64_t r = 0; r < out_rows; ++r) {
        const C* top = in + 2 * r * width;
        MaxRow2x2<kIndices>(top, top + width, out_cols, out + r * out_cols,
                            kIndices ? indices + o + r * out_cols : nullptr, first + 2 * r * width,
                            width);
      }
      if constexpr (kWiden) NarrowFromAcc(out, plan.out_size, py + o);
    }
  });
}

// MaxPool: the largest element of each window (a NaN wins, as in PyTorch, so it reaches a finite
// check downstream); Indices (int64) are offsets
// into the flattened input, the spatial part row-major or, with storage_order=1, column-major.
absl::Status MaxPool(KernelContext& context) {
  const Tensor& x = context.in(0);
  const int opset = context.info().opset;
  AMPC_ASSIGN_OR_RETURN(PoolPlan plan, MakePlan(context, x, {opset >= 10, opset >= 10}));
  const bool column_major = context.attributes().Int("storage_order", 0) != 0;
  const bool want_indices = WantsOutput(context, 1);
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, pool::PooledShape(x, plan.out)));
  int64_t* indices = nullptr;
  if (want_indices) {
    AMPC_ASSIGN_OR_RETURN(Tensor * t,
                          context.Output(1, pool::PooledShape(x, plan.out), DType::kInt64));
    indices = t->data<int64_t>();
  }
  const bool handled =
      Dispatch<AMPC_FLOAT_TYPES, DType::kInt8, DType::kUint8>(x.dtype(), [&]<typename T>() {
        using C = typename Compute<T>::type;
        const T* px = x.data<T>();
        T* py = y->data<T>();
        if (!column_major && IsPlain2x2(plan)) {
          indices != nullptr ? MaxPool2x2<T, true>(context, plan, px, py, indices)
                             : MaxPool2x2<T, false>(context, plan, px, py, nullptr);
          return;
        }
        // Without Indices the loop keeps no offset, so the compiler can use max instructions.
        const auto run = [&]<bool kIndices>() {
          ForEachPlaneWindow(context, plan, [&](int64_t p, int64_t o, const auto& window) {
            const T* xp = px + p * plan.in_size;
            C best = std::numeric_limits<C>::lowest();
            if constexpr (std::numeric_limits<C>::has_infinity) {
              best = -std::numeric_limits<C>::infinity();
            }
            int64_t best_offset = kIndices ? window.first() : 0;
            if constexpr (kIndices) {
              window.ForEach([&](int64_t offset) {
                const C v = Compute<T>::Load(xp[offset]);
                if (v > best || IsNan(v)) {  // once best is NaN nothing replaces it
                  best = v;
                  best_offset = offset;
                }
              });
            } else {  // branch-free, so the compiler can use max instructions
              bool nan = false;
              window.ForEach([&](int64_t offset) {
                const C v = Compute<T>::Load(xp[offset]);
                nan |= IsNan(v);
                best = v > best ? v : best;
              });
              if (nan) best = NanOr(best);
            }
            py[p * plan.out_size + o] = Compute<T>::Store(best);
            if constexpr (kIndices) {
              indices[p * plan.out_size + o] =
                  p * plan.in_size + (column_major ? ColumnMajor(plan, best_offset) : best_offset);
            }
          });
        };
        if (indices != nullptr) {
          run.template operator()<true>();
        } else {
          run.template operator()<false>();
        }
      });
  return handled ? absl::OkStatus()
                 : NodeError(context, absl::StrCat("element type ", DTypeName(x.dtype()),
                                                   " is not supported"));
}

// AveragePool (count_include_pad: divide by the window positions inside the padded input, else by
// those inside the input) and LpPool ((sum |x|^p)^(1/p), padding contributing 0).
template <bool kLp>
absl::Status SumPool(KernelContext& context) {
  const Tensor& x = context.in(0);
  const int opset = context.info().opset;
  const Attributes attributes = context.attributes();
  // dilations: LpPool from opset 18, AveragePool from 19; ceil_mode: LpPool 18, AveragePool 10.
  const pool::PoolOptions options{.dilations = opset >= (kLp ? 18 : 19),
                                  .ceil_mode = opset >= (kLp ? 18 : 10)};
  AMPC_ASSIGN_OR_RETURN(PoolPlan plan, MakePlan(context, x, options));
  const bool include_pad = attributes.Int("count_include_pad", 0) != 0;
  const float p =
      kLp ? (opset >= 2 ? static_cast<float>(attributes.Int("p", 2)) : attributes.Float("p", 2.0f))
          : 1.0f;
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, pool::PooledShape(x, plan.out)));
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(x.dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    const T* px = x.data<T>();
    T* py = y->data<T>();
    const C cp = static_cast<C>(p);
    ForEachPlaneWindow(context, plan, [&](int64_t plane, int64_t o, const auto& window) {
      const T* xp = px + plane * plan.in_size;
      C sum = 0;
      window.ForEach([&](int64_t offset) {
        const C v = Compute<T>::Load(xp[offset]);
        if constexpr (kLp) {
          sum += cp == C{2} ? v * v : std::pow(std::abs(v), cp);
        } else {
          sum += v;
        }
      });
      C result;
      if constexpr (kLp) {
        result = cp == C{2} ? std::sqrt(sum) : std::pow(sum, C{1} / cp);
      } else {
        result = sum / static_cast<C>(include_pad ? window.padded() : window.count());
      }
      py[plane * plan.out_size + o] = Compute<T>::Store(result);
    });
  });
  return handled ? absl::OkStatus()
                 : NodeError(context, absl::StrCat("element type ", DTypeName(x.dtype()),
                                                   " is not supported"));
}

enum class GlobalKind { kAverage, kMax, kLp };

// Global pools: one value per (n, c) plane; the output keeps the rank with spatial dims 1.
// One plane's max, average or Lp norm; sums add as the reductions' do (reduce::ChunkedSum).
template <GlobalKind kKind, typename T, typename C = typename Compute<T>::type>
C PoolPlane(const T* x, int64_t n, C p) {
  if constexpr (kKind == GlobalKind::kMax) {
    C best = -std::numeric_limits<C>::infinity();
    for (int64_t j = 0; j < n; ++j) {
      const C v = Compute<T>::Load(x[j]);
      if (v > best || IsNan(v)) best = v;
    }
    return best;
  } else if constexpr (kKind == GlobalKind::kLp) {
    const C sum = reduce::ChunkedSum<C>(
        n, [&](int64_t j) { return std::pow(std::abs(Compute<T>::Load(x[j])), p); });
    return std::pow(sum, C{1} / p);
  } else {
    return reduce::ChunkedSum<C>(n, [&](int64_t j) { return Compute<T>::Load(x[j]); }) /
           static_cast<C>(n);
  }
}

template <GlobalKind kKind>
absl::Status GlobalPool(KernelContext& context) {
  const Tensor& x = context.in(0);
  AMPC_ASSIGN_OR_RETURN(const pool::GlobalPoolShape global, pool::PlanGlobalPool(context, x));
  const int64_t inner = global.inner;
  const Attributes attributes = context.attributes();
  const float p = context.info().opset >= 2 ? static_cast<float>(attributes.Int("p", 2))
                                            : attributes.Float("p", 2.0f);
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, global.output));
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(x.dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    const T* px = x.data<T>();
    T* py = y->data<T>();
    const int64_t planes = x.dim(0) * x.dim(1);
    const C cp = static_cast<C>(p);
    CpuOf(context.backend())
        .pool()
        .ParallelFor(planes, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, inner)),
                     [&](int64_t begin, int64_t end) {
                       for (int64_t plane = begin; plane < end; ++plane) {
                         py[plane] =
                             Compute<T>::Store(PoolPlane<kKind>(px + plane * inner, inner, cp));
                       }
                     });
  });
  return handled ? absl::OkStatus()
                 : NodeError(context, absl::StrCat("element type ", DTypeName(x.dtype()),
                                                   " is not supported"));
}

}  // namespace

void RegisterPoolKernels(KernelRegistry& r) {
  const std::vector<DType> floats = {AMPC_FLOAT_TYPES};
  r.Register("cpu", "MaxPool", {AMPC_FLOAT_TYPES, DType::kInt8, DType::kUint8}, MaxPool);
  r.Register("cpu", "AveragePool", floats, SumPool<false>);
  r.Register("cpu", "LpPool", floats, SumPool<true>);
  r.Register("cpu", "GlobalAveragePool", floats, GlobalPool<GlobalKind::kAverage>);
  r.Register("cpu", "GlobalMaxPool", floats, GlobalPool<GlobalKind::kMax>);
  r.Register("cpu", "GlobalLpPool", floats, GlobalPool<GlobalKind::kLp>);
}

}  // namespace ampc
