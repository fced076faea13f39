// Index plans for the CUDA launchers: the output's dims and, per input, the element stride of each
// output dim (0 where the input is broadcast). Plans are built and simplified on the host; the
// offsets they give for a linear output index are computed by the same code on host and device.
// Plain C++17 without CUDA headers, so host tests check it against the CPU's BroadcastIndex.
#ifndef AMPC_KERNELS_CUDA_BROADCAST_PLAN_H_
#define AMPC_KERNELS_CUDA_BROADCAST_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/numerics/host_device.h"

namespace ampc::cuda {

inline constexpr int kMaxDims = 8;
inline constexpr int kMaxPlanInputs = 3;  // Where: condition, X, Y

struct IndexPlan {
  int32_t rank = 0;        // dims in use, 0..kMaxDims (0: a single element)
  int32_t num_inputs = 0;  // inputs in use, 1..kMaxPlanInputs
  int64_t count = 0;       // output elements
  int64_t dims[kMaxDims] = {};
  int64_t strides[kMaxPlanInputs][kMaxDims] = {};  // element strides; 0 on broadcast dims
};

// A plan whose input k reads element sum_d index[d] * strides[k][d] for output index `index` of
// `dims`. Dims of size 1 are dropped and neighbours that every input walks contiguously are
// merged, so the plan may have fewer dims than the shape. False when more than kMaxDims dims
// remain, a dim or stride is negative, or the input count is outside 1..kMaxPlanInputs.
inline bool PlanStrided(const std::vector<int64_t>& dims,
                        const std::vector<std::vector<int64_t>>& strides, IndexPlan* plan) {
  const int rank = static_cast<int>(dims.size());
  const int inputs = static_cast<int>(strides.size());
  if (inputs < 1 || inputs > kMaxPlanInputs) return false;
  *plan = IndexPlan{};
  plan->num_inputs = inputs;
  plan->count = 1;
  for (int d = 0; d < rank; ++d) {
    if (dims[d] < 0) return false;
    plan->count *= dims[d];
  }
  for (const std::vector<int64_t>& s : strides) {
    if (static_cast<int>(s.size()) != rank) return false;
    for (int64_t v : s) {
      if (v < 0) return false;
    }
  }
  if (plan->count == 0) return true;  // nothing to launch
  // Innermost first while simplifying.
  std::vector<int64_t> kept_dims;
  std::vector<std::vector<int64_t>> kept_strides(inputs);
  for (int d = rank - 1; d >= 0; --d) {
    if (dims[d] == 1) continue;  // its index is always 0
    bool merge = !kept_dims.empty();
    for (int k = 0; k < inputs && merge; ++k) {
      merge = strides[k][d] == kept_strides[k].back() * kept_dims.back();
    }
    if (merge) {
      kept_dims.back() *= dims[d];
      continue;
    }
    kept_dims.push_back(dims[d]);
    for (int k = 0; k < inputs; ++k) kept_strides[k].push_back(strides[k][d]);
  }
  if (kept_dims.size() > static_cast<size_t>(kMaxDims)) return false;
  plan->rank = static_cast<int32_t>(kept_dims.size());
  for (int j = 0; j < plan->rank; ++j) {
    const int d = plan->rank - 1 - j;
    plan->dims[d] = kept_dims[j];
    for (int k = 0; k < inputs; ++k) plan->strides[k][d] = kept_strides[k][j];
  }
  return true;
}

// NumPy (ONNX multidirectional) broadcasting of `inputs`, right-aligned, to the output shape
// `out`. False when an input has more dims than `out` or a dim that is neither 1 nor out's, or
// when PlanStrided fails.
inline bool PlanBroadcast(const std::vector<int64_t>& out,
                          const std::vector<std::vector<int64_t>>& inputs, IndexPlan* plan) {
  const size_t rank = out.size();
  std::vector<std::vector<int64_t>> strides;
  for (const std::vector<int64_t>& in : inputs) {
    if (in.size() > rank) return false;
    const size_t pad = rank - in.size();
    std::vector<int64_t> s(rank, 0);
    int64_t stride = 1;
    for (size_t i = in.size(); i-- > 0;) {
      if (in[i] != out[pad + i] && in[i] != 1) return false;
      s[pad + i] = in[i] == 1 ? 0 : stride;
      stride *= in[i];
    }
    strides.push_back(std::move(s));
  }
  return PlanStrided(out, strides, plan);
}

// A one-input plan that copies a tensor of logical dims (N, C, spatial...) between the NCHW
// layout (channels before the spatial dims) and NHWC (channels last): the output walks the target
// layout's memory order and reads the source layout's offsets. False as PlanStrided, or when
// `dims` has fewer than 2 dims.
inline bool PlanLayoutSwap(const std::vector<int64_t>& dims, bool from_nchw, IndexPlan* plan) {
  const int rank = static_cast<int>(dims.size());
  if (rank < 2) return false;
  std::vector<int64_t> nchw(rank), nhwc(rank);  // each logical dim's stride in either layout
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    nchw[d] = stride;
    stride *= dims[d];
  }
  nhwc[1] = 1;
  stride = dims[1];
  for (int d = rank - 1; d >= 2; --d) {
    nhwc[d] = stride;
    stride *= dims[d];
  }
  nhwc[0] = stride;
  std::vector<int> order = {0};  // the logical dims in the target's memory order
  if (!from_nchw) order.push_back(1);
  for (int d = 2; d < rank; ++d) order.push_back(d);
  if (from_nchw) order.push_back(1);
  std::vector<int64_t> out_dims, strides;
  for (int d : order) {
    out_dims.push_back(dims[d]);
    strides.push_back(from_nchw ? nchw[d] : nhwc[d]);
  }
  return PlanStrided(out_dims, {strides}, plan);
}

