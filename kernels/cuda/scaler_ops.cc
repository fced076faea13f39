// ai.ampc CheckFinite, UpdateScale, UnscaleClip, SGD and Adam on the CUDA backend: the
// multi-tensor kernels of kernels/cuda/scaler.h. Names, domain, attributes and creation checks are
// kernels/cpu/scaler_kernels.cc's; every flag, scale, learning rate and step is read on the
// device, so no kernel here waits for the GPU. Where the CPU kernel returns its inputs themselves
// (a static scale, a skipped step), these write copies of them into new outputs.
#include <initializer_list>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/op_support.h"
#include "kernels/cuda/scaler.h"
#include "runtime/status_macros.h"

namespace ampc {
namespace {

constexpr char kDomain[] = "ai.ampc";

bool IsGradientType(DType t) {
  return t == DType::kFloat || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kDouble;
}

// Input i of the node must have type `want` (kUndefined: any gradient type).
absl::Status ExpectType(const KernelInfo& info, int i, DType want) {
  if (i >= static_cast<int>(info.input_types.size())) {
    return absl::InvalidArgumentError(absl::StrCat("input ", i, " is missing"));
  }
  const DType got = info.input_types[i];
  if (want == DType::kUndefined ? IsGradientType(got) : got == want) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("input ", i, " ('", info.node.input(i), "') is ", DTypeName(got), ", expected ",
                   want == DType::kUndefined ? "a float type" : DTypeName(want)));
}

absl::Status ExpectTypes(const KernelInfo& info, std::initializer_list<DType> types) {
  int i = 0;
  for (DType type : types) AMPC_RETURN_IF_ERROR(ExpectType(info, i++, type));
  return absl::OkStatus();
}

absl::Status ExpectArity(const KernelInfo& info, int inputs, int outputs) {
  if (info.node.input_size() == inputs && info.node.output_size() == outputs) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("takes ", inputs, " inputs and ", outputs,
                                                 " outputs, not ", info.node.input_size(), " and ",
                                                 info.node.output_size()));
}

using KernelCheck = absl::Status (*)(const KernelInfo&);

// A function kernel whose node is checked once, when the session is created.
class CheckedKernel final : public OpKernel {
 public:
  explicit CheckedKernel(KernelFunction function) : function_(function) {}
  absl::Status Compute(KernelContext& context) override { return function_(context); }

 private:
  KernelFunction function_;
};

KernelDef Def(const char* op, KernelCheck check, KernelFunction function) {
  return KernelDef{
      kDomain,
      op,
      "cuda",
      {},
      [check, function](const KernelInfo& info) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
        AMPC_RETURN_IF_ERROR(check(info));
        return std::make_unique<CheckedKernel>(function);
      }};
}

