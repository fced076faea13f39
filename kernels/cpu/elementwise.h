// Shared loops for elementwise CPU kernels: unary maps and broadcasting binary maps, computed in
// the widened type (FP16/BF16 in float) and rounded once to the output type, in parallel.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/elementwise_convert.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/core/kernel.h"

namespace ampc {

inline constexpr int64_t kElementwiseGrain = 16384;
// Values per block of the blocked loops below (on the stack, in float).
inline constexpr int64_t kElementwiseBlock = 512;

// Whether the loops over In/In2 -> Out run blocked: FP16/BF16 values widened a block at a time
// with half.h's vector conversions (F16C) instead of one by one, the results rounded a block at a
// time (or, for a bool or float output, stored as computed). The same bits either way: the
// conversions are the scalar ones, fn sees the same floats.
template <typename T>
inline constexpr bool kFloatCompute = std::is_same_v<typename Compute<T>::type, float>;
template <typename In, typename Out, typename In2 = In>
inline constexpr bool kBlocked = (kLowFloat<In> || kLowFloat<Out> ||
                                  kLowFloat<In2>)&&kFloatCompute<In>&& kFloatCompute<In2> &&
                                 (kFloatCompute<Out> || std::is_same_v<Out, bool>);

// The unsigned integer of T's size.
template <typename T>
using SameBits =
    std::conditional_t<sizeof(T) == 1, uint8_t,
                       std::conditional_t<sizeof(T) == 2, uint16_t,
                                          std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;

// take ? a : b through a mask on the bits: `?:` often stays a branch, mispredicted on data.
template <typename T>
T BitSelect(bool take, T a, T b) {
  using U = SameBits<T>;
  static_assert(sizeof(U) == sizeof(T));
  const U mask = static_cast<U>(U{0} - static_cast<U>(take));
  return std::bit_cast<T>(
      static_cast<U>((std::bit_cast<U>(a) & mask) | (std::bit_cast<U>(b) & ~mask)));
}

// A block's results, computed in R, to n outputs: rounded once for FP16/BF16.
template <typename Out, typename R>
void StoreBlock(const R* r, int64_t n, Out* y) {
  if constexpr (kLowFloat<Out>) {
    NarrowFromAcc(r, n, y);
  } else {
    for (int64_t j = 0; j < n; ++j) y[j] = Compute<Out>::Store(r[j]);
  }
}
template <typename Out>
using BlockResult = std::conditional_t<kLowFloat<Out>, float, typename Compute<Out>::type>;

// y[i] = fn(x[i]) for i in [begin, end), a block at a time through float.
template <typename In, typename Out, typename Fn>
void UnaryBlocks(const In* x, Out* y, int64_t begin, int64_t end, Fn& fn) {
  float a[kElementwiseBlock];
  BlockResult<Out> r[kElementwiseBlock];
  for (int64_t i = begin; i < end; i += kElementwiseBlock) {
    const int64_t n = std::min(kElementwiseBlock, end - i);
    WidenToAcc(x + i, n, a);
    for (int64_t j = 0; j < n; ++j) r[j] = fn(a[j]);
    StoreBlock(r, n, y + i);
  }
}

// y[j] = fn(a[j], b[j]) for j in [0, n), with a[0] (b[0]) throughout when kSingleA (kSingleB):
// contiguous loops the compiler vectorises, FP16/BF16 a block at a time through float.
template <bool kSingleA, bool kSingleB, typename In, typename Out, typename In2, typename Fn>
void BinaryLoop(const In* pa, const In2* pb, Out* y, int64_t n, Fn& fn) {
  using CA = typename Compute<In>::type;
  using CB = typename Compute<In2>::type;
  const CA a0 = kSingleA ? Compute<In>::Load(pa[0]) : CA{};
  const CB b0 = kSingleB ? Compute<In2>::Load(pb[0]) : CB{};
  if constexpr (kBlocked<In, Out, In2>) {
    float a[kElementwiseBlock], b[kElementwiseBlock];
    BlockResult<Out> r[kElementwiseBlock];
    for (int64_t i = 0; i < n; i += kElementwiseBlock) {
      const int64_t m = std::min(kElementwiseBlock, n - i);
      if (!kSingleA) WidenToAcc(pa + i, m, a);
      if (!kSingleB) WidenToAcc(pb + i, m, b);
      for (int64_t j = 0; j < m; ++j) r[j] = fn(kSingleA ? a0 : a[j], kSingleB ? b0 : b[j]);
      StoreBlock(r, m, y + i);
    }
  } else {
    for (int64_t j = 0; j < n; ++j) {
      y[j] = Compute<Out>::Store(
          fn(kSingleA ? a0 : Compute<In>::Load(pa[j]), kSingleB ? b0 : Compute<In2>::Load(pb[j])));
    }
  }
}

template <typename In, typename Out, typename In2, typename Fn>
void BinaryRun(const In* pa, bool single_a, const In2* pb, bool single_b, Out* y, int64_t n,
               Fn& fn) {
  if (single_a) {
    single_b ? BinaryLoop<true, true>(pa, pb, y, n, fn) : BinaryLoop<true, false>(pa, pb, y, n, fn);
  } else {
    single_b ? BinaryLoop<false, true>(pa, pb, y, n, fn)
             : BinaryLoop<false, false>(pa, pb, y, n, fn);
  }
}

// out[i] = fn(in[i]) with In/Out storage types; fn takes and returns compute types.
template <typename In, typename Out, typename Fn>
absl::Status UnaryMap(KernelContext& context, const Tensor& input, Fn fn, int output = 0) {
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(output, input.shape()));
  const In* x = input.data<In>();
  Out* y = out->data<Out>();
  CpuOf(context.backend())
      .pool()
      .ParallelFor(input.size(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
        if constexpr (kBlocked<In, Out>) {
          UnaryBlocks(x, y, begin, end, fn);
          return;
        }
        for (int64_t i = begin; i < end; ++i) {
          y[i] = Compute<Out>::Store(fn(Compute<In>::Load(x[i])));
        }
      });
  return absl::OkStatus();
}

