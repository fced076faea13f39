// MaxPoolGrad and AveragePoolGrad (ai.ampc): the backward of norm_pool_kernels.cc's pools.
// MaxPoolGrad(dy, indices, x) adds each dy into the input element MaxPool's Indices output names
// (row-major, storage_order 0); AveragePoolGrad(dy, x) spreads each dy evenly over its window's
// input elements, divided by the count the forward divided by (count_include_pad as there).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/grad_common.h"
#include "kernels/cpu/pool_plan.h"

namespace ampc::grad {

inline absl::Status MaxPoolGrad(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(CheckSameType(context, {2}, {"x"}));
  const Tensor& dy = context.in(0);
  const Tensor& indices = context.in(1);
  const Tensor& x = context.in(2);
  AMPC_RETURN_IF_ERROR(CheckShape(context, indices, "indices", dy.shape()));
  const int64_t* idx = indices.data<int64_t>();
  for (int64_t i = 0; i < indices.size(); ++i) {
    if (idx[i] < 0 || idx[i] >= x.size()) {
      return NodeError(context, absl::StrCat("index ", idx[i], " at flat position ", i,
                                             " is outside x of shape ", ShapeString(x.shape())));
    }
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * dx, context.Output(0, x.shape()));
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(x.dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    std::vector<C> sum(static_cast<size_t>(x.size()), C{0});
    const T* pdy = dy.data<T>();
    for (int64_t i = 0; i < dy.size(); ++i) sum[idx[i]] += Compute<T>::Load(pdy[i]);
    T* p = dx->data<T>();
    for (size_t i = 0; i < sum.size(); ++i) p[i] = Compute<T>::Store(sum[i]);
  });
  return handled ? absl::OkStatus() : Unsupported(context);
}

inline absl::Status AveragePoolGrad(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(CheckSameType(context, {1}, {"x"}));
  const Tensor& dy = context.in(0);
  const Tensor& x = context.in(1);
  // The forward's windows (AveragePool reads no dilations; ceil_mode as from opset 10).
  AMPC_ASSIGN_OR_RETURN(const pool::PoolPlan plan,
                        pool::MakePlan(context, x, {.dilations = false, .ceil_mode = true}));
  AMPC_RETURN_IF_ERROR(CheckShape(context, dy, "dy", pool::PooledShape(x, plan.out)));
  const bool include_pad = context.attributes().Int("count_include_pad", 0) != 0;
  AMPC_ASSIGN_OR_RETURN(Tensor * dx, context.Output(0, x.shape()));
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(x.dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    const T* pdy = dy.data<T>();
    T* pdx = dx->data<T>();
    ParallelFor(
        context, plan.planes, plan.in_size + plan.out_size, [&](int64_t begin, int64_t end) {
          std::vector<C> sum(static_cast<size_t>(plan.in_size));
          for (int64_t p = begin; p < end; ++p) {
            std::fill(sum.begin(), sum.end(), C{0});
            pool::ForEachWindow(
                plan, [&](int64_t o, std::span<const int64_t> offsets, int64_t padded) {
                  const C share = Compute<T>::Load(pdy[p * plan.out_size + o]) /
                                  static_cast<C>(include_pad ? padded : std::ssize(offsets));
                  for (int64_t i : offsets) sum[i] += share;
                });
            for (int64_t i = 0; i < plan.in_size; ++i) {
              pdx[p * plan.in_size + i] = Compute<T>::Store(sum[i]);
            }
          }
        });
  });
  return handled ? absl::OkStatus() : Unsupported(context);
}

}  // namespace ampc::grad
