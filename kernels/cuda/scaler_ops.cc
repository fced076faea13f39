// ai.ampc CheckFinite, UpdateScale, UnscaleClip, SGD and Adam, and the runtime's
// CheckUnscaleClip, MultiSGD, MultiAdam and LearningRate, on the CUDA backend: the
// multi-tensor kernels of kernels/cuda/scaler.h. Names, domain, attributes and creation checks are
// kernels/cpu/scaler_ops.h's; every flag, scale, learning rate and step is read on the
// device, so no kernel here waits for the GPU. Where the CPU kernel returns its inputs themselves
// (a static scale, a skipped step), these write copies of them into new outputs.
#include "kernels/cpu/scaler_ops.h"

#include <initializer_list>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/op_support.h"
#include "kernels/cuda/scaler.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

using scaler_ops::ExpectParamShape;

// Scalar inputs hold one element (their value stays on the device).
absl::Status ExpectScalars(const KernelContext& context, std::initializer_list<int> inputs) {
  for (int i : inputs) AMPC_RETURN_IF_ERROR(scaler_ops::ExpectScalar(context, i));
  return absl::OkStatus();
}

template <typename T>
const T* Device(const KernelContext& context, int i) {
  return context.in(i).data<T>();
}

cuda::GradientRef GradientOf(const Tensor& t) {
  return {t.raw(), t.size(), cuda::ElemOf(t.dtype())};
}

// Device scratch for CheckUnscaleClip's partial results, returned to the backend's cache when the
// kernel returns: the stream orders the launches using it before any later user.
absl::Status RunCheckUnscaleClip(KernelContext& context,
                                 const std::vector<cuda::GradientRef>& grads,
                                 const std::vector<float*>& outs, const float* scale,
                                 float max_norm, bool* found, float* norm) {
  const size_t bytes = cuda::UnscaleScratchBytes(grads);
  AMPC_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> scratch, context.backend().Allocate(bytes));
  return cuda::Launched(
      context, cuda::CheckUnscaleClip(grads, outs, scale, max_norm, found, norm, scratch->data(),
                                      bytes, cuda::StreamOf(context)));
}

// ---- CheckFinite ----

absl::Status CheckFinite(KernelContext& context) {
  std::vector<cuda::GradientRef> grads;
  for (int i = 0; i < context.num_inputs(); ++i) grads.push_back(GradientOf(context.in(i)));
  AMPC_ASSIGN_OR_RETURN(Tensor * found, context.Output(0, {}, DType::kBool));
  return RunCheckUnscaleClip(context, grads, {}, nullptr, 0.0f, found->data<bool>(), nullptr);
}

// ---- UpdateScale ----

absl::Status UpdateScale(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(ExpectScalars(context, {0, 1, 2, 3, 4}));
  const Attributes a = context.attributes();
  cuda::math::ScaleAttrs attrs;
  attrs.dynamic = a.Int("dynamic", 1) != 0;
  attrs.hysteresis = a.Int("hysteresis", 1);
  attrs.growth_interval = a.Int("growth_interval", 2000);
  attrs.growth_factor = a.Float("growth_factor", 2.0f);
  attrs.backoff_factor = a.Float("backoff_factor", 0.5f);
  attrs.min_scale = a.Float("min_scale", 0.0f);
  attrs.max_scale = a.Float("max_scale", 0.0f);
  AMPC_ASSIGN_OR_RETURN(Tensor * scale, context.Output(0, {}, DType::kFloat));
  AMPC_ASSIGN_OR_RETURN(Tensor * tracker, context.Output(1, {}, DType::kInt64));
  AMPC_ASSIGN_OR_RETURN(Tensor * hysteresis, context.Output(2, {}, DType::kInt64));
  return cuda::Launched(context,
                        cuda::UpdateScale(Device<float>(context, 0), Device<int64_t>(context, 1),
                                          Device<int64_t>(context, 2), Device<bool>(context, 3),
                                          Device<bool>(context, 4), attrs, scale->data<float>(),
                                          tracker->data<int64_t>(), hysteresis->data<int64_t>(),
                                          cuda::StreamOf(context)));
}

// ---- LearningRate (runtime/learning_rate.h) ----

absl::Status LearningRate(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(scaler_ops::ExpectRateAndStep(context));
  AMPC_ASSIGN_OR_RETURN(Tensor * rate, context.Output(0, {}, DType::kFloat));
  return cuda::Launched(context,
                        cuda::LearningRate(Device<double>(context, 0), Device<int64_t>(context, 1),
                                           rate->data<float>(), cuda::StreamOf(context)));
}

// ---- UnscaleClip ----

absl::Status UnscaleClip(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(ExpectScalars(context, {0}));
  const int n = context.num_inputs() - 1;
  std::vector<cuda::GradientRef> grads;
  std::vector<float*> outs;
  for (int i = 0; i < n; ++i) {
    const Tensor& g = context.in(i + 1);
    AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(i, g.shape(), DType::kFloat));
    grads.push_back(GradientOf(g));
    outs.push_back(out->data<float>());
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * norm, context.Output(n, {}, DType::kFloat));
  const float max_norm = context.attributes().Float("max_norm", 0.0f);
  return RunCheckUnscaleClip(context, grads, outs, Device<float>(context, 0), max_norm, nullptr,
                             norm->data<float>());
}

// ---- CheckUnscaleClip (runtime/optimizer_fusion.h): both in one pass over the gradients ----

