#include "passes/training/split_sequences.h"

#include <onnx/defs/attr_proto_util.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "passes/float_support.h"
#include "passes/graph/name_allocator.h"
#include "passes/graph/remove_if.h"
#include "passes/graph/tensor_data.h"

namespace ampc {
namespace {

bool IsOp(const onnx::NodeProto& node, absl::string_view op) {
  return node.op_type() == op && (node.domain().empty() || node.domain() == "ai.onnx");
}

struct Ints {
  std::vector<int64_t> values;
  bool scalar = false;
};

std::optional<Ints> TensorInts(const onnx::TensorProto& tensor) {
  const bool int64 = tensor.data_type() == onnx::TensorProto::INT64;
  if (!(int64 || tensor.data_type() == onnx::TensorProto::INT32) || tensor.dims_size() > 1 ||
      tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    return std::nullopt;
  }
  const std::string raw = RawBytes(tensor);
  Ints ints{{}, tensor.dims_size() == 0};
  for (size_t at = 0; at + (int64 ? 8 : 4) <= raw.size(); at += int64 ? 8 : 4) {
    int64_t v = 0;
    int32_t v32 = 0;
    if (int64) std::memcpy(&v, raw.data() + at, 8);
    if (!int64) std::memcpy(&v32, raw.data() + at, 4), v = v32;
    ints.values.push_back(v);
  }
  return ints;
}

// The integers `value` holds when an initializer or a Constant node defines it.
std::optional<Ints> ConstantInts(const GraphIndex& index, const std::string& value) {
  const ValueSource* source = index.Source(value);
  if (source == nullptr) return std::nullopt;
  if (source->kind == ValueSource::Kind::kInitializer) return TensorInts(*index.Initializer(value));
  if (source->kind != ValueSource::Kind::kNode || !IsOp(*source->node, "Constant") ||
      source->node->attribute_size() != 1) {
    return std::nullopt;
  }
  const onnx::AttributeProto& attribute = source->node->attribute(0);
  if (attribute.name() == "value") return TensorInts(attribute.t());
  if (attribute.name() == "value_int") return Ints{{attribute.i()}, true};
  if (attribute.name() == "value_ints") {
    return Ints{{attribute.ints().begin(), attribute.ints().end()}, false};
  }
  return std::nullopt;
}

int64_t IntAttribute(const onnx::NodeProto& node, absl::string_view name, int64_t otherwise) {
  for (const onnx::AttributeProto& attribute : node.attribute()) {
    if (attribute.name() == name) return attribute.i();
  }
  return otherwise;
}

// One SplitToSequence the pass rewrites: where it cuts, and which SequenceAt reads which piece.
struct Plan {
  int64_t axis = 0;
  std::vector<int64_t> sizes;  // of the pieces, along `axis`
  bool squeeze = false;        // keepdims = 0 without `split`: the pieces lose `axis`
  std::vector<std::pair<int, const onnx::NodeProto*>> reads;  // (piece, SequenceAt)
  const onnx::TypeProto* input_type = nullptr;                // declared, or null
};

// The declared size of dim `axis` of `value`; -1 when unknown. `axis` may be negative.
int64_t DeclaredDim(const GraphIndex& index, const std::string& value, int64_t& axis) {
  const onnx::TypeProto* type = index.Type(value);
  if (type == nullptr || !type->has_tensor_type() || !type->tensor_type().has_shape()) return -1;
  const onnx::TensorShapeProto& shape = type->tensor_type().shape();
  if (axis < 0) axis += shape.dim_size();
  if (axis < 0 || axis >= shape.dim_size() || !shape.dim(axis).has_dim_value()) return -1;
  return shape.dim(axis).dim_value();
}

std::optional<std::vector<int64_t>> PieceSizes(const GraphIndex& index, const onnx::NodeProto& node,
                                               int64_t& axis) {
  const int64_t dim = DeclaredDim(index, node.input(0), axis);
  const bool has_split = node.input_size() > 1 && !node.input(1).empty();
  std::optional<Ints> split;
  if (has_split && !(split = ConstantInts(index, node.input(1)))) return std::nullopt;
  if (has_split && !split->scalar) return split->values;
  const int64_t size = has_split ? (split->values.size() == 1 ? split->values[0] : 0) : 1;
  if (dim < 0 || size <= 0) return std::nullopt;
  std::vector<int64_t> sizes(dim / size, size);
  if (dim % size != 0) sizes.push_back(dim % size);
  return sizes;
}

std::optional<Plan> PlanFor(const GraphIndex& index, const onnx::NodeProto& node) {
  const std::string& sequence = node.output(0);
  if (node.input_size() < 1 || index.IsGraphOutput(sequence)) return std::nullopt;
  Plan plan{IntAttribute(node, "axis", 0), {}, false, {}, index.Type(node.input(0))};
  if (plan.input_type != nullptr && !plan.input_type->has_tensor_type()) return std::nullopt;
  std::optional<std::vector<int64_t>> sizes = PieceSizes(index, node, plan.axis);
  if (!sizes || sizes->empty()) return std::nullopt;
  plan.sizes = std::move(*sizes);
  const bool has_split = node.input_size() > 1 && !node.input(1).empty();
  plan.squeeze = !has_split && IntAttribute(node, "keepdims", 1) == 0;
  const int64_t count = static_cast<int64_t>(plan.sizes.size());
  for (const ValueUse& use : index.Consumers(sequence)) {
    if (use.slot != 0 || !IsOp(*use.node, "SequenceAt") || use.node->input_size() != 2) {
      return std::nullopt;
    }
    std::optional<Ints> at = ConstantInts(index, use.node->input(1));
    if (!at || !at->scalar || at->values.size() != 1) return std::nullopt;
    const int64_t piece = at->values[0] < 0 ? at->values[0] + count : at->values[0];
    if (piece < 0 || piece >= count) return std::nullopt;
    plan.reads.push_back({static_cast<int>(piece), use.node});
  }
  return plan;
}

// Declares piece `i` of `plan` (a value no SequenceAt output named, so untyped): the input's
// type with dim `axis` the piece's size, as the passes after inference expect of every value.
void DeclarePiece(onnx::GraphProto& graph, const std::string& name, const onnx::TypeProto& input,
                  const Plan& plan, size_t i) {
  onnx::ValueInfoProto& info = *graph.add_value_info();
  info.set_name(name);
  *info.mutable_type() = input;
  onnx::TensorShapeProto* shape = info.mutable_type()->mutable_tensor_type()->mutable_shape();
  const int64_t axis = plan.axis < 0 ? plan.axis + shape->dim_size() : plan.axis;
  if (!info.type().tensor_type().has_shape() || axis < 0 || axis >= shape->dim_size()) {
    info.mutable_type()->mutable_tensor_type()->clear_shape();
    return;
  }
  shape->mutable_dim(static_cast<int>(axis))->set_dim_value(plan.sizes[i]);
}

onnx::TensorProto Int64s(const std::string& name, const std::vector<int64_t>& values) {
  onnx::TensorProto tensor;
  tensor.set_name(name);
  tensor.set_data_type(onnx::TensorProto::INT64);
  tensor.add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) tensor.add_int64_data(v);
  return tensor;
}

// The Split (and its Squeezes and Identities) that replace `node` under `plan`; `opset` is the
// default domain's (from 13 Split and Squeeze take their lists as inputs).
std::vector<onnx::NodeProto> Rewrite(const onnx::NodeProto& node, const Plan& plan, int opset,
                                     onnx::GraphProto& graph, NameAllocator& names) {
  onnx::NodeProto split;
  split.set_op_type("Split");
  split.set_name(node.name());
  split.add_input(node.input(0));
  split.add_attribute()->CopyFrom(onnx::MakeAttribute("axis", plan.axis));
  if (opset >= 13) {
    *graph.add_initializer() = Int64s(names.Fresh(node.output(0) + ".sizes"), plan.sizes);
    split.add_input(graph.initializer(graph.initializer_size() - 1).name());
  } else {
    split.add_attribute()->CopyFrom(onnx::MakeAttribute("split", plan.sizes));
  }
  std::vector<std::string> pieces(plan.sizes.size());
  std::vector<onnx::NodeProto> nodes(1);
  for (const auto& [piece, at] : plan.reads) {
    if (pieces[piece].empty() && !plan.squeeze) {
      pieces[piece] = at->output(0);
      continue;
    }
    if (pieces[piece].empty())
      pieces[piece] = names.Fresh(absl::StrCat(node.output(0), ".", piece));
    onnx::NodeProto& extra = nodes.emplace_back();
    extra.set_op_type(plan.squeeze ? "Squeeze" : "Identity");
    extra.set_name(at->name());
    extra.add_input(pieces[piece]);
    extra.add_output(at->output(0));
    if (!plan.squeeze) continue;
    if (opset >= 13) {
      *graph.add_initializer() = Int64s(names.Fresh(at->output(0) + ".axes"), {plan.axis});
      extra.add_input(graph.initializer(graph.initializer_size() - 1).name());
    } else {
      extra.add_attribute()->CopyFrom(onnx::MakeAttribute("axes", std::vector<int64_t>{plan.axis}));
    }
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!pieces[i].empty() && !plan.squeeze) {
      split.add_output(pieces[i]);
      continue;
    }
    if (pieces[i].empty()) pieces[i] = names.Fresh(absl::StrCat(node.output(0), ".", i));
    split.add_output(pieces[i]);
    if (plan.input_type != nullptr) DeclarePiece(graph, pieces[i], *plan.input_type, plan, i);
  }
  nodes[0] = std::move(split);
  return nodes;
}

}  // namespace

