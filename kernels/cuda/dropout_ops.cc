// ai.ampc.Dropout on the CUDA backend (kernels/cuda/dropout.h): the CPU kernel's masks
// (kernels/cpu/dropout_kernels.cc), every scalar read on the device.
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/op_support.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

constexpr uint64_t kDefaultDropoutSeed = 0x5eed'd50b'0a7c'0de5ULL;  // as the CPU kernel's

bool Wants(const KernelContext& context, int i) {
  return i < context.num_outputs() && !context.info().node.output(i).empty();
}

absl::Status AmpcDropout(KernelContext& context) {
  const Tensor& x = context.in(0);
  const Tensor* ratio = context.input(1);
  const Tensor* training = context.input(2);
  const Tensor* call = context.input(3);
  if (ratio != nullptr && ratio->size() != 1) {
    return NodeError(context, absl::StrCat("ratio must be one float, got ", ratio->TypeString()));
  }
  if (training != nullptr && (training->dtype() != DType::kBool || training->size() != 1)) {
    return NodeError(context,
                     absl::StrCat("training_mode must be one bool, got ", training->TypeString()));
  }
  if (call == nullptr || call->dtype() != DType::kInt64 || call->size() != 1) {
    return NodeError(context, "input 3 (call) must be one int64");
  }
  const Attributes a = context.attributes();
  const uint64_t seed =
      a.Has("seed") ? static_cast<uint64_t>(a.Int("seed", 0)) : kDefaultDropoutSeed;
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, x.shape(), x.dtype()));
  bool* mask = nullptr;
  if (Wants(context, 1)) {
    AMPC_ASSIGN_OR_RETURN(Tensor * m, context.Output(1, x.shape(), DType::kBool));
    mask = m->data<bool>();
  }
  return cuda::Launched(
      context,
      cuda::Dropout(x.raw(), cuda::ElemOf(x.dtype()), x.size(),
                    ratio == nullptr ? nullptr : ratio->raw(),
                    ratio == nullptr ? cuda::ElemType::kFloat : cuda::ElemOf(ratio->dtype()),
                    training == nullptr ? nullptr : training->data<bool>(), call->data<int64_t>(),
                    seed, y->raw(), mask, cuda::StreamOf(context)));
}

}  // namespace

void RegisterCudaDropoutKernels(KernelRegistry& registry) {
  const std::vector<DType> floats = {DType::kFloat, DType::kFloat16, DType::kBFloat16};
  registry.Register("cuda", "ai.ampc", "Dropout",
                    {{0, floats}, {1, floats}, {2, {DType::kBool}}, {3, {DType::kInt64}}},
                    AmpcDropout);
}

}  // namespace ampc