// One past the largest element offset input k reads (0 for an empty output).
inline int64_t InputExtent(const IndexPlan& plan, int k) {
  if (plan.count == 0) return 0;
  int64_t last = 0;
  for (int d = 0; d < plan.rank; ++d) last += (plan.dims[d] - 1) * plan.strides[k][d];
  return last + 1;
}

// True when every index and offset fits in 31 bits: the kernels then divide in 32 bits.
inline bool FitsIndex32(const IndexPlan& plan) {
  constexpr int64_t kLimit = int64_t{1} << 31;
  if (plan.count >= kLimit) return false;
  for (int k = 0; k < plan.num_inputs; ++k) {
    if (InputExtent(plan, k) >= kLimit) return false;
  }
  return true;
}

// True when input k is either the output's own layout (stride 1 over a single dim) or a single
// element read for every output (stride 0 everywhere); `*scalar` says which.
inline bool IsFlatInput(const IndexPlan& plan, int k, bool* scalar) {
  if (plan.rank == 0) {
    *scalar = true;
    return true;
  }
  if (plan.rank != 1) return false;
  *scalar = plan.strides[k][0] == 0;
  return plan.strides[k][0] <= 1;
}

// The offsets of inputs 0..kInputs-1 for linear output index `linear`, in Index arithmetic
// (uint32_t when FitsIndex32, else int64_t).
template <int kInputs, typename Index>
AMPC_HD inline void PlanOffsets(const IndexPlan& plan, Index linear, Index (&offsets)[kInputs]) {
  for (int k = 0; k < kInputs; ++k) offsets[k] = 0;
  for (int d = plan.rank - 1; d >= 0; --d) {
    const Index dim = static_cast<Index>(plan.dims[d]);
    const Index next = linear / dim;
    const Index index = linear - next * dim;
    linear = next;
    for (int k = 0; k < kInputs; ++k) offsets[k] += index * static_cast<Index>(plan.strides[k][d]);
  }
}

}  // namespace ampc::cuda

#endif  // AMPC_KERNELS_CUDA_BROADCAST_PLAN_H_
