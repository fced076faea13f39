// The node checks of the ai.ampc loss-scaling family, shared by every backend's kernels
// (kernels/cpu/scaler_kernels.cc, kernels/cuda/scaler_ops.cc).
#include "kernels/cpu/scaler_ops.h"

#include <initializer_list>
#include <memory>

#include "absl/strings/str_cat.h"
#include "kernels/numerics/lr_schedule.h"
#include "passes/graph/status_macros.h"

namespace ampc::scaler_ops {
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

KernelDef Def(const char* backend, const char* op, KernelCheck check, KernelFunction function,
              const char* domain = kDomain) {
  return KernelDef{
      domain,
      op,
      backend,
      {},
      [check, function](const KernelInfo& info) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
        AMPC_RETURN_IF_ERROR(check(info));
        return std::make_unique<CheckedKernel>(function);
      }};
}

absl::Status CheckCheckFinite(const KernelInfo& info) {
  if (info.node.input_size() < 1 || info.node.output_size() != 1) {
    return absl::InvalidArgumentError("takes one or more inputs and one output");
  }
  for (int i = 0; i < info.node.input_size(); ++i) {
    AMPC_RETURN_IF_ERROR(ExpectType(info, i, DType::kUndefined));
  }
  return absl::OkStatus();
}

absl::Status CheckUpdateScale(const KernelInfo& info) {
  AMPC_RETURN_IF_ERROR(ExpectArity(info, 5, 3));
  return ExpectTypes(info,
                     {DType::kFloat, DType::kInt64, DType::kInt64, DType::kBool, DType::kBool});
}

// (scale, g_1..g_n) with n >= 1 inputs and n + `more_outputs` outputs; else `usage`.
absl::Status CheckScaleAndGradients(const KernelInfo& info, int more_outputs, const char* usage) {
  const int n = info.node.input_size() - 1;
  if (n < 1 || info.node.output_size() != n + more_outputs) {
    return absl::InvalidArgumentError(usage);
  }
  AMPC_RETURN_IF_ERROR(ExpectType(info, 0, DType::kFloat));
  for (int i = 1; i <= n; ++i) AMPC_RETURN_IF_ERROR(ExpectType(info, i, DType::kUndefined));
  return absl::OkStatus();
}

absl::Status CheckUnscaleClip(const KernelInfo& info) {
  return CheckScaleAndGradients(info, 1, "takes (scale, g_1..g_n) -> (u_1..u_n, norm), n >= 1");
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

absl::Status CheckAdam(const KernelInfo& info) {
  AMPC_RETURN_IF_ERROR(ExpectArity(info, 7, 3));
  return ExpectTypes(info, {DType::kBool, DType::kFloat, DType::kInt64, DType::kFloat,
                            DType::kFloat, DType::kFloat, DType::kFloat});
}

// The runtime's MultiSGD (runtime/optimizer_fusion.h): SGD's inputs with (param, grad[, buf])
// repeated, SGD's outputs repeated.
absl::Status CheckMultiSgd(const KernelInfo& info) {
  const bool momentum = info.attributes().Float("momentum", 0.0f) != 0.0f;
  const int per_in = momentum ? 3 : 2, per_out = momentum ? 2 : 1;
  const int inputs = info.node.input_size(), params = (inputs - 3) / per_in;
  if (inputs < 3 + per_in || (inputs - 3) % per_in != 0 ||
      info.node.output_size() != per_out * params) {
    return absl::InvalidArgumentError(
        absl::StrCat("takes (skip, lr, first, then param, grad", momentum ? ", buf" : "",
                     " per parameter) -> (param", momentum ? ", buf" : "", " per parameter)"));
  }
  AMPC_RETURN_IF_ERROR(ExpectTypes(info, {DType::kBool, DType::kFloat, DType::kBool}));
  for (int i = 3; i < inputs; ++i) AMPC_RETURN_IF_ERROR(ExpectType(info, i, DType::kFloat));
  return absl::OkStatus();
}

// The runtime's MultiAdam (runtime/optimizer_fusion.h): Adam's inputs with (param, grad, m, v)
// repeated, Adam's outputs repeated.
absl::Status CheckMultiAdam(const KernelInfo& info) {
  const int inputs = info.node.input_size(), params = (inputs - 3) / 4;
  if (inputs < 7 || (inputs - 3) % 4 != 0 || info.node.output_size() != 3 * params) {
    return absl::InvalidArgumentError(
        "takes (skip, lr, step, then param, grad, m, v per parameter) -> (param, m, v per "
        "parameter)");
  }
  AMPC_RETURN_IF_ERROR(ExpectTypes(info, {DType::kBool, DType::kFloat, DType::kInt64}));
  for (int i = 3; i < inputs; ++i) AMPC_RETURN_IF_ERROR(ExpectType(info, i, DType::kFloat));
  return absl::OkStatus();
}

// The runtime's CheckUnscaleClip (runtime/optimizer_fusion.h).
absl::Status CheckCheckUnscaleClip(const KernelInfo& info) {
  return CheckScaleAndGradients(info, 2,
                                "takes (scale, g_1..g_n) -> (found, u_1..u_n, norm), n >= 1");
}

// The runtime's LearningRate (runtime/learning_rate.h).
absl::Status CheckLearningRate(const KernelInfo& info) {
  AMPC_RETURN_IF_ERROR(ExpectArity(info, 2, 1));
  return ExpectTypes(info, {DType::kDouble, DType::kInt64});
}

}  // namespace