// Scalar inputs hold one element (their value stays on the device).
absl::Status ExpectScalars(const KernelContext& context, std::initializer_list<int> inputs) {
  for (int i : inputs) {
    if (context.in(i).size() != 1) {
      return NodeError(context, absl::StrCat("input ", i, " must hold one element, not shape ",
                                             ShapeString(context.in(i).shape())));
    }
  }
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

absl::Status CheckCheckFinite(const KernelInfo& info) {
  if (info.node.input_size() < 1 || info.node.output_size() != 1) {
    return absl::InvalidArgumentError("takes one or more inputs and one output");
  }
  for (int i = 0; i < info.node.input_size(); ++i) {
    AMPC_RETURN_IF_ERROR(ExpectType(info, i, DType::kUndefined));
  }
  return absl::OkStatus();
}

absl::Status CheckFinite(KernelContext& context) {
  std::vector<cuda::GradientRef> grads;
  for (int i = 0; i < context.num_inputs(); ++i) grads.push_back(GradientOf(context.in(i)));
  AMPC_ASSIGN_OR_RETURN(Tensor * found, context.Output(0, {}, DType::kBool));
  return RunCheckUnscaleClip(context, grads, {}, nullptr, 0.0f, found->data<bool>(), nullptr);
}

// ---- UpdateScale ----

absl::Status CheckUpdateScale(const KernelInfo& info) {
  AMPC_RETURN_IF_ERROR(ExpectArity(info, 5, 3));
  return ExpectTypes(info,
                     {DType::kFloat, DType::kInt64, DType::kInt64, DType::kBool, DType::kBool});
}

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

// ---- UnscaleClip ----

absl::Status CheckUnscaleClip(const KernelInfo& info) {
  const int n = info.node.input_size() - 1;
  if (n < 1 || info.node.output_size() != n + 1) {
    return absl::InvalidArgumentError("takes (scale, g_1..g_n) -> (u_1..u_n, norm), n >= 1");
  }
  AMPC_RETURN_IF_ERROR(ExpectType(info, 0, DType::kFloat));
  for (int i = 1; i <= n; ++i) AMPC_RETURN_IF_ERROR(ExpectType(info, i, DType::kUndefined));
  return absl::OkStatus();
}

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

// ---- Optimizers: FP32 parameters, gradients and moments ----

// Inputs `others` must have the shape of the parameter (input 3).
absl::Status ExpectParamShape(const KernelContext& context, std::initializer_list<int> others) {
  const Shape& shape = context.in(3).shape();
  for (int i : others) {
    if (context.in(i).shape() != shape) {
      return NodeError(context,
                       absl::StrCat("input ", i, " has shape ", ShapeString(context.in(i).shape()),
                                    ", the parameter has ", ShapeString(shape)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSgd(const KernelInfo& info) {
  const bool momentum = info.attributes().Float("momentum", 0.0f) != 0.0f;
  absl::Status arity = ExpectArity(info, momentum ? 6 : 5, momentum ? 2 : 1);
  if (!arity.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(momentum ? "with momentum != 0 " : "with momentum 0 ", arity.message(),
                     " (buf and buf_out are present exactly when momentum != 0)"));
  }
  AMPC_RETURN_IF_ERROR(
      ExpectTypes(info, {DType::kBool, DType::kFloat, DType::kBool, DType::kFloat, DType::kFloat}));
  return momentum ? ExpectType(info, 5, DType::kFloat) : absl::OkStatus();
}

absl::Status Sgd(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(ExpectScalars(context, {0, 1, 2}));
  const bool has_buf = context.num_inputs() > 5;
  AMPC_RETURN_IF_ERROR(has_buf ? ExpectParamShape(context, {4, 5})
                               : ExpectParamShape(context, {4}));
  const Attributes a = context.attributes();
  cuda::math::SgdAttrs attrs;
  attrs.momentum = a.Float("momentum", 0.0f);
  attrs.dampening = a.Float("dampening", 0.0f);
  attrs.weight_decay = a.Float("weight_decay", 0.0f);
  attrs.nesterov = a.Int("nesterov", 0) != 0;
  const Tensor& param = context.in(3);
  AMPC_ASSIGN_OR_RETURN(Tensor * param_out, context.Output(0, param.shape(), DType::kFloat));
  cuda::SgdTensor t{param.data<float>(),
                    context.in(4).raw(),
                    cuda::ElemType::kFloat,
                    nullptr,
                    param_out->data<float>(),
                    nullptr,
                    param.size()};
  if (has_buf) {
    AMPC_ASSIGN_OR_RETURN(Tensor * buf_out, context.Output(1, param.shape(), DType::kFloat));
    t.buf = Device<float>(context, 5);
    t.buf_out = buf_out->data<float>();
  }
  return cuda::Launched(
      context, cuda::MultiTensorSgd({t}, attrs, Device<bool>(context, 0), Device<float>(context, 1),
                                    Device<bool>(context, 2), cuda::StreamOf(context)));
}

absl::Status CheckAdam(const KernelInfo& info) {
  AMPC_RETURN_IF_ERROR(ExpectArity(info, 7, 3));
  return ExpectTypes(info, {DType::kBool, DType::kFloat, DType::kInt64, DType::kFloat,
                            DType::kFloat, DType::kFloat, DType::kFloat});
}

// A step below 1 (an error on the CPU, which reads it on the host) leaves everything unchanged.
absl::Status Adam(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(ExpectScalars(context, {0, 1, 2}));
  AMPC_RETURN_IF_ERROR(ExpectParamShape(context, {4, 5, 6}));
  const Attributes a = context.attributes();
  cuda::math::AdamAttrs attrs;
  attrs.beta1 = a.Float("beta1", 0.9f);
  attrs.beta2 = a.Float("beta2", 0.999f);
  attrs.epsilon = a.Float("epsilon", 1e-8f);
  attrs.weight_decay = a.Float("weight_decay", 0.0f);
  attrs.decoupled = a.Int("decoupled", 0) != 0;
  const Shape& shape = context.in(3).shape();
  AMPC_ASSIGN_OR_RETURN(Tensor * p, context.Output(0, shape, DType::kFloat));
  AMPC_ASSIGN_OR_RETURN(Tensor * m, context.Output(1, shape, DType::kFloat));
  AMPC_ASSIGN_OR_RETURN(Tensor * v, context.Output(2, shape, DType::kFloat));
  const cuda::AdamTensor t{
      Device<float>(context, 3), context.in(4).raw(),       cuda::ElemType::kFloat,
      Device<float>(context, 5), Device<float>(context, 6), p->data<float>(),
      m->data<float>(),          v->data<float>(),          p->size()};
  return cuda::Launched(
      context,
      cuda::MultiTensorAdam({t}, attrs, Device<bool>(context, 0), Device<float>(context, 1),
                            Device<int64_t>(context, 2), cuda::StreamOf(context)));
}

}  // namespace

void RegisterCudaScalerKernels(KernelRegistry& registry) {
  registry.Register(Def("CheckFinite", CheckCheckFinite, CheckFinite));
  registry.Register(Def("UpdateScale", CheckUpdateScale, UpdateScale));
  registry.Register(Def("UnscaleClip", CheckUnscaleClip, UnscaleClip));
  registry.Register(Def("SGD", CheckSgd, Sgd));
  registry.Register(Def("Adam", CheckAdam, Adam));
}

}  // namespace ampc