absl::StatusOr<PassResult> SplitSequences::Run(ModelContext& context) {
  absl::StatusOr<std::shared_ptr<const GraphIndex>> index = context.Index();
  if (!index.ok()) return index.status();
  onnx::GraphProto& graph = *context.model.mutable_graph();
  absl::flat_hash_map<int, Plan> plans;  // by the SplitToSequence's position
  absl::flat_hash_set<const onnx::NodeProto*> reads;
  absl::flat_hash_set<std::string> sequences;
  for (int i = 0; i < graph.node_size(); ++i) {
    if (!IsOp(graph.node(i), "SplitToSequence")) continue;
    std::optional<Plan> plan = PlanFor(**index, graph.node(i));
    if (!plan) continue;
    for (const auto& read : plan->reads) reads.insert(read.second);
    sequences.insert(graph.node(i).output(0));
    plans.emplace(i, std::move(*plan));
  }
  if (plans.empty()) return false;
  const OpsetVersions opsets = OpsetsOf(context.model);
  const int opset = opsets.contains("") ? opsets.at("") : 1;
  NameAllocator names(context.model);
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int i = 0; i < graph.node_size(); ++i) {
    if (reads.contains(&graph.node(i))) continue;
    auto plan = plans.find(i);
    if (plan == plans.end()) {
      nodes.Add()->Swap(graph.mutable_node(i));
      continue;
    }
    for (onnx::NodeProto& node : Rewrite(graph.node(i), plan->second, opset, graph, names)) {
      *nodes.Add() = std::move(node);
    }
  }
  graph.mutable_node()->Swap(&nodes);
  RemoveIf(*graph.mutable_value_info(),
           [&](int i) { return sequences.contains(graph.value_info(i).name()); });
  return true;
}

}  // namespace ampc
