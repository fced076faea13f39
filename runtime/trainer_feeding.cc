#include "runtime/trainer_feeding.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

// The inference output accuracy reads: the one named "logits", else the first.
int LogitsOutput(const TrainingSession& session) {
  for (size_t i = 0; i < session.eval_outputs().size(); ++i) {
    if (session.eval_outputs()[i].name == "logits") return static_cast<int>(i);
  }
  return 0;
}

}  // namespace

absl::StatusOr<Feeding> PlanFeeding(const TrainingSession& session, const Dataset& data) {
  Feeding feeding;
  for (const ValueSpec& spec : session.data_inputs()) {
    std::string& slot = spec.dtype == DType::kInt64 ? feeding.label_input : feeding.image_input;
    if ((spec.dtype != DType::kInt64 && spec.dtype != DType::kFloat) || !slot.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("algorithm input '", spec.name, "' (", DTypeName(spec.dtype),
                       "): ampc train feeds one float32 image input and one int64 label input"));
    }
    slot = spec.name;
    if (spec.dtype == DType::kInt64) continue;
    if (spec.dims.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "image input '", spec.name, spec.rank_known ? "' is a scalar" : "' declares no shape"));
    }
    feeding.fixed_batch = std::max<int64_t>(spec.dims[0], 0);
    feeding.sample_shape.assign(spec.dims.begin() + 1, spec.dims.end());
    const int64_t per_sample = data.images.size() / std::max<int64_t>(data.size(), 1);
    if (std::any_of(feeding.sample_shape.begin(), feeding.sample_shape.end(),
                    [](int64_t d) { return d < 0; })) {
      if (feeding.sample_shape.size() != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("image input '", spec.name, "' has symbolic sample dims; declare them"));
      }
      feeding.sample_shape = {per_sample};
    }
    if (ElementCount(feeding.sample_shape) != per_sample) {
      return absl::InvalidArgumentError(absl::StrCat(
          "image input '", spec.name, "' takes samples of ", ShapeString(feeding.sample_shape),
          "; the data has ", per_sample, " values per sample"));
    }
  }
  if (feeding.image_input.empty() || feeding.label_input.empty()) {
    return absl::InvalidArgumentError(
        "the algorithm needs a float32 image input and an int64 label input");
  }
  return feeding;
}

std::optional<int64_t> IgnoredLabel(const onnx::ModelProto& model) {
  if (model.training_info_size() == 0) return std::nullopt;
  for (const onnx::NodeProto& node : model.training_info(0).algorithm().node()) {
    if (node.op_type() != "SoftmaxCrossEntropyLoss" &&
        node.op_type() != "NegativeLogLikelihoodLoss") {
      continue;
    }
    for (const onnx::AttributeProto& attribute : node.attribute()) {
      if (attribute.name() == "ignore_index") return attribute.i();
    }
  }
  return std::nullopt;
}

absl::Status CheckLabelsFit(const TrainingSession& session, const DataSplits& data,
                            std::optional<int64_t> ignored) {
  if (session.eval_outputs().empty()) return absl::OkStatus();
  const ValueSpec& logits = session.eval_outputs()[LogitsOutput(session)];
  if (logits.dims.size() != 2 || logits.dims[1] <= 0) return absl::OkStatus();
  const Dataset* splits[] = {&data.train, &data.test};
  for (int i = 0; i < 2; ++i) {
    const std::string file =
        data.files.size() == 4 ? data.files[2 * i + 1] : absl::StrCat("--data ", data.description);
    AMPC_RETURN_IF_ERROR(CheckLabels(*splits[i], logits.dims[1], file, ignored));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> TestAccuracy(const TrainingSession& session, const Dataset& test,
                                    const Feeding& feeding, int64_t batch) {
  const int logits = LogitsOutput(session);
  if (feeding.fixed_batch > 0) batch = feeding.fixed_batch;
  int64_t correct = 0, seen = 0;
  std::vector<int64_t> indices;
  for (int64_t start = 0; start < test.size(); start += batch) {
    const int64_t count = std::min(batch, test.size() - start);
    if (feeding.fixed_batch > 0 && count < feeding.fixed_batch) break;
    indices.resize(count);
    for (int64_t i = 0; i < count; ++i) indices[i] = start + i;
    AMPC_ASSIGN_OR_RETURN(Batch b, MakeBatch(test, indices, feeding.sample_shape));
    AMPC_ASSIGN_OR_RETURN(
        std::vector<Tensor> outputs,
        session.Evaluate({{feeding.image_input, b.images}, {feeding.label_input, b.labels}}));
    AMPC_ASSIGN_OR_RETURN(Tensor scores, ToHost(outputs[logits]));
    if (scores.rank() != 2 || scores.dim(0) != count || scores.dtype() != DType::kFloat) {
      return absl::InvalidArgumentError(
          absl::StrCat("inference output '", session.eval_outputs()[logits].name, "' is ",
                       scores.TypeString(), "; accuracy needs float32 [", count, ", classes]"));
    }
    const int64_t classes = scores.dim(1);
    for (int64_t n = 0; n < count; ++n) {
      const float* row = scores.data<float>() + n * classes;
      const int64_t best = std::max_element(row, row + classes) - row;
      correct += best == b.labels.data<int64_t>()[n];
    }
    seen += count;
  }
  return seen == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(seen);
}

}  // namespace ampc
