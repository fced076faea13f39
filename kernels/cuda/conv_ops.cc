// Conv, FusedConv (the runtime's Conv + Relu, runtime/conv_fusion.h) and ai.ampc ConvGrad on the
// CUDA backend: cuDNN for the products (cudnn_conv.h), own kernels for the bias, its gradient and
// explicit padding. Geometry and attribute checks are the CPU kernels' (conv_geometry.h).
//
// Against the CPU (kernels/cpu/linalg_conv.h, grad_conv.h), which rounds each output once: with a
// bias, FP16/BF16 Conv rounds twice, once from cuDNN and once after adding the bias (within one
// unit in the last place); FP32 uses TF32 only when the backend allows it (--tf32); sums run in
// another order.
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/conv_geometry.h"
#include "kernels/cuda/conv_family.h"
#include "kernels/cuda/conv_support.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cudnn_conv.h"
#include "kernels/cuda/float_copies.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/op_support.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/kernel_registry.h"

namespace ampc {
namespace cuda {
namespace {

ShiftDims Dims(const std::array<int64_t, 3>& values) {
  ShiftDims dims;
  for (int d = 0; d < 3; ++d) dims.d[d] = values[d];
  return dims;
}

Shape CudnnXShape(const CudnnConvPlan& plan) {
  return Shape(plan.cudnn.x.begin(), plan.cudnn.x.begin() + plan.cudnn.spatial + 2);
}

// What cuDNN reads as X: X itself, or X copied into a zeroed buffer with the plan's padding.
absl::StatusOr<Tensor> CudnnInput(KernelContext& context, const CudnnConvPlan& plan,
                                  const Tensor& x) {
  if (!plan.explicit_pad) return x;
  absl::StatusOr<Tensor> padded = context.backend().NewTensor(x.dtype(), CudnnXShape(plan));
  AMPC_RETURN_IF_ERROR(Labeled(context, padded.status()));
  AMPC_RETURN_IF_ERROR(Launched(
      context,
      ShiftCopy(ElemOf(x.dtype()), x.raw(), Dims(plan.x_dims), padded->raw(),
                Dims(plan.padded_dims), Dims(plan.shift), x.dim(0) * x.dim(1), StreamOf(context))));
  return padded;
}

absl::Status ZeroFill(const KernelContext& context, Tensor& t) {
  return Launched(context, cudaMemsetAsync(t.raw(), 0, t.bytes(), StreamOf(context)));
}

absl::Status RunConv(KernelContext& context, bool relu) {
  AMPC_ASSIGN_OR_RETURN(const linalg::ConvGeometry g, linalg::ConvShape(context));
  const Tensor& x = context.in(0);
  const Tensor& w = context.in(1);
  const Tensor* bias = context.input(2);
  if (w.dtype() != x.dtype() || (bias != nullptr && bias->dtype() != x.dtype())) {
    return NodeError(context, "X, W and B must have one element type");
  }
  Shape y_shape = {x.dim(0), w.dim(0)};
  y_shape.insert(y_shape.end(), g.output.begin(), g.output.end());
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, y_shape));
  if (y->size() == 0) return absl::OkStatus();
  if (x.size() == 0) {  // no input channels: no products, Y is the bias
    AMPC_RETURN_IF_ERROR(ZeroFill(context, *y));
  } else {
    absl::StatusOr<CudnnConvPlan> plan = PlanCudnnConv(x.shape(), w.shape(), g, ElemOf(x.dtype()));
    AMPC_RETURN_IF_ERROR(Labeled(context, plan.status()));
    AMPC_ASSIGN_OR_RETURN(const Tensor input, CudnnInput(context, *plan, x));
    AMPC_RETURN_IF_ERROR(Labeled(context, CudnnConvForward(BackendOf(context), plan->cudnn,
                                                           input.raw(), w.raw(), y->raw())));
  }
  return Launched(
      context,
      AddBiasActivation(ElemOf(x.dtype()), y->raw(), bias != nullptr ? bias->raw() : nullptr,
                        x.dim(0), w.dim(0), ElementCount(g.output), relu, StreamOf(context)));
}

absl::Status Conv(KernelContext& context) { return RunConv(context, false); }

absl::Status FusedConv(KernelContext& context) {
  const std::string activation = context.attributes().String("activation", "");
  if (activation != "Relu") {
    return NodeError(context, absl::StrCat("unsupported activation '", activation, "'"));
  }
  return RunConv(context, true);
}

// db[m] = the sum of dy over images and positions, in FP32, rounded once.
absl::Status BiasGradient(KernelContext& context, const Tensor& dy, int64_t osize) {
  const int64_t m = dy.dim(1);
  AMPC_ASSIGN_OR_RETURN(Tensor * db, context.Output(2, {m}));
  const ChannelLayout layout{dy.dim(0), m, osize};
  absl::StatusOr<Tensor> floats =
      context.backend().NewTensor(DType::kFloat, {m + ChannelSumsWorkspace(layout)});
  AMPC_RETURN_IF_ERROR(Labeled(context, floats.status()));
  float* sums = floats->data<float>();
  const cudaStream_t stream = StreamOf(context);
  AMPC_RETURN_IF_ERROR(Launched(
      context, ChannelSums(ElemOf(dy.dtype()), ChannelTerm::kValue, dy.raw(), nullptr, nullptr,
                           nullptr, layout, 1.0f, sums, nullptr, sums + m, stream)));
  return Launched(context, StoreFloats(sums, *db, stream));
}

// dx and dw by cuDNN (dx through a padded buffer where the plan pads X explicitly).
absl::Status DataAndFilterGradients(KernelContext& context, const linalg::ConvGeometry& g) {
  const Tensor& dy = context.in(0);
  const Tensor& x = context.in(1);
  const Tensor& w = context.in(2);
  Tensor* dx = nullptr;
  Tensor* dw = nullptr;
  if (WantsOutput(context, 0)) {
    AMPC_ASSIGN_OR_RETURN(dx, context.Output(0, x.shape()));
  }
  if (WantsOutput(context, 1)) {
    AMPC_ASSIGN_OR_RETURN(dw, context.Output(1, w.shape()));
  }
  if (dy.size() == 0 || x.size() == 0) {  // no products: both gradients are 0
    if (dx != nullptr) {
      AMPC_RETURN_IF_ERROR(ZeroFill(context, *dx));
    }
    if (dw != nullptr) {
      AMPC_RETURN_IF_ERROR(ZeroFill(context, *dw));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<CudnnConvPlan> planned = PlanCudnnConv(x.shape(), w.shape(), g, ElemOf(x.dtype()));
  AMPC_RETURN_IF_ERROR(Labeled(context, planned.status()));
  const CudnnConvPlan& plan = *planned;
  CudaBackend& backend = BackendOf(context);
  if (dx != nullptr && !plan.explicit_pad) {
    AMPC_RETURN_IF_ERROR(
        Labeled(context, CudnnConvBackwardData(backend, plan.cudnn, w.raw(), dy.raw(), dx->raw())));
  } else if (dx != nullptr) {  // the gradient of the padded X, cropped
    absl::StatusOr<Tensor> padded = backend.NewTensor(x.dtype(), CudnnXShape(plan));
    AMPC_RETURN_IF_ERROR(Labeled(context, padded.status()));
    AMPC_RETURN_IF_ERROR(Labeled(
        context, CudnnConvBackwardData(backend, plan.cudnn, w.raw(), dy.raw(), padded->raw())));
    const std::array<int64_t, 3> back = {-plan.shift[0], -plan.shift[1], -plan.shift[2]};
    AMPC_RETURN_IF_ERROR(Launched(
        context, ShiftCopy(ElemOf(x.dtype()), padded->raw(), Dims(plan.padded_dims), dx->raw(),
                           Dims(plan.x_dims), Dims(back), x.dim(0) * x.dim(1), StreamOf(context))));
  }
  if (dw != nullptr) {
    AMPC_ASSIGN_OR_RETURN(const Tensor input, CudnnInput(context, plan, x));
    AMPC_RETURN_IF_ERROR(Labeled(
        context, CudnnConvBackwardFilter(backend, plan.cudnn, input.raw(), dy.raw(), dw->raw())));
  }
  return absl::OkStatus();
}

// ConvGrad(dy, x, w) -> dx, dw, db (each optional), with Conv's attributes.
absl::Status ConvGrad(KernelContext& context) {
  const Tensor& dy = context.in(0);
  for (int i = 1; i <= 2; ++i) {
    if (context.input(i) == nullptr || context.in(i).dtype() != dy.dtype()) {
      return NodeError(context, "dy, x and w must be present and have one element type");
    }
  }
  // Conv's geometry from a view of this node with Conv's operands (x, w), as the CPU kernel.
  Tensor* operands[] = {const_cast<Tensor*>(&context.in(1)), const_cast<Tensor*>(&context.in(2))};
  KernelContext conv(context.info(), operands, {}, {});
  AMPC_ASSIGN_OR_RETURN(const linalg::ConvGeometry g, linalg::ConvShape(conv));
  Shape y_shape = {context.in(1).dim(0), context.in(2).dim(0)};
  y_shape.insert(y_shape.end(), g.output.begin(), g.output.end());
  if (dy.shape() != y_shape) {
    return NodeError(context, absl::StrCat("dy has shape ", ShapeString(dy.shape()), ", expected ",
                                           ShapeString(y_shape)));
  }
  AMPC_RETURN_IF_ERROR(DataAndFilterGradients(context, g));
  if (WantsOutput(context, 2)) {
    AMPC_RETURN_IF_ERROR(BiasGradient(context, dy, ElementCount(g.output)));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace cuda

void RegisterCudaConvKernels(KernelRegistry& r) {
  const std::vector<DType> floats = cuda::CnnFloatTypes();
  r.Register("cuda", "", "Conv", {{0, floats}, {1, floats}, {2, floats}}, cuda::Conv);
  r.Register("cuda", kRuntimeDomain, "FusedConv", {{0, floats}, {1, floats}, {2, floats}},
             cuda::FusedConv);
  r.Register("cuda", "ai.ampc", "ConvGrad", {{0, floats}, {1, floats}, {2, floats}},
             cuda::ConvGrad);
  cuda::RegisterCudaPoolKernels(r);
  cuda::RegisterCudaBatchNormKernels(r);
}

}  // namespace ampc
