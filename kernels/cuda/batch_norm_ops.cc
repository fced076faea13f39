// BatchNormalization (inference form, all opsets; training_mode = 1 from opset 14) and ai.ampc
// BatchNormalizationGrad on the CUDA backend (launchers in norm.h). Parameters and statistics of
// any float type are widened to FP32 device arrays first; outputs are rounded once.
//
// Against the CPU (kernels/cpu/norm_kernels.cc, grad_norm.h): the same formulas and the same
// two-pass variance; the inference form rounds each step as the CPU does and should agree bit for
// bit; the per-channel sums (batch statistics, dscale, dbias) add in another order.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/conv_family.h"
#include "kernels/cuda/float_copies.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/op_support.h"
#include "passes/graph/status_macros.h"

namespace ampc::cuda {
namespace {

// FP32 scratch on the backend, carved into arrays one after the other.
class FloatScratch {
 public:
  static absl::StatusOr<FloatScratch> Create(KernelContext& context, int64_t floats) {
    absl::StatusOr<Tensor> t = context.backend().NewTensor(DType::kFloat, {floats});
    AMPC_RETURN_IF_ERROR(Labeled(context, t.status()));
    return FloatScratch(*std::move(t));
  }
  float* Take(int64_t n) {
    float* p = tensor_.data<float>() + used_;
    used_ += n;
    return p;
  }

 private:
  explicit FloatScratch(Tensor t) : tensor_(std::move(t)) {}
  Tensor tensor_;
  int64_t used_ = 0;
};

absl::Status CheckParameter(const KernelContext& context, int i, const char* name, int64_t size) {
  const Tensor* t = context.input(i);
  if (t == nullptr) return NodeError(context, absl::StrCat("input ", name, " is required"));
  if (t->size() == size) return absl::OkStatus();
  return NodeError(context, absl::StrCat(name, " has ", t->size(), " elements (shape ",
                                         ShapeString(t->shape()), "), expected ", size));
}

ChannelLayout LayoutOf(const Tensor& x) {
  ChannelLayout layout{x.dim(0), x.dim(1), 1};
  for (int d = 2; d < x.rank(); ++d) layout.inner *= x.dim(d);
  return layout;
}

// Batch statistics (training_mode = 1): the batch mean and population variance per channel, and
// outputs 1 and 2 (running mean and variance) where the node asks for them.
absl::Status BatchStatistics(KernelContext& context, const ChannelLayout& layout,
                             const float* running_mean, const float* running_var,
                             FloatScratch& scratch, float* mean, float* var) {
  const Tensor& x = context.in(0);
  const cudaStream_t stream = StreamOf(context);
  const float count = static_cast<float>(layout.batch * layout.inner);
  float* workspace = scratch.Take(ChannelSumsWorkspace(layout));
  AMPC_RETURN_IF_ERROR(Launched(
      context, ChannelSums(ElemOf(x.dtype()), ChannelTerm::kValue, x.raw(), nullptr, nullptr,
                           nullptr, layout, count, mean, nullptr, workspace, stream)));
  AMPC_RETURN_IF_ERROR(Launched(
      context, ChannelSums(ElemOf(x.dtype()), ChannelTerm::kCenteredSquare, x.raw(), nullptr, mean,
                           nullptr, layout, count, var, nullptr, workspace, stream)));
  const float momentum = context.attributes().Float("momentum", 0.9f);
  const float* batch[] = {mean, var};
  const float* running[] = {running_mean, running_var};
  float* updated = scratch.Take(layout.channels);
  for (int i = 0; i < 2; ++i) {
    if (!WantsOutput(context, i + 1)) continue;
    AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(i + 1, {layout.channels}));
    AMPC_RETURN_IF_ERROR(Launched(
        context, MomentumUpdate(running[i], batch[i], momentum, updated, layout.channels, stream)));
    AMPC_RETURN_IF_ERROR(Launched(context, StoreFloats(updated, *out, stream)));
  }
  return absl::OkStatus();
}

absl::Status BatchNormalization(KernelContext& context) {
  const Tensor& x = context.in(0);
  AMPC_RETURN_IF_ERROR(CheckBatchChannels(context, x));
  AMPC_ASSIGN_OR_RETURN(const bool training, BatchNormTraining(context));
  const Attributes attributes = context.attributes();
  const int opset = context.info().opset;
  const ChannelLayout layout = LayoutOf(x);
  const bool per_element = opset < 9 && attributes.Int("spatial", 1) == 0;
  const int64_t params = per_element ? layout.channels * layout.inner : layout.channels;
  const char* names[4] = {"scale", "B", "input_mean", "input_var"};
  for (int i = 0; i < 4; ++i)
    AMPC_RETURN_IF_ERROR(CheckParameter(context, i + 1, names[i], params));
  const cudaStream_t stream = StreamOf(context);
  const int64_t scratch_floats =
      5 * params + (training ? 3 * layout.channels + ChannelSumsWorkspace(layout) : 0);
  AMPC_ASSIGN_OR_RETURN(FloatScratch scratch, FloatScratch::Create(context, scratch_floats));
  float* p[4];  // scale, B, mean, var
  for (int i = 0; i < 4; ++i) {
    p[i] = scratch.Take(params);
    AMPC_RETURN_IF_ERROR(Launched(context, LoadFloats(context.in(i + 1), p[i], stream)));
  }
  const float* mean = p[2];
  const float* var = p[3];
  if (training) {
    float* batch_mean = scratch.Take(layout.channels);
    float* batch_var = scratch.Take(layout.channels);
    AMPC_RETURN_IF_ERROR(
        BatchStatistics(context, layout, p[2], p[3], scratch, batch_mean, batch_var));
    mean = batch_mean;
    var = batch_var;
  }
  float* inv_std = scratch.Take(params);
  const float epsilon = attributes.Float("epsilon", 1e-5f);
  AMPC_RETURN_IF_ERROR(Launched(context, InverseStd(var, epsilon, inv_std, params, stream)));
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, x.shape()));
  return Launched(context, BatchNormApply(ElemOf(x.dtype()), x.raw(), y->raw(), layout, per_element,
                                          mean, inv_std, p[0], p[1], stream));
}

