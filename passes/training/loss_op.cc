#include "passes/training/loss_op.h"

#include <onnx/defs/attr_proto_util.h>

#include <limits>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "passes/graph/graph_index.h"
#include "passes/graph/name_allocator.h"
#include "passes/graph/tensor_data.h"
#include "passes/infer_types.h"
#include "passes/training/training_state.h"

namespace ampc {
namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT;

// Appends the nodes of the loss to `graph`, naming nodes and values through `names`.
class LossWriter {
 public:
  LossWriter(onnx::GraphProto& graph, NameAllocator& names) : graph_(graph), names_(names) {}

  // A one-output node; its output is `output`, or a fresh name after `hint` when that is empty.
  std::string Op(const std::string& op, const std::vector<std::string>& inputs,
                 const std::string& hint, std::vector<onnx::AttributeProto> attributes = {},
                 const std::string& output = "") {
    onnx::NodeProto& node = *graph_.add_node();
    node.set_name(names_.Fresh(absl::StrCat("/ampc/loss_op/", op)));
    node.set_op_type(op);
    for (const std::string& input : inputs) node.add_input(input);
    node.add_output(output.empty() ? names_.Fresh(hint) : output);
    for (onnx::AttributeProto& a : attributes) *node.add_attribute() = std::move(a);
    return node.output(0);
  }
  // `value` in FP32: itself, or a Cast of it.
  std::string Fp32(const std::string& value, int elem_type) {
    if (elem_type == kFloat) return value;
    return Op("Cast", {value}, value + ".fp32", {onnx::MakeAttribute("to", int64_t{kFloat})});
  }

 private:
  onnx::GraphProto& graph_;
  NameAllocator& names_;
};

// What is wrong with `spec`'s value in `index` for that loss ("" when nothing).
std::string ValueProblem(const GraphIndex& index, const LossOpSpec& spec) {
  const std::string& value = spec.value;
  if (index.Source(value) == nullptr) return absl::StrCat("no value '", value, "'");
  const onnx::TypeProto* type = index.Type(value);
  const int elem_type =
      type != nullptr && type->has_tensor_type() ? type->tensor_type().elem_type() : 0;
  if (!IsFloatElementType(elem_type)) {
    return absl::StrCat(
        "'", value, "' is not a float tensor (element type ",
        onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(elem_type)), ")");
  }
  const onnx::TypeProto_Tensor& tensor = type->tensor_type();
  if (spec.kind == LossOpSpec::Kind::kMse) return "";
  const bool causal = spec.kind == LossOpSpec::Kind::kCausalLm;
  const int rank = tensor.has_shape() ? tensor.shape().dim_size() : -1;
  if (rank < (causal ? 3 : 2) || (causal && rank != 3)) {
    return absl::StrCat("'", value, "' has rank ", rank < 0 ? "unknown" : absl::StrCat(rank),
                        causal ? "; causal_lm takes logits [N, T, C]"
                               : "; cross_entropy takes logits [N, ..., C] (classes last)");
  }
  if (spec.label_smoothing > 0 && !tensor.shape().dim(rank - 1).has_dim_value()) {
    return absl::StrCat("label_smoothing needs the number of classes, and dim ", rank - 1, " of '",
                        value, "' has no size");
  }
  return "";
}

// An int64 1-D constant.
std::string Ints(LossWriter& w, const std::vector<int64_t>& values) {
  return w.Op("Constant", {}, "loss.ints", {onnx::MakeAttribute("value_ints", values)});
}

// The cross entropy of FP32 logits `x` (shape `shape`, classes last) against `labels`, as `loss`.
// The causal LM's labels for every position of the logits: labels[:, 1:] and one ignored label
// (`ignored`) at the end. Position t is scored against label t + 1 and the last position against
// nothing, which is transformers' logits[:, :-1] against labels[:, 1:] without slicing the
// logits (a copy of [N, T - 1, C] forward, and a scatter of it back in the gradient).
std::string ShiftedLabels(LossWriter& w, const std::string& labels, int64_t ignored) {
  using onnx::MakeAttribute;
  const std::string tail =
      w.Op("Slice", {labels, Ints(w, {1}), Ints(w, {INT64_MAX}), Ints(w, {1})}, "causal_lm.next");
  const std::string batch =
      w.Op("Slice", {w.Op("Shape", {labels}, "labels.shape"), Ints(w, {0}), Ints(w, {1})},
           "labels.batch");
  const std::string pad_shape =
      w.Op("Concat", {batch, Ints(w, {1})}, "causal_lm.pad_shape", {MakeAttribute("axis", 0L)});
  onnx::TensorProto value;
  value.set_data_type(onnx::TensorProto::INT64);
  value.add_dims(1);
  value.add_int64_data(ignored);
  const std::string pad =
      w.Op("ConstantOfShape", {pad_shape}, "causal_lm.pad", {MakeAttribute("value", value)});
  return w.Op("Concat", {tail, pad}, "causal_lm.labels", {MakeAttribute("axis", 1L)});
}

