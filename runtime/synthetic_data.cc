#include "runtime/synthetic_data.h"

#include <algorithm>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

constexpr int64_t kSymbolicTokens = 16;  // the size of a symbolic dim of a token input
constexpr uint64_t kPatternSeed = 0x5eed;

bool IsLabel(const std::string& name) { return name == "labels" || name == "label"; }

float Uniform(std::mt19937_64& engine) {
  return static_cast<float>(engine() >> 40) / static_cast<float>(1 << 24);
}

// The number of classes: the last dim of the output "logits", else of the first output.
absl::StatusOr<int64_t> Classes(const TrainingSession& session) {
  const ValueSpec* logits = nullptr;
  for (const ValueSpec& spec : session.eval_outputs()) {
    if (spec.name == "logits" || logits == nullptr) logits = &spec;
    if (spec.name == "logits") break;
  }
  if (logits == nullptr || logits->dims.empty() || logits->dims.back() <= 0) {
    return absl::InvalidArgumentError(
        "synthetic data needs the classes: an output 'logits' (or the first output) whose last "
        "dim has a size");
  }
  return logits->dims.back();
}

// The per-sample dims of `spec`; symbolic ones are `symbolic` (0: an error naming the input).
absl::StatusOr<Shape> SampleDims(const ValueSpec& spec, int64_t symbolic) {
  if (!spec.rank_known || spec.dims.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("synthetic data: input '", spec.name,
                                                   "' declares no shape; declare [N, ...]"));
  }
  Shape dims(spec.dims.begin() + 1, spec.dims.end());
  for (int64_t& dim : dims) {
    if (dim >= 0) continue;
    if (symbolic == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("synthetic data: input '", spec.name,
                       "' has a symbolic dim besides the "
                       "batch; export it with a static size (e.g. the image size)"));
    }
    dim = symbolic;
  }
  return dims;
}

// One split of `count` samples.
class SampleWriter {
 public:
  SampleWriter(const TrainingSession& session,
               const absl::flat_hash_map<std::string, int64_t>& vocab, int64_t classes)
      : session_(session), vocab_(vocab), classes_(classes) {}

  absl::StatusOr<Dataset> Write(int64_t count, uint64_t seed) const;

 private:
  const TrainingSession& session_;
  const absl::flat_hash_map<std::string, int64_t>& vocab_;
  int64_t classes_;
};

absl::StatusOr<Dataset> SampleWriter::Write(int64_t count, uint64_t seed) const {
  std::mt19937_64 engine(seed);
  // Per sample: its class, and the start of its token run.
  std::vector<int64_t> classes(count), starts(count);
  int64_t vocabulary = 0;
  for (const ValueSpec& spec : session_.data_inputs()) {
    auto it = vocab_.find(spec.name);
    if (it != vocab_.end()) vocabulary = std::max(vocabulary, it->second);
  }
  // Class k's runs start in the k-th band of V / C token ids: the first token tells the class.
  const int64_t band = std::max<int64_t>(vocabulary / classes_, 1);
  for (int64_t n = 0; n < count; ++n) {
    classes[n] = static_cast<int64_t>(engine() % classes_);
    if (vocabulary > 0) {
      starts[n] = (classes[n] * band + static_cast<int64_t>(engine() % band)) % vocabulary;
    }
  }
  Dataset data;
  for (const ValueSpec& spec : session_.data_inputs()) {
    const bool tokens = vocab_.contains(spec.name) || IsLabel(spec.name);
    AMPC_ASSIGN_OR_RETURN(
        Shape dims, SampleDims(spec, tokens || spec.dtype == DType::kInt64 ? kSymbolicTokens : 0));
    const int64_t per_sample = ElementCount(dims);
    Shape shape = {count};
    shape.insert(shape.end(), dims.begin(), dims.end());
    if (spec.dtype != DType::kInt64) {
      if (spec.dtype != DType::kFloat || IsLabel(spec.name)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "synthetic data makes float32 samples and int64 tokens and labels, not the ",
            DTypeName(spec.dtype), " input '", spec.name, "'; use --data npy:DIR"));
      }
      std::mt19937_64 patterns(kPatternSeed);
      std::vector<float> pattern(classes_ * per_sample);
      for (float& p : pattern) p = Uniform(patterns);
      Tensor values = Tensor::Host(DType::kFloat, shape);
      for (int64_t n = 0; n < count; ++n) {
        for (int64_t i = 0; i < per_sample; ++i) {
          values.data<float>()[n * per_sample + i] =
              pattern[classes[n] * per_sample + i] + 0.6f * (Uniform(engine) - 0.5f);
        }
      }
      data.columns.push_back({spec.name, std::move(values), ""});
      continue;
    }
    Tensor values = Tensor::Host(DType::kInt64, shape);
    int64_t* out = values.data<int64_t>();
    auto it = vocab_.find(spec.name);
    for (int64_t n = 0; n < count; ++n) {
      for (int64_t i = 0; i < per_sample; ++i) {
        int64_t v = 1;  // a mask
        if (it != vocab_.end()) v = (starts[n] + i) % it->second;
        if (IsLabel(spec.name) && dims.empty()) {
          v = classes[n];
        } else if (IsLabel(spec.name)) {
          const int64_t token = (starts[n] + i) % std::max<int64_t>(vocabulary, 1);
          v = vocabulary == classes_ ? token : token % classes_;
        }
        out[n * per_sample + i] = v;
      }
    }
    data.columns.push_back({spec.name, std::move(values), ""});
  }
  return data;
}

}  // namespace

