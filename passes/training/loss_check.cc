#include "passes/training/loss_check.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ampc {

absl::Status CheckLoss(const GraphIndex& index, const std::string& loss) {
  const onnx::TypeProto* type = index.Type(loss);
  if (index.Source(loss) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--loss=", loss, ": no such value in the graph"));
  }
  if (type == nullptr || !type->has_tensor_type() ||
      type->tensor_type().elem_type() != onnx::TensorProto::FLOAT) {
    return absl::InvalidArgumentError(absl::StrCat("--loss=", loss, ": the loss must be FP32"));
  }
  // The step's flags and counters take the loss's shape: it must be rank 0, not [1].
  const auto& shape = type->tensor_type().shape();
  if (!type->tensor_type().has_shape() || shape.dim_size() != 0) {
    std::vector<std::string> dims;
    for (const auto& dim : shape.dim()) {
      dims.push_back(dim.has_dim_value() ? absl::StrCat(dim.dim_value()) : "?");
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "--loss=", loss, ": the loss must be a scalar (rank 0), not ",
        type->tensor_type().has_shape() ? absl::StrCat("[", absl::StrJoin(dims, ", "), "]")
                                        : "of unknown shape",
        "; reduce it (ReduceMean) or Reshape it to []"));
  }
  return absl::OkStatus();
}

std::string EmitLossCheck(StepWriter& w, const std::string& loss) {
  const std::string nan = w.Op("IsNaN", {loss}, "ampc.loss_nan");
  const std::string inf = w.Op("IsInf", {loss}, "ampc.loss_inf");
  return w.Op("Or", {nan, inf}, "ampc.loss_bad");
}

}  // namespace ampc
