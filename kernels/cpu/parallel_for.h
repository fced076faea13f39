// The CPU kernels' parallel loop over the CPU backend's thread pool (runtime/core/thread_pool.h),
// with chunks sized by the work each item costs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>

#include "runtime/core/cpu_backend.h"
#include "runtime/core/kernel.h"

namespace ampc {

inline constexpr int64_t kParallelGrain = 16384;  // elements of work per parallel chunk, about

// Calls fn(begin, end) over chunks of [0, n) on the pool of the node's backend, where each item
// costs about `work_per_item` elements of work: a chunk holds about kParallelGrain of them.
inline void ParallelFor(const KernelContext& context, int64_t n, int64_t work_per_item,
                        const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, work_per_item));
  CpuOf(context.backend()).pool().ParallelFor(n, grain, fn);
}

}  // namespace ampc
