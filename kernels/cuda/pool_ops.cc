// MaxPool (and its Indices), AveragePool, GlobalAveragePool and ai.ampc MaxPoolGrad on the CUDA
// backend (launchers in pool.h). The windows come from the CPU kernels' plan (pool_plan.h), so
// output sizes, padding, ceil_mode and count_include_pad are read alike; up to 3 spatial dims.
//
// Against the CPU (kernels/cpu/norm_pool_kernels.cc, grad_pool.h): MaxPool, AveragePool and
// MaxPoolGrad compute in the CPU's order and agree bit for bit (NaN payloads aside);
// GlobalAveragePool sums in another order. MaxPoolGrad ignores indices outside x, which the CPU
// rejects (checking them here would cost a device-to-host copy per step).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/grad_common.h"
#include "kernels/cpu/pool_plan.h"
#include "kernels/cuda/conv_family.h"
#include "kernels/cuda/op_support.h"
#include "kernels/cuda/pool.h"
#include "kernels/cuda/pool_geometry.h"
#include "passes/graph/status_macros.h"

namespace ampc::cuda {
namespace {

using pool::PooledShape;

absl::Status MaxPool(KernelContext& context) {
  const Tensor& x = context.in(0);
  const int opset = context.info().opset;
  AMPC_ASSIGN_OR_RETURN(const pool::PoolPlan plan,
                        pool::MakePlan(context, x, {opset >= 10, opset >= 10}));
  const absl::StatusOr<PoolGeometry> g = PoolGeometryOf(plan);
  AMPC_RETURN_IF_ERROR(Labeled(context, g.status()));
  const bool column_major = context.attributes().Int("storage_order", 0) != 0;
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, PooledShape(x, plan.out)));
  int64_t* indices = nullptr;
  if (WantsOutput(context, 1)) {
    AMPC_ASSIGN_OR_RETURN(Tensor * t, context.Output(1, PooledShape(x, plan.out), DType::kInt64));
    indices = t->data<int64_t>();
  }
  return Launched(context, MaxPoolForward(ElemOf(x.dtype()), x.raw(), y->raw(), indices,
                                          column_major, *g, StreamOf(context)));
}

absl::Status AveragePool(KernelContext& context) {
  const Tensor& x = context.in(0);
  const int opset = context.info().opset;
  AMPC_ASSIGN_OR_RETURN(const pool::PoolPlan plan,
                        pool::MakePlan(context, x, {opset >= 19, opset >= 10}));  // dilations: 19
  const absl::StatusOr<PoolGeometry> g = PoolGeometryOf(plan);
  AMPC_RETURN_IF_ERROR(Labeled(context, g.status()));
  const bool include_pad = context.attributes().Int("count_include_pad", 0) != 0;
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, PooledShape(x, plan.out)));
  return Launched(context, AveragePoolForward(ElemOf(x.dtype()), x.raw(), y->raw(), include_pad, *g,
                                              StreamOf(context)));
}

absl::Status GlobalAveragePool(KernelContext& context) {
  const Tensor& x = context.in(0);
  AMPC_ASSIGN_OR_RETURN(const pool::GlobalPoolShape global, pool::PlanGlobalPool(context, x));
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, global.output));
  return Launched(
      context, GlobalAveragePoolForward(ElemOf(x.dtype()), x.raw(), y->raw(), x.dim(0) * x.dim(1),
                                        global.inner, StreamOf(context)));
}

// MaxPoolGrad(dy, indices, x) -> dx: dy added at MaxPool's indices, deterministically (pool.h).
absl::Status MaxPoolGrad(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(grad::CheckSameType(context, {2}, {"x"}));
  const Tensor& dy = context.in(0);
  const Tensor& indices = context.in(1);
  const Tensor& x = context.in(2);
  AMPC_RETURN_IF_ERROR(grad::CheckShape(context, indices, "indices", dy.shape()));
  AMPC_ASSIGN_OR_RETURN(Tensor * dx, context.Output(0, x.shape()));
  size_t bytes = 0;
  if (MaxPoolBackwardWorkspace(dy.size(), x.size(), &bytes) != cudaSuccess) {
    cudaGetLastError();
    return NodeError(context, "MaxPoolGrad on the GPU takes fewer than 2^31 elements");
  }
  std::shared_ptr<Buffer> workspace;
  if (bytes > 0) {
    absl::StatusOr<std::shared_ptr<Buffer>> allocated = context.backend().Allocate(bytes);
    AMPC_RETURN_IF_ERROR(Labeled(context, allocated.status()));
    workspace = *std::move(allocated);
  }
  return Launched(context, MaxPoolBackward(ElemOf(x.dtype()), dy.raw(), indices.data<int64_t>(),
                                           dy.size(), dx->raw(), x.size(),
                                           workspace != nullptr ? workspace->data() : nullptr,
                                           bytes, StreamOf(context)));
}

}  // namespace

void RegisterCudaPoolKernels(KernelRegistry& r) {
  const std::vector<DType> floats = CnnFloatTypes();
  r.Register("cuda", "MaxPool", floats, MaxPool);
  r.Register("cuda", "AveragePool", floats, AveragePool);
  r.Register("cuda", "GlobalAveragePool", floats, GlobalAveragePool);
  r.Register("cuda", "ai.ampc", "MaxPoolGrad", {{0, floats}, {1, {DType::kInt64}}, {2, floats}},
             MaxPoolGrad);
}

}  // namespace ampc::cuda