absl::flat_hash_map<std::string, int64_t> TokenVocabularies(const onnx::ModelProto& model) {
  absl::flat_hash_map<std::string, int64_t> vocab;
  absl::flat_hash_map<std::string, int64_t> rows;  // initializer -> its first dim
  for (const onnx::TensorProto& tensor : model.graph().initializer()) {
    if (tensor.dims_size() >= 1) rows[tensor.name()] = tensor.dims(0);
  }
  for (const onnx::ValueInfoProto& input : model.graph().input()) {
    for (const onnx::NodeProto& node : model.graph().node()) {
      if (node.op_type() != "Gather" || node.input_size() < 2 || node.input(1) != input.name()) {
        continue;
      }
      bool axis0 = true;
      for (const onnx::AttributeProto& a : node.attribute()) {
        axis0 = axis0 && !(a.name() == "axis" && a.i() != 0);
      }
      auto table = rows.find(node.input(0));
      if (axis0 && table != rows.end() && table->second > 0) {
        int64_t& v = vocab[input.name()];
        v = v == 0 ? table->second : std::min(v, table->second);
      }
    }
  }
  return vocab;
}

bool TakesSyntheticImages(const TrainingSession& session) {
  int floats = 0, labels = 0;
  for (const ValueSpec& spec : session.data_inputs()) {
    if (spec.dtype == DType::kInt64) {
      ++labels;
      continue;
    }
    if (spec.dtype != DType::kFloat || spec.dims.empty()) return false;
    const Shape sample(spec.dims.begin() + 1, spec.dims.end());
    const bool symbolic =
        std::any_of(sample.begin(), sample.end(), [](int64_t d) { return d < 0; });
    if (!(symbolic ? sample.size() == 1 : ElementCount(sample) == 28 * 28)) return false;
    ++floats;
  }
  return floats == 1 && labels == 1;
}

absl::StatusOr<DataSplits> SyntheticForModel(const TrainingSession& session,
                                             const absl::flat_hash_map<std::string, int64_t>& vocab,
                                             int64_t train, int64_t test, uint64_t seed) {
  AMPC_ASSIGN_OR_RETURN(const int64_t classes, Classes(session));
  const SampleWriter writer(session, vocab, classes);
  DataSplits splits;
  AMPC_ASSIGN_OR_RETURN(splits.train, writer.Write(train, seed));
  AMPC_ASSIGN_OR_RETURN(splits.test, writer.Write(test, seed + 1));
  splits.synthetic = train;
  splits.description = absl::StrCat("synthetic (shaped from the model's inputs, ", classes,
                                    " classes): ", train, " train, ", test, " test");
  return splits;
}

}  // namespace ampc