absl::Status CheckUnscaleClip(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(ExpectScalars(context, {0}));
  const int n = context.num_inputs() - 1;
  AMPC_ASSIGN_OR_RETURN(Tensor * found, context.Output(0, {}, DType::kBool));
  std::vector<cuda::GradientRef> grads;
  std::vector<float*> outs;
  for (int i = 0; i < n; ++i) {
    const Tensor& g = context.in(i + 1);
    AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(i + 1, g.shape(), DType::kFloat));
    grads.push_back(GradientOf(g));
    outs.push_back(out->data<float>());
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * norm, context.Output(n + 1, {}, DType::kFloat));
  const float max_norm = context.attributes().Float("max_norm", 0.0f);
  return RunCheckUnscaleClip(context, grads, outs, Device<float>(context, 0), max_norm,
                             found->data<bool>(), norm->data<float>());
}

// ---- Optimizers: FP32 parameters, gradients and moments ----

// SGD (ai.ampc) with one parameter, and the runtime's MultiSGD (optimizer_fusion.h) with any
// number (inputs skip, lr, first, then param, grad and, with momentum, buf per parameter): one
// multi-tensor launch.
absl::Status Sgd(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(ExpectScalars(context, {0, 1, 2}));
  const Attributes a = context.attributes();
  cuda::math::SgdAttrs attrs;
  attrs.momentum = a.Float("momentum", 0.0f);
  attrs.dampening = a.Float("dampening", 0.0f);
  attrs.weight_decay = a.Float("weight_decay", 0.0f);
  attrs.nesterov = a.Int("nesterov", 0) != 0;
  const bool has_buf = attrs.momentum != 0.0f;
  const int per_in = has_buf ? 3 : 2, per_out = has_buf ? 2 : 1;
  std::vector<cuda::SgdTensor> tensors;
  for (int in = 3, out = 0; in < context.num_inputs(); in += per_in, out += per_out) {
    AMPC_RETURN_IF_ERROR(has_buf ? ExpectParamShape(context, {in + 1, in + 2}, in)
                                 : ExpectParamShape(context, {in + 1}, in));
    const Tensor& param = context.in(in);
    AMPC_ASSIGN_OR_RETURN(Tensor * param_out, context.Output(out, param.shape(), DType::kFloat));
    cuda::SgdTensor t{param.data<float>(),
                      context.in(in + 1).raw(),
                      cuda::ElemType::kFloat,
                      nullptr,
                      param_out->data<float>(),
                      nullptr,
                      param.size()};
    if (has_buf) {
      AMPC_ASSIGN_OR_RETURN(Tensor * buf_out,
                            context.Output(out + 1, param.shape(), DType::kFloat));
      t.buf = Device<float>(context, in + 2);
      t.buf_out = buf_out->data<float>();
    }
    tensors.push_back(t);
  }
  return cuda::Launched(
      context,
      cuda::MultiTensorSgd(tensors, attrs, Device<bool>(context, 0), Device<float>(context, 1),
                           Device<bool>(context, 2), cuda::StreamOf(context)));
}

// Adam (ai.ampc) with one parameter, and the runtime's MultiAdam (optimizer_fusion.h) with any
// number (inputs skip, lr, step, then param, grad, m, v per parameter): one multi-tensor launch.
// A step below 1 (an error on the CPU, which reads it on the host) leaves everything unchanged.
absl::Status Adam(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(ExpectScalars(context, {0, 1, 2}));
  const Attributes a = context.attributes();
  cuda::math::AdamAttrs attrs;
  attrs.beta1 = a.Float("beta1", 0.9f);
  attrs.beta2 = a.Float("beta2", 0.999f);
  attrs.epsilon = a.Float("epsilon", 1e-8f);
  attrs.weight_decay = a.Float("weight_decay", 0.0f);
  attrs.decoupled = a.Int("decoupled", 0) != 0;
  std::vector<cuda::AdamTensor> tensors;
  for (int in = 3, out = 0; in < context.num_inputs(); in += 4, out += 3) {
    AMPC_RETURN_IF_ERROR(ExpectParamShape(context, {in + 1, in + 2, in + 3}, in));
    const Shape& shape = context.in(in).shape();
    AMPC_ASSIGN_OR_RETURN(Tensor * p, context.Output(out, shape, DType::kFloat));
    AMPC_ASSIGN_OR_RETURN(Tensor * m, context.Output(out + 1, shape, DType::kFloat));
    AMPC_ASSIGN_OR_RETURN(Tensor * v, context.Output(out + 2, shape, DType::kFloat));
    tensors.push_back({Device<float>(context, in), context.in(in + 1).raw(), cuda::ElemType::kFloat,
                       Device<float>(context, in + 2), Device<float>(context, in + 3),
                       p->data<float>(), m->data<float>(), v->data<float>(), p->size()});
  }
  return cuda::Launched(
      context,
      cuda::MultiTensorAdam(tensors, attrs, Device<bool>(context, 0), Device<float>(context, 1),
                            Device<int64_t>(context, 2), cuda::StreamOf(context)));
}

}  // namespace

void RegisterCudaScalerKernels(KernelRegistry& registry) {
  scaler_ops::Register(
      registry, "cuda",
      {CheckFinite, UpdateScale, UnscaleClip, Sgd, Adam, CheckUnscaleClip, LearningRate});
}

}  // namespace ampc
