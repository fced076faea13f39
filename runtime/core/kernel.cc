#include "runtime/core/kernel.h"

#include "absl/strings/str_cat.h"

namespace ampc {

absl::StatusOr<Tensor*> KernelContext::Output(int i, Shape shape) {
  return Output(i, std::move(shape), info_.output_types[i]);
}

absl::StatusOr<Tensor*> KernelContext::Output(int i, Shape shape, DType dtype) {
  if (i < 0 || i >= num_outputs()) {
    return absl::InternalError(absl::StrCat(info_.label(), ": the kernel writes output ", i, " of ",
                                            num_outputs(), " (an ampc bug)"));
  }
  if (DTypeBits(dtype) == 0) {
    return NodeError(*this, absl::StrCat("output ", i, " has element type ", DTypeName(dtype),
                                         ", which the runtime cannot hold"));
  }
  if (i < static_cast<int>(destinations_.size()) && destinations_[i] != nullptr) {
    const Tensor& destination = *destinations_[i];
    if (destination.dtype() == dtype && destination.size() == ElementCount(shape)) {
      outputs_[i] = destination.Reshaped(std::move(shape));
      return &outputs_[i];
    }
  }
  absl::StatusOr<Tensor> tensor = info_.backend.NewTensor(dtype, std::move(shape));
  if (!tensor.ok()) {
    return absl::Status(tensor.status().code(),
                        absl::StrCat(info_.label(), ": ", tensor.status().message()));
  }
  outputs_[i] = *std::move(tensor);
  return &outputs_[i];
}

absl::Status NodeError(const KernelContext& context, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(context.info().label(), ": ", message));
}

}  // namespace ampc
