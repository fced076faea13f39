#include "passes/training/loss_op.h"

#include <onnx/defs/attr_proto_util.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "passes/graph/graph_index.h"
#include "passes/graph/name_allocator.h"
#include "passes/infer_types.h"
#include "passes/training/training_state.h"

namespace ampc {
namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT;

bool IsFloat(int elem_type) {
  return elem_type == onnx::TensorProto::FLOAT || elem_type == onnx::TensorProto::FLOAT16 ||
         elem_type == onnx::TensorProto::BFLOAT16 || elem_type == onnx::TensorProto::DOUBLE;
}

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
  if (!IsFloat(elem_type)) {
    return absl::StrCat(
        "'", value, "' is not a float tensor (element type ",
        onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(elem_type)), ")");
  }
  const onnx::TypeProto_Tensor& tensor = type->tensor_type();
  if (spec.kind == LossOpSpec::Kind::kCrossEntropy &&
      (!tensor.has_shape() || tensor.shape().dim_size() != 2)) {
    return absl::StrCat("'", value, "' has rank ",
                        tensor.has_shape() ? absl::StrCat(tensor.shape().dim_size()) : "unknown",
                        "; cross_entropy takes logits [N, C]");
  }
  return "";
}

}  // namespace

absl::StatusOr<LossOpSpec> ParseLossOp(std::string_view text) {
  const size_t colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  if (colon != std::string_view::npos && colon + 1 < text.size()) {
    const std::string value(text.substr(colon + 1));
    if (kind == "cross_entropy") return LossOpSpec{LossOpSpec::Kind::kCrossEntropy, value};
    if (kind == "mse") return LossOpSpec{LossOpSpec::Kind::kMse, value};
  }
  return absl::InvalidArgumentError(absl::StrCat("--loss-op=", std::string(text),
                                                 ": expected cross_entropy:LOGITS or mse:OUTPUT"));
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
  const bool cross_entropy = spec->kind == LossOpSpec::Kind::kCrossEntropy;
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
    *labels.mutable_shape()->add_dim() = type.tensor_type().shape().dim(0);
  } else {
    *added.mutable_type() = type;
  }
  LossWriter w(graph, names);
  const std::string x = w.Fp32(value, elem_type);
  if (cross_entropy) {
    w.Op("SoftmaxCrossEntropyLoss", {x, input}, "",
         {onnx::MakeAttribute("reduction", std::string("mean"))}, loss);
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
