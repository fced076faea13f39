#include "runtime/trainer_feeding.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

bool IsFloatType(DType dtype) {
  return dtype == DType::kFloat || dtype == DType::kFloat16 || dtype == DType::kBFloat16 ||
         dtype == DType::kDouble;
}

// Rows `indices` of `values` [N, ...] as a tensor of `dtype` (values converted; integers to an
// integer dtype, floats to a float dtype, as PlanFeedingByName checked).
absl::StatusOr<Tensor> GatherRows(const Tensor& values, std::span<const int64_t> indices,
                                  DType dtype) {
  const int64_t n = values.dim(0), per_row = n == 0 ? 0 : values.size() / n;
  Shape shape = values.shape();
  shape[0] = static_cast<int64_t>(indices.size());
  Tensor rows = Tensor::Host(dtype, shape);
  bool ok = true;
  Dispatch<AMPC_FLOAT_TYPES, AMPC_INT_TYPES>(values.dtype(), [&]<typename From>() {
    Dispatch<AMPC_FLOAT_TYPES, AMPC_INT_TYPES>(dtype, [&]<typename To>() {
      for (size_t r = 0; r < indices.size(); ++r) {
        if (indices[r] < 0 || indices[r] >= n) {
          ok = false;
          return;
        }
        const From* in = values.data<From>() + indices[r] * per_row;
        To* out = rows.data<To>() + static_cast<int64_t>(r) * per_row;
        for (int64_t i = 0; i < per_row; ++i) {
          out[i] = Compute<To>::Store(
              static_cast<typename Compute<To>::type>(Compute<From>::Load(in[i])));
        }
      }
    });
  });
  if (!ok) return absl::OutOfRangeError("a sample index outside the data");
  return rows;
}

// Each data input takes the column of its name: every input has one, of a compatible dtype and
// of the per-sample dims the input declares where it declares them.
absl::StatusOr<Feeding> PlanFeedingByName(const TrainingSession& session, const Dataset& data) {
  Feeding feeding;
  feeding.by_name = true;
  std::vector<std::string> names;
  for (const Column& column : data.columns) names.push_back(column.name);
  for (const ValueSpec& spec : session.data_inputs()) {
    const Column* column = data.Find(spec.name);
    if (column == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("the model's input '", spec.name, "' has no file ", spec.name,
                       ".npy (the data has ", absl::StrJoin(names, ", "), ")"));
    }
    const Tensor& values = column->values;
    if (IsFloatType(spec.dtype) != IsFloatType(values.dtype())) {
      return absl::InvalidArgumentError(absl::StrCat(column->file, ": ", DTypeName(values.dtype()),
                                                     " values for the ", DTypeName(spec.dtype),
                                                     " input '", spec.name, "'"));
    }
    if (spec.rank_known && !spec.dims.empty()) {
      bool fits = static_cast<int64_t>(spec.dims.size()) == values.rank();
      for (size_t i = 1; fits && i < spec.dims.size(); ++i) {
        fits = spec.dims[i] < 0 || spec.dims[i] == values.dim(static_cast<int>(i));
      }
      if (!fits) {
        return absl::InvalidArgumentError(absl::StrCat(
            column->file, ": samples of ", ShapeString(values.shape()), " for the input '",
            spec.name, "', which takes ", ShapeString(spec.dims), " (-1: any size)"));
      }
      if (spec.dims[0] > 0 && feeding.fixed_batch == 0) {
        feeding.fixed_batch = spec.dims[0];
        feeding.batch_input = spec.name;
      }
    }
    feeding.inputs.push_back(spec);
  }
  if (feeding.inputs.empty()) return absl::InvalidArgumentError("the algorithm has no data input");
  if (feeding.batch_input.empty()) feeding.batch_input = feeding.inputs[0].name;
  return feeding;
}

}  // namespace

absl::StatusOr<Feeding> PlanFeeding(const TrainingSession& session, const Dataset& data) {
  if (data.by_name()) return PlanFeedingByName(session, data);
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
  feeding.batch_input = feeding.image_input;
  return feeding;
}

