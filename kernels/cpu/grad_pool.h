// MaxPoolGrad and AveragePoolGrad (ai.ampc): the backward of norm_pool_kernels.cc's pools.
// MaxPoolGrad(dy, indices, x) adds each dy into the input element MaxPool's Indices output names
// (row-major, storage_order 0); AveragePoolGrad(dy, x) spreads each dy evenly over its window's
// input elements, divided by the count the forward divided by (count_include_pad as there).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/elementwise_convert.h"
#include "kernels/cpu/grad_common.h"
#include "kernels/cpu/pool_plan.h"
#include "kernels/cpu/scratch_arena.h"

namespace ampc::grad {

// MaxPoolGrad over one (n, c) plane at a time, in parallel: dy's plane p (`out_size` values) adds
// into x's plane p (`in_size`), in dy's order as the flat loop adds, so the same bits. False (and
// dx partly written) if an index of some plane lies outside that plane: the caller falls back.
template <typename T>
bool MaxPoolGradByPlane(const KernelContext& context, const T* pdy, const int64_t* idx,
                        int64_t planes, int64_t out_size, int64_t in_size, T* pdx) {
  using C = typename Compute<T>::type;
  constexpr bool kDirect = std::is_same_v<T, C>;
  std::atomic<bool> local = true;
  ParallelFor(context, planes, in_size + out_size, [&](int64_t begin, int64_t end) {
    ScratchBuffer<C> buffer(kDirect ? 0 : in_size);
    for (int64_t p = begin; p < end && local.load(std::memory_order_relaxed); ++p) {
      const int64_t base = p * in_size;
      C* sum = kDirect ? reinterpret_cast<C*>(pdx + base) : buffer.data();
      std::fill(sum, sum + in_size, C{0});
      const int64_t* ip = idx + p * out_size;
      const T* dp = pdy + p * out_size;
      bool inside = true;
      for (int64_t i = 0; i < out_size; ++i) {
        inside = inside && ip[i] >= base && ip[i] < base + in_size;
        if (inside) sum[ip[i] - base] += Compute<T>::Load(dp[i]);
      }
      if (!inside) local = false;
      if constexpr (!kDirect) NarrowFromAcc(sum, in_size, pdx + base);
    }
  });
  return local;
}

inline absl::Status MaxPoolGrad(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(CheckSameType(context, {2}, {"x"}));
  const Tensor& dy = context.in(0);
  const Tensor& indices = context.in(1);
  const Tensor& x = context.in(2);
  AMPC_RETURN_IF_ERROR(CheckShape(context, indices, "indices", dy.shape()));
  const int64_t* idx = indices.data<int64_t>();
  const int64_t count = indices.size(), limit = x.size();
  const bool by_plane = x.rank() >= 2 && dy.rank() == x.rank() && dy.dim(0) == x.dim(0) &&
                        dy.dim(1) == x.dim(1) && x.dim(0) * x.dim(1) > 0;
  AMPC_ASSIGN_OR_RETURN(Tensor * dx, context.Output(0, x.shape()));
  absl::Status status;
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(x.dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    const T* pdy = dy.data<T>();
    T* p = dx->data<T>();
    const int64_t planes = by_plane ? x.dim(0) * x.dim(1) : 0;
    if (by_plane &&
        MaxPoolGradByPlane(context, pdy, idx, planes, count / planes, limit / planes, p)) {
      return;
    }
    for (int64_t i = 0; i < count; ++i) {
      if (idx[i] < 0 || idx[i] >= limit) {
        status =
            NodeError(context, absl::StrCat("index ", idx[i], " at flat position ", i,
                                            " is outside x of shape ", ShapeString(x.shape())));
        return;
      }
    }
    std::vector<C> sum(static_cast<size_t>(limit), C{0});
    for (int64_t i = 0; i < count; ++i) sum[idx[i]] += Compute<T>::Load(pdy[i]);
    for (size_t i = 0; i < sum.size(); ++i) p[i] = Compute<T>::Store(sum[i]);
  });
  if (!status.ok()) return status;
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
