// Shared loops for elementwise CPU kernels: unary maps and broadcasting binary maps, computed in
// the widened type (FP16/BF16 in float) and rounded once to the output type, in parallel.
#pragma once

#include <algorithm>
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
// time. The same bits either way: the conversions are the scalar ones, fn sees the same floats.
template <typename In, typename Out, typename In2 = In>
inline constexpr bool kBlocked = (kLowFloat<In> || kLowFloat<Out> || kLowFloat<In2>)&&std::
    is_same_v<typename Compute<In>::type, float>&& std::is_same_v<
        typename Compute<In2>::type, float>&& std::is_same_v<typename Compute<Out>::type, float>;

// y[i] = fn(x[i]) for i in [begin, end), a block at a time through float.
template <typename In, typename Out, typename Fn>
void UnaryBlocks(const In* x, Out* y, int64_t begin, int64_t end, Fn& fn) {
  float a[kElementwiseBlock], r[kElementwiseBlock];
  for (int64_t i = begin; i < end; i += kElementwiseBlock) {
    const int64_t n = std::min(kElementwiseBlock, end - i);
    WidenToAcc(x + i, n, a);
    for (int64_t j = 0; j < n; ++j) r[j] = fn(a[j]);
    NarrowFromAcc(r, n, y + i);
  }
}

// y[i] = fn(a[i], b[i]) for i in [begin, end) (a[0] or b[0] throughout when single), a block at a
// time through float.
template <typename In, typename Out, typename In2, typename Fn>
void BinaryBlocks(const In* pa, bool single_a, const In2* pb, bool single_b, Out* y, int64_t begin,
                  int64_t end, Fn& fn) {
  float a[kElementwiseBlock], b[kElementwiseBlock], r[kElementwiseBlock];
  const float a0 = Compute<In>::Load(pa[0]), b0 = Compute<In2>::Load(pb[0]);
  for (int64_t i = begin; i < end; i += kElementwiseBlock) {
    const int64_t n = std::min(kElementwiseBlock, end - i);
    if (!single_a) WidenToAcc(pa + i, n, a);
    if (!single_b) WidenToAcc(pb + i, n, b);
    if (single_a) {
      for (int64_t j = 0; j < n; ++j) r[j] = fn(a0, b[j]);
    } else if (single_b) {
      for (int64_t j = 0; j < n; ++j) r[j] = fn(a[j], b0);
    } else {
      for (int64_t j = 0; j < n; ++j) r[j] = fn(a[j], b[j]);
    }
    NarrowFromAcc(r, n, y + i);
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
  BroadcastIndex index(*shape, inputs);
  const bool single_a = index.single(0), single_b = index.single(1);
  CpuOf(context.backend())
      .pool()
      .ParallelFor(out->size(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
        if constexpr (kBlocked<In, Out, In2>) {
          if (index.trivial() && !(single_a && single_b)) {
            BinaryBlocks(pa, single_a, pb, single_b, y, begin, end, fn);
            return;
          }
        }
        if (index.trivial()) {
          for (int64_t i = begin; i < end; ++i) {
            y[i] = Compute<Out>::Store(fn(Compute<In>::Load(pa[single_a ? 0 : i]),
                                          Compute<In2>::Load(pb[single_b ? 0 : i])));
          }
          return;
        }
        index.ForRange(begin, end, [&](int64_t i, std::span<const int64_t> offsets) {
          y[i] = Compute<Out>::Store(
              fn(Compute<In>::Load(pa[offsets[0]]), Compute<In2>::Load(pb[offsets[1]])));
        });
      });
  return absl::OkStatus();
}

}  // namespace ampc
