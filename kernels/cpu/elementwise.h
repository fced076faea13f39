// Shared loops for elementwise CPU kernels: unary maps and broadcasting binary maps, computed in
// the widened type (FP16/BF16 in float) and rounded once to the output type, in parallel.
#pragma once

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/broadcast.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/core/kernel.h"

namespace ampc {

inline constexpr int64_t kElementwiseGrain = 16384;

// out[i] = fn(in[i]) with In/Out storage types; fn takes and returns compute types.
template <typename In, typename Out, typename Fn>
absl::Status UnaryMap(KernelContext& context, const Tensor& input, Fn fn, int output = 0) {
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(output, input.shape()));
  const In* x = input.data<In>();
  Out* y = out->data<Out>();
  CpuOf(context.backend())
      .pool()
      .ParallelFor(input.size(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
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