void WriteCrossEntropy(LossWriter& w, LossOpSpec spec, std::string x,
                       const onnx::TensorShapeProto& shape, std::string labels,
                       const std::string& loss) {
  using onnx::MakeAttribute;
  const int64_t rank = shape.dim_size();
  if (spec.kind == LossOpSpec::Kind::kCausalLm) {
    // Without an ignore_index of the user's, the padding label is one no vocabulary has.
    spec.ignore_index = spec.ignore_index.value_or(std::numeric_limits<int64_t>::min());
    labels = ShiftedLabels(w, labels, *spec.ignore_index);
  }
  if (rank > 2) {  // [N, ..., C] as [M, C] rows, the labels as [M]: the mean is the same
    const onnx::TensorShapeProto_Dimension& classes = shape.dim(rank - 1);
    const std::string rows =
        classes.has_dim_value()
            ? Ints(w, {-1, classes.dim_value()})
            : w.Op("Concat",
                   {Ints(w, {-1}),
                    w.Op("Slice",
                         {w.Op("Shape", {x}, "logits.shape"), Ints(w, {-1}), Ints(w, {INT64_MAX})},
                         "logits.classes")},
                   "logits.rows", {MakeAttribute("axis", 0L)});
    x = w.Op("Reshape", {x, rows}, "cross_entropy.logits");
    labels = w.Op("Reshape", {labels, Ints(w, {-1})}, "cross_entropy.labels");
  }
  std::vector<onnx::AttributeProto> attributes = {MakeAttribute("reduction", std::string("mean"))};
  if (spec.ignore_index) attributes.push_back(MakeAttribute("ignore_index", *spec.ignore_index));
  if (spec.label_smoothing == 0) {
    w.Op("SoftmaxCrossEntropyLoss", {x, labels}, "", std::move(attributes), loss);
    return;
  }
  // (1 - e) NLL(log p) + e mean over the labelled positions of -sum_c log p_c / C.
  const std::string log_p = w.Op("LogSoftmax", {x}, "log_p", {MakeAttribute("axis", int64_t{1})});
  const std::string nll =
      w.Op("NegativeLogLikelihoodLoss", {log_p, labels}, "nll", std::move(attributes));
  const std::string classes_sum = w.Op("ReduceSum", {log_p, Ints(w, {1})}, "log_p.sum",
                                       {MakeAttribute("keepdims", int64_t{0})});
  std::string smooth = classes_sum, count;
  if (spec.ignore_index) {
    const std::string ignored =
        w.Op("Constant", {}, "ignored", {MakeAttribute("value_int", *spec.ignore_index)});
    const std::string kept =
        w.Op("Not", {w.Op("Equal", {labels, ignored}, "ignored.mask")}, "kept");
    const std::string weight =
        w.Op("Cast", {kept}, "kept.f", {MakeAttribute("to", int64_t{kFloat})});
    smooth = w.Op("Mul", {classes_sum, weight}, "log_p.kept");
    count = w.Op("ReduceSum", {weight}, "kept.count", {MakeAttribute("keepdims", int64_t{0})});
  } else {
    count = w.Op("Cast", {w.Op("Size", {labels}, "labels.size")}, "labels.count",
                 {MakeAttribute("to", int64_t{kFloat})});
  }
  const std::string total =
      w.Op("ReduceSum", {smooth}, "log_p.total", {MakeAttribute("keepdims", int64_t{0})});
  auto scalar = [&](double v) {
    return w.Op("Constant", {}, "k", {MakeAttribute("value_float", static_cast<float>(v))});
  };
  const int64_t classes = shape.dim(rank - 1).dim_value();
  const std::string smoothed = w.Op(
      "Mul", {w.Op("Div", {total, count}, "log_p.mean"), scalar(-spec.label_smoothing / classes)},
      "smoothing");
  w.Op("Add", {w.Op("Mul", {nll, scalar(1 - spec.label_smoothing)}, "nll.part"), smoothed}, "", {},
       loss);
}

}  // namespace

