// The reduce family on the CUDA backend: ReduceSum ... ReduceLogSumExp, Softmax, LogSoftmax and
// ai.ampc SoftmaxGrad/LogSoftmaxGrad here; SoftmaxCrossEntropyLoss, LayerNormalization and their
// gradients in reduce_loss_norm_ops.cc. Attribute and shape checks are the CPU kernels'
// (kernels/cpu/reduce_kernels.cc, reduce_softmax.h, grad_kernels.cc); the launchers are in
// reduce.h. Axes are read on the host (a host input).
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/grad_common.h"
#include "kernels/cpu/reduce_common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/op_support.h"
#include "kernels/cuda/reduce.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

using cuda::ElemOf;
using cuda::Launched;
using cuda::StreamOf;

template <cuda::ReduceOp kOp>
absl::Status Reduce(KernelContext& context) {
  const Tensor& x = context.in(0);
  const int rank = x.rank();
  AMPC_ASSIGN_OR_RETURN(const reduce::ReducedDims dims, reduce::ReadReducedDims(context));
  if (dims.noop) {
    context.SetOutput(0, x);
    return absl::OkStatus();
  }
  Shape shape;
  std::vector<int> reduced_axes;
  for (int d = 0; d < rank; ++d) {
    if (dims.reduced[d]) reduced_axes.push_back(d);
    if (!dims.reduced[d] || dims.keepdims) shape.push_back(dims.reduced[d] ? 1 : x.dim(d));
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, shape));
  const int num_axes = static_cast<int>(reduced_axes.size());
  const size_t workspace_bytes =
      cuda::ReduceWorkspaceBytes(kOp, x.shape().data(), rank, reduced_axes.data(), num_axes);
  Tensor workspace;
  if (workspace_bytes > 0) {
    absl::StatusOr<Tensor> t =
        context.backend().NewTensor(DType::kUint8, {static_cast<int64_t>(workspace_bytes)});
    AMPC_RETURN_IF_ERROR(cuda::Labeled(context, t.status()));
    workspace = *std::move(t);
  }
  const cudaError_t error = cuda::Reduce(
      kOp, ElemOf(x.dtype()), x.raw(), y->raw(), x.shape().data(), rank, reduced_axes.data(),
      num_axes, workspace_bytes > 0 ? workspace.raw() : nullptr, StreamOf(context));
  if (error == cudaErrorInvalidValue) {
    return NodeError(context, absl::StrCat("reducing axes of shape ", ShapeString(x.shape()),
                                           " alternates kept and reduced dims too often for the "
                                           "CUDA kernel (at most ",
                                           cuda::kMaxReduceDims, " runs)"));
  }
  return Launched(context, error);
}

template <cuda::SoftmaxKind kKind>
absl::Status Softmax(KernelContext& context) {
  const Tensor& x = context.in(0);
  AMPC_ASSIGN_OR_RETURN(const reduce::AxisLayout layout, reduce::SoftmaxLayout(context));
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, x.shape()));
  return Launched(context, cuda::Softmax(kKind, ElemOf(x.dtype()), x.raw(), y->raw(), layout.outer,
                                         layout.n, layout.inner, StreamOf(context)));
}

template <cuda::SoftmaxKind kKind>
absl::Status SoftmaxGrad(KernelContext& context) {
  const Tensor& dy = context.in(0);
  AMPC_ASSIGN_OR_RETURN(const reduce::AxisLayout layout, grad::SoftmaxGradLayout(context));
  const Tensor& y = context.in(1);
  AMPC_ASSIGN_OR_RETURN(Tensor * dx, context.Output(0, y.shape()));
  return Launched(context,
                  cuda::SoftmaxGrad(kKind, ElemOf(y.dtype()), dy.raw(), y.raw(), dx->raw(),
                                    layout.outer, layout.n, layout.inner, StreamOf(context)));
}

}  // namespace

void RegisterCudaReduceKernels(KernelRegistry& r) {
  const std::vector<DType> floats = {AMPC_FLOAT_TYPES};
  const std::vector<DType> reduce_types = {AMPC_FLOAT_TYPES, DType::kInt32, DType::kInt64};
  const std::vector<DType> minmax_types = {AMPC_FLOAT_TYPES, DType::kInt32, DType::kInt64,
                                           DType::kInt8, DType::kUint8};
  const std::vector<DType> index_types = {DType::kInt32, DType::kInt64};
  const auto reduction = [&](const char* op, const std::vector<DType>& types,
                             KernelFunction function) {
    r.Register("cuda", "", op, {{0, types}, {1, index_types}}, function, {.host = {1}});
  };
  using cuda::ReduceOp;
  reduction("ReduceSum", reduce_types, Reduce<ReduceOp::kSum>);
  reduction("ReduceSumSquare", reduce_types, Reduce<ReduceOp::kSumSquare>);
  reduction("ReduceMean", reduce_types, Reduce<ReduceOp::kMean>);
  reduction("ReduceProd", reduce_types, Reduce<ReduceOp::kProd>);
  reduction("ReduceL1", reduce_types, Reduce<ReduceOp::kL1>);
  reduction("ReduceL2", reduce_types, Reduce<ReduceOp::kL2>);
  reduction("ReduceLogSum", reduce_types, Reduce<ReduceOp::kLogSum>);
  reduction("ReduceLogSumExp", reduce_types, Reduce<ReduceOp::kLogSumExp>);
  reduction("ReduceMax", minmax_types, Reduce<ReduceOp::kMax>);
  reduction("ReduceMin", minmax_types, Reduce<ReduceOp::kMin>);
  using cuda::SoftmaxKind;
  r.Register("cuda", "Softmax", floats, Softmax<SoftmaxKind::kSoftmax>);
  r.Register("cuda", "LogSoftmax", floats, Softmax<SoftmaxKind::kLogSoftmax>);
  r.Register("cuda", grad::kDomain, "SoftmaxGrad", {{0, floats}, {1, floats}},
             SoftmaxGrad<SoftmaxKind::kSoftmax>);
  r.Register("cuda", grad::kDomain, "LogSoftmaxGrad", {{0, floats}, {1, floats}},
             SoftmaxGrad<SoftmaxKind::kLogSoftmax>);
  RegisterCudaLossAndNormKernels(r);
}

}  // namespace ampc