void Register(KernelRegistry& registry, const char* backend, const ScalerKernels& kernels) {
  registry.Register(Def(backend, "CheckFinite", CheckCheckFinite, kernels.check_finite));
  registry.Register(Def(backend, "UpdateScale", CheckUpdateScale, kernels.update_scale));
  registry.Register(Def(backend, "UnscaleClip", CheckUnscaleClip, kernels.unscale_clip));
  registry.Register(Def(backend, "SGD", CheckSgd, kernels.sgd));
  registry.Register(Def(backend, "Adam", CheckAdam, kernels.adam));
  registry.Register(Def(backend, "MultiSGD", CheckMultiSgd, kernels.sgd, kRuntimeDomain));
  registry.Register(Def(backend, "MultiAdam", CheckMultiAdam, kernels.adam, kRuntimeDomain));
  registry.Register(Def(backend, "CheckUnscaleClip", CheckCheckUnscaleClip,
                        kernels.check_unscale_clip, kRuntimeDomain));
  registry.Register(
      Def(backend, "LearningRate", CheckLearningRate, kernels.learning_rate, kRuntimeDomain));
}

absl::Status ExpectRateAndStep(const KernelContext& context) {
  if (context.in(0).size() != kRateWords) {
    return NodeError(context, absl::StrCat("input 0 must hold ", kRateWords,
                                           " doubles (base rate and schedule), not shape ",
                                           ShapeString(context.in(0).shape())));
  }
  return ExpectScalar(context, 1);
}

absl::Status ExpectScalar(const KernelContext& context, int i) {
  if (context.in(i).size() == 1) return absl::OkStatus();
  return NodeError(context, absl::StrCat("input ", i, " must hold one element, not shape ",
                                         ShapeString(context.in(i).shape())));
}

absl::Status ExpectParamShape(const KernelContext& context, std::initializer_list<int> others,
                              int param) {
  const Shape& shape = context.in(param).shape();
  for (int i : others) {
    if (context.in(i).shape() != shape) {
      return NodeError(context,
                       absl::StrCat("input ", i, " has shape ", ShapeString(context.in(i).shape()),
                                    ", the parameter has ", ShapeString(shape)));
    }
  }
  return absl::OkStatus();
}

}  // namespace ampc::scaler_ops