// Rows at least this long take the row-wise broadcast loop (BroadcastRows); shorter ones the
// element-wise walk.
inline constexpr int64_t kMinBroadcastRow = 8;

// out = fn(a, b) with broadcasting; the output has storage type Out; b has storage type In2.
template <typename In, typename Out, typename In2 = In, typename Fn>
absl::Status BinaryMap(KernelContext& context, const Tensor& a, const Tensor& b, Fn fn,
                       int output = 0) {
  std::optional<Shape> shape = BroadcastShapes(a.shape(), b.shape());
  if (!shape.has_value()) {
    return NodeError(context, absl::StrCat("shapes ", ShapeString(a.shape()), " and ",
                                           ShapeString(b.shape()), " do not broadcast"));
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(output, *shape));
  const In* pa = a.data<In>();
  const In2* pb = b.data<In2>();
  Out* y = out->data<Out>();
  const Shape* inputs[] = {&a.shape(), &b.shape()};
  ThreadPool& pool = CpuOf(context.backend()).pool();
  BroadcastIndex index(*shape, inputs);
  if (index.trivial()) {
    const bool single_a = index.single(0), single_b = index.single(1);
    pool.ParallelFor(out->size(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
      BinaryRun(pa + (single_a ? 0 : begin), single_a, pb + (single_b ? 0 : begin), single_b,
                y + begin, end - begin, fn);
    });
    return absl::OkStatus();
  }
  BroadcastRows rows(*shape, inputs);
  if (rows.inner() >= kMinBroadcastRow) {
    const int64_t inner = rows.inner();
    const bool single_a = rows.repeated(0), single_b = rows.repeated(1);
    pool.ParallelFor(rows.rows(), std::max<int64_t>(1, kElementwiseGrain / inner),
                     [&](int64_t begin, int64_t end) {
                       rows.ForRows(begin, end, [&](int64_t r, std::span<const int64_t> offsets) {
                         BinaryRun(pa + offsets[0], single_a, pb + offsets[1], single_b,
                                   y + r * inner, inner, fn);
                       });
                     });
    return absl::OkStatus();
  }
  pool.ParallelFor(out->size(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
    if constexpr (kBlocked<In, Out, In2>) {  // results rounded a block at a time, as BinaryLoop
      BlockResult<Out> r[kElementwiseBlock];
      int64_t filled = 0, start = begin;
      index.ForRange(begin, end, [&](int64_t, std::span<const int64_t> offsets) {
        r[filled++] = fn(Compute<In>::Load(pa[offsets[0]]), Compute<In2>::Load(pb[offsets[1]]));
        if (filled == kElementwiseBlock) {
          StoreBlock(r, filled, y + start);
          start += filled;
          filled = 0;
        }
      });
      StoreBlock(r, filled, y + start);
    } else {
      index.ForRange(begin, end, [&](int64_t i, std::span<const int64_t> offsets) {
        y[i] = Compute<Out>::Store(
            fn(Compute<In>::Load(pa[offsets[0]]), Compute<In2>::Load(pb[offsets[1]])));
      });
    }
  });
  return absl::OkStatus();
}

}  // namespace ampc