absl::StatusOr<NamedTensors> BatchInputs(const Dataset& data, std::span<const int64_t> indices,
                                         const Feeding& feeding) {
  if (!feeding.by_name) {
    AMPC_ASSIGN_OR_RETURN(Batch b, MakeBatch(data, indices, feeding.sample_shape));
    return NamedTensors{{feeding.image_input, std::move(b.images)},
                        {feeding.label_input, std::move(b.labels)}};
  }
  NamedTensors inputs;
  for (const ValueSpec& spec : feeding.inputs) {
    const Column* column = data.Find(spec.name);
    if (column == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("no column '", spec.name, "'"));
    }
    AMPC_ASSIGN_OR_RETURN(Tensor rows, GatherRows(column->values, indices, spec.dtype));
    inputs.emplace(spec.name, std::move(rows));
  }
  return inputs;
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
  if (data.train.by_name()) return absl::OkStatus();  // the loss's own checks at run time
  const Dataset* splits[] = {&data.train, &data.test};
  for (int i = 0; i < 2; ++i) {
    const std::string file =
        data.files.size() == 4 ? data.files[2 * i + 1] : absl::StrCat("--data ", data.description);
    AMPC_RETURN_IF_ERROR(CheckLabels(*splits[i], logits.dims[1], file, ignored));
  }
  return absl::OkStatus();
}

namespace {

// The labels [B] a batch feeds, when accuracy can be read off them: the label input of the
// images layout, else an int64 input named "labels" or "label" of rank 1.
const Tensor* AccuracyLabels(const NamedTensors& inputs, const Feeding& feeding) {
  for (const auto& [name, tensor] : inputs) {
    const bool named =
        feeding.by_name ? name == "labels" || name == "label" : name == feeding.label_input;
    if (named && tensor.rank() == 1 && tensor.dtype() == DType::kInt64) return &tensor;
  }
  return nullptr;
}

// The inference output `loss`, a scalar float, when the graph has one; -1 otherwise.
int LossOutput(const TrainingSession& session) {
  for (size_t i = 0; i < session.eval_outputs().size(); ++i) {
    const ValueSpec& spec = session.eval_outputs()[i];
    if (spec.name == "loss" && spec.rank_known && spec.dims.empty()) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

absl::StatusOr<TestMetrics> Test(const TrainingSession& session, const Dataset& test,
                                 const Feeding& feeding, int64_t batch) {
  const int logits = LogitsOutput(session), loss = LossOutput(session);
  if (feeding.fixed_batch > 0) batch = feeding.fixed_batch;
  int64_t correct = 0, seen = 0, batches = 0;
  double loss_sum = 0;
  bool accuracy = true;
  std::vector<int64_t> indices;
  for (int64_t start = 0; start < test.size(); start += batch) {
    const int64_t count = std::min(batch, test.size() - start);
    if (feeding.fixed_batch > 0 && count < feeding.fixed_batch) break;
    indices.resize(count);
    for (int64_t i = 0; i < count; ++i) indices[i] = start + i;
    AMPC_ASSIGN_OR_RETURN(const NamedTensors inputs, BatchInputs(test, indices, feeding));
    AMPC_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, session.Evaluate(inputs));
    ++batches;
    if (loss >= 0) {
      AMPC_ASSIGN_OR_RETURN(Tensor value, ToHost(outputs[loss]));
      if (value.dtype() == DType::kFloat) loss_sum += value.data<float>()[0];
    }
    AMPC_ASSIGN_OR_RETURN(Tensor scores, ToHost(outputs[logits]));
    const Tensor* labels = AccuracyLabels(inputs, feeding);
    const bool classifier = labels != nullptr && scores.rank() == 2 && scores.dim(0) == count &&
                            scores.dtype() == DType::kFloat;
    if (!classifier && !feeding.by_name) {
      return absl::InvalidArgumentError(
          absl::StrCat("inference output '", session.eval_outputs()[logits].name, "' is ",
                       scores.TypeString(), "; accuracy needs float32 [", count, ", classes]"));
    }
    accuracy = accuracy && classifier;
    if (!accuracy) continue;
    const int64_t classes = scores.dim(1);
    for (int64_t n = 0; n < count; ++n) {
      const float* row = scores.data<float>() + n * classes;
      const int64_t best = std::max_element(row, row + classes) - row;
      correct += best == labels->data<int64_t>()[n];
    }
    seen += count;
  }
  TestMetrics metrics;
  if (accuracy) {
    metrics.accuracy = seen == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(seen);
  }
  if (loss >= 0 && batches > 0) metrics.loss = loss_sum / static_cast<double>(batches);
  return metrics;
}

}  // namespace ampc