absl::StatusOr<LossOpSpec> ParseLossOp(std::string_view text) {
  auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("--loss-op=", std::string(text), ": ", what));
  };
  const size_t colon = text.find(':');
  const absl::string_view kind(text.data(), std::min(colon, text.size()));
  const absl::string_view rest =
      colon == std::string_view::npos
          ? ""
          : absl::string_view(text.data() + colon + 1, text.size() - colon - 1);
  std::vector<absl::string_view> parts = absl::StrSplit(rest, ',');
  LossOpSpec spec;
  if (kind == "cross_entropy") {
    spec.kind = LossOpSpec::Kind::kCrossEntropy;
  } else if (kind == "causal_lm") {
    spec.kind = LossOpSpec::Kind::kCausalLm;
  } else if (kind == "mse") {
    spec.kind = LossOpSpec::Kind::kMse;
  }
  if (colon == std::string_view::npos || parts[0].empty() ||
      (kind != "cross_entropy" && kind != "causal_lm" && kind != "mse")) {
    return error("expected cross_entropy:LOGITS, causal_lm:LOGITS or mse:OUTPUT");
  }
  spec.value = std::string(parts[0]);
  for (size_t i = 1; i < parts.size(); ++i) {
    const absl::string_view option = parts[i];
    if (spec.kind == LossOpSpec::Kind::kMse) return error("mse takes no options");
    int64_t index = 0;
    double smoothing = 0;
    if (absl::ConsumePrefix(&parts[i], "ignore_index=") && absl::SimpleAtoi(parts[i], &index)) {
      spec.ignore_index = index;
    } else if (absl::ConsumePrefix(&parts[i], "label_smoothing=") &&
               absl::SimpleAtod(parts[i], &smoothing) && smoothing >= 0 && smoothing < 1) {
      spec.label_smoothing = smoothing;
    } else {
      return error(absl::StrCat(
          "option '", option, "': expected ignore_index=INTEGER or label_smoothing=E, 0 <= E < 1"));
    }
  }
  return spec;
}

absl::StatusOr<PassResult> LossOp::Run(ModelContext& context) {
  const std::string& text = text_;
  if (text.empty()) return false;
  absl::StatusOr<LossOpSpec> spec = ParseLossOp(text);
  if (!spec.ok()) return spec.status();
  auto error = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(context.file, ": --loss-op=", text, ": ", what));
  };
  onnx::GraphProto& graph = *context.model.mutable_graph();
  absl::StatusOr<std::unique_ptr<GraphIndex>> index = GraphIndex::Build(graph);
  if (!index.ok()) return index.status();
  if (std::string problem = ValueProblem(**index, *spec); !problem.empty()) return error(problem);
  const bool cross_entropy = spec->kind != LossOpSpec::Kind::kMse;
  const std::string& value = spec->value;
  const onnx::TypeProto type = *(*index)->Type(value);
  const int elem_type = type.tensor_type().elem_type();
  NameAllocator names(context.model);
  const std::string input = cross_entropy ? "labels" : "target";
  if (names.Contains(input)) {
    return error(absl::StrCat("the model already has a value named '", input,
                              "', the input this loss adds"));
  }
  names.Reserve(input);
  const std::string loss = names.Fresh("loss");

  onnx::ValueInfoProto& added = *graph.add_input();
  added.set_name(input);
  if (cross_entropy) {
    onnx::TypeProto_Tensor& labels = *added.mutable_type()->mutable_tensor_type();
    labels.set_elem_type(onnx::TensorProto::INT64);
    const auto& dims = type.tensor_type().shape().dim();
    for (int i = 0; i + 1 < dims.size(); ++i) *labels.mutable_shape()->add_dim() = dims.Get(i);
  } else {
    *added.mutable_type() = type;
  }
  LossWriter w(graph, names);
  const std::string x = w.Fp32(value, elem_type);
  if (cross_entropy) {
    WriteCrossEntropy(w, *spec, x, type.tensor_type().shape(), input, loss);
  } else {
    const std::string diff = w.Op("Sub", {x, w.Fp32(input, elem_type)}, "mse.diff");
    const std::string square = w.Op("Mul", {diff, diff}, "mse.square");
    w.Op("ReduceMean", {square}, "", {onnx::MakeAttribute("keepdims", int64_t{0})}, loss);
  }
  *graph.add_output() = TensorValue(loss, kFloat, {});
  if (absl::Status s = InferTypesKeepingIo(context.model, context.file); !s.ok()) return s;
  context.loss = loss;
  return true;
}

}  // namespace ampc
