#include "runtime/kernel.h"

#include "absl/strings/str_cat.h"

namespace ampc {

absl::StatusOr<Tensor*> KernelContext::Output(int i, Shape shape) {
  return Output(i, std::move(shape), info_.output_types[i]);
}

absl::StatusOr<Tensor*> KernelContext::Output(int i, Shape shape, DType dtype) {
  absl::StatusOr<Tensor> tensor = info_.backend.NewTensor(dtype, std::move(shape));
  if (!tensor.ok()) return NodeError(*this, tensor.status().message());
  outputs_[i] = *std::move(tensor);
  return &outputs_[i];
}

absl::Status NodeError(const KernelContext& context, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(context.info().label(), ": ", message));
}

}  // namespace ampc