// BatchNormalizationGrad(dy, x, scale, saved_mean, saved_inv_std) -> dx, dscale, dbias.
absl::Status BatchNormalizationGrad(KernelContext& context) {
  const Tensor& dy = context.in(0);
  if (context.input(1) == nullptr || context.in(1).dtype() != dy.dtype()) {
    return NodeError(context, "x must be present and have dy's element type");
  }
  const Tensor& x = context.in(1);
  if (x.rank() < 2) {
    return NodeError(context, absl::StrCat("x must be N x C x ... (rank 2 or more), got shape ",
                                           ShapeString(x.shape())));
  }
  if (dy.shape() != x.shape()) {
    return NodeError(context, absl::StrCat("dy has shape ", ShapeString(dy.shape()), ", expected ",
                                           ShapeString(x.shape())));
  }
  const ChannelLayout layout = LayoutOf(x);
  const int64_t c = layout.channels;
  if (context.input(2) == nullptr || context.in(2).shape() != Shape{c}) {
    return NodeError(context, absl::StrCat("scale must have shape [", c, "]"));
  }
  AMPC_RETURN_IF_ERROR(CheckParameter(context, 3, "saved_mean", c));
  AMPC_RETURN_IF_ERROR(CheckParameter(context, 4, "saved_inv_std", c));
  const cudaStream_t stream = StreamOf(context);
  AMPC_ASSIGN_OR_RETURN(FloatScratch scratch,
                        FloatScratch::Create(context, 5 * c + ChannelSumsWorkspace(layout)));
  float* p[3];  // scale, mean, inv_std
  for (int i = 0; i < 3; ++i) {
    p[i] = scratch.Take(c);
    AMPC_RETURN_IF_ERROR(Launched(context, LoadFloats(context.in(i + 2), p[i], stream)));
  }
  float* dscale = scratch.Take(c);
  float* dbias = scratch.Take(c);
  AMPC_RETURN_IF_ERROR(Launched(
      context,
      ChannelSums(ElemOf(x.dtype()), ChannelTerm::kGradTerms, x.raw(), dy.raw(), p[1], p[2], layout,
                  1.0f, dscale, dbias, scratch.Take(ChannelSumsWorkspace(layout)), stream)));
  if (WantsOutput(context, 0)) {
    AMPC_ASSIGN_OR_RETURN(Tensor * dx, context.Output(0, x.shape()));
    AMPC_RETURN_IF_ERROR(
        Launched(context, BatchNormGradInput(ElemOf(x.dtype()), dy.raw(), x.raw(), dx->raw(),
                                             layout, p[0], p[1], p[2], dscale, dbias, stream)));
  }
  // dscale and dbias take their declared type, the scale's (it may be wider than x's).
  const float* sums[] = {dscale, dbias};
  for (int i = 0; i < 2; ++i) {
    if (!WantsOutput(context, i + 1)) continue;
    AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(i + 1, {c}));
    AMPC_RETURN_IF_ERROR(Launched(context, StoreFloats(sums[i], *out, stream)));
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterCudaBatchNormKernels(KernelRegistry& r) {
  const std::vector<DType> floats = CnnFloatTypes();
  r.Register("cuda", "", "BatchNormalization",
             {{0, floats}, {1, floats}, {2, floats}, {3, floats}, {4, floats}}, BatchNormalization);
  r.Register("cuda", "ai.ampc", "BatchNormalizationGrad",
             {{0, floats}, {1, floats}, {2, floats}, {3, floats}, {4, floats}},
             BatchNormalizationGrad);
}

}  // namespace ampc::cuda
