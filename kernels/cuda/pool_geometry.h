// The pooling windows of a node as the GPU kernels (pool.h) take them: from the plan the CPU
// kernels use (kernels/cpu/pool_plan.h), so both backends read a node's attributes alike.
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/pool_plan.h"
#include "kernels/cuda/pool.h"

namespace ampc::cuda {

// The plan's windows with its spatial dims as the trailing ones of kMaxPoolDims; Unimplemented
// for more spatial dims than that.
inline absl::StatusOr<PoolGeometry> PoolGeometryOf(const pool::PoolPlan& plan) {
  const size_t dims = plan.in.size();
  if (dims > static_cast<size_t>(kMaxPoolDims)) {
    return absl::UnimplementedError(absl::StrCat("pooling on the GPU takes up to ", kMaxPoolDims,
                                                 " spatial dims, this one has ", dims));
  }
  PoolGeometry g;
  g.planes = plan.planes;
  const size_t lead = kMaxPoolDims - dims;
  for (size_t d = 0; d < dims; ++d) {
    g.in[lead + d] = plan.in[d];
    g.out[lead + d] = plan.out[d];
    g.kernel[lead + d] = plan.kernel[d];
    g.stride[lead + d] = plan.strides[d];
    g.dilation[lead + d] = plan.dilations[d];
    g.pad_begin[lead + d] = plan.pads[d];
    g.pad_end[lead + d] = plan.pads[d + dims];
  }
  return g;
}

}  // namespace ampc::cuda
