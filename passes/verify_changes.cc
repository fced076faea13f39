#include "passes/verify_changes.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "passes/graph/graph_index.h"
#include "passes/graph/onnx_status.h"
#include "passes/graph/status_macros.h"
#include "passes/verify_input.h"

namespace ampc {
namespace {

const onnx::NodeProto* Producer(const GraphIndex& index, const std::string& value) {
  const ValueSource* source = index.Source(value);
  return source != nullptr && source->kind == ValueSource::Kind::kNode ? source->node : nullptr;
}

void Append(std::string& key, int64_t v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// What an attribute says, cheaply: its scalars and lists, and of a tensor its type, dims and size.
void AppendAttribute(std::string& key, const onnx::AttributeProto& a) {
  absl::StrAppend(&key, a.name(), "=", a.type(), ":", a.i(), ",", a.f(), ",", a.s(), ",");
  for (int64_t v : a.ints()) Append(key, v);
  for (float v : a.floats()) absl::StrAppend(&key, v, ",");
  for (const std::string& v : a.strings()) absl::StrAppend(&key, v, ",");
  if (a.has_t()) {
    Append(key, a.t().data_type());
    for (int64_t d : a.t().dims()) Append(key, d);
    Append(key, static_cast<int64_t>(a.t().ByteSizeLong()));
  }
}

// A value's element type (or, for a non-tensor type, the whole type), and everything else
// strict inference reads about it: its shape, and its producer's op, inputs and attributes.
TypeSnapshot::Keys KeysOf(const onnx::TypeProto* type, const onnx::NodeProto* producer) {
  thread_local std::string element, structure;
  element.clear();
  structure.clear();
  if (type != nullptr && type->has_tensor_type()) {
    const onnx::TypeProto::Tensor& tensor = type->tensor_type();
    Append(element, tensor.elem_type());
    if (tensor.has_shape()) {
      Append(structure, tensor.shape().dim_size());
      for (const onnx::TensorShapeProto::Dimension& dim : tensor.shape().dim()) {
        if (dim.has_dim_value()) {
          Append(structure, dim.dim_value());
        } else {
          absl::StrAppend(&structure, "'", dim.dim_param(), "'");
        }
      }
    }
  } else if (type != nullptr) {
    absl::StrAppend(&element, "o", type->SerializeAsString());
  } else {
    element = "untyped";
  }
  if (producer != nullptr) {
    absl::StrAppend(&structure, "|", producer->domain(), ":", producer->op_type(), "(");
    for (const std::string& input : producer->input()) absl::StrAppend(&structure, input, ",");
    for (const onnx::AttributeProto& attribute : producer->attribute()) {
      AppendAttribute(structure, attribute);
    }
  }
  return {absl::HashOf(std::string_view(element)), absl::HashOf(std::string_view(structure))};
}

bool HasSubgraph(const onnx::NodeProto& node) {
  for (const onnx::AttributeProto& attribute : node.attribute()) {
    if (attribute.has_g() || attribute.graphs_size() > 0) return true;
  }
  return false;
}

// What check_graph requires beyond each node: every read produced earlier (GraphIndex::Build has
// checked one producer per value and that every read is defined somewhere).
absl::Status CheckOrder(const onnx::GraphProto& graph, const GraphIndex& index,
                        const std::string& where) {
  absl::flat_hash_set<std::string_view> defined;
  defined.reserve(graph.input_size() + graph.initializer_size() + 2 * graph.node_size());
  for (const onnx::ValueInfoProto& input : graph.input()) defined.insert(input.name());
  for (const onnx::TensorProto& tensor : graph.initializer()) defined.insert(tensor.name());
  for (const onnx::SparseTensorProto& tensor : graph.sparse_initializer()) {
    defined.insert(tensor.values().name());
  }
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    for (const std::string& input : node.input()) {
      if (!input.empty() && !defined.contains(input)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": ONNX checker: ", DescribeNode(node, i), " reads '", input,
                         "' before the node that produces it (not in topological order)"));
      }
    }
    for (const std::string& output : node.output()) {
      if (!output.empty()) defined.insert(output);
    }
  }
  for (const onnx::ValueInfoProto& output : graph.output()) {
    if (index.Source(output.name()) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ONNX checker: graph output '",
                                                     output.name(), "' is never produced"));
    }
  }
  return absl::OkStatus();
}

// check_model on everything but the graph's nodes and values (IR version, opset imports,
// metadata): a model that shares those and has an empty graph.
absl::Status CheckModelFields(const onnx::ModelProto& model, const std::string& where) {
  onnx::ModelProto shell;
  shell.set_ir_version(model.ir_version());
  *shell.mutable_opset_import() = model.opset_import();
  *shell.mutable_metadata_props() = model.metadata_props();
  shell.set_producer_name(model.producer_name());
  shell.set_domain(model.domain());
  shell.mutable_graph()->set_name(model.graph().name());
  return CatchOnnx(absl::StrCat(where, ": ONNX checker"),
                   [&] { onnx::checker::check_model(shell); });
}

int OpsetOf(const onnx::ModelProto& model, const std::string& domain) {
  for (const onnx::OperatorSetIdProto& opset : model.opset_import()) {
    const bool onnx_domain = (domain.empty() || domain == "ai.onnx") &&
                             (opset.domain().empty() || opset.domain() == "ai.onnx");
    if (opset.domain() == domain || onnx_domain) return static_cast<int>(opset.version());
  }
  return -1;
}

// An inference context over the index's declared types, without InferenceContextImpl's maps
// (built per node, they cost more than the inference). No input data: ampc checks types, and
// shapes as far as they follow without constants.
class NodeContext : public onnx::InferenceContext {
 public:
  NodeContext(const onnx::NodeProto& node, const GraphIndex& index)
      : node_(node), index_(index), outputs_(static_cast<size_t>(node.output_size())) {}
  const onnx::AttributeProto* getAttribute(const std::string& name) const override {
    for (const onnx::AttributeProto& attribute : node_.attribute()) {
      if (attribute.name() == name) return &attribute;
    }
    return nullptr;
  }
  size_t getNumInputs() const override { return static_cast<size_t>(node_.input_size()); }
  bool hasInput(size_t i) const override {
    return i < getNumInputs() && !node_.input(static_cast<int>(i)).empty();
  }
  const onnx::TypeProto* getInputType(size_t i) const override {
    const std::string& name = Input(i);
    return name.empty() ? nullptr : index_.Type(name);
  }
  // Initializers held in memory, as InferShapes gives them (not data in a file).
  const onnx::TensorProto* getInputData(size_t i) const override {
    const std::string& name = Input(i);
    const onnx::TensorProto* tensor = name.empty() ? nullptr : index_.Initializer(name);
    return tensor != nullptr && tensor->data_location() != onnx::TensorProto::EXTERNAL ? tensor
                                                                                       : nullptr;
  }
  size_t getNumOutputs() const override { return outputs_.size(); }
  onnx::TypeProto* getOutputType(size_t i) override {
    if (i >= outputs_.size()) throw std::out_of_range("output index out of range");
    return &outputs_[i];
  }
  onnx::GraphInferencer* getGraphAttributeInferencer(const std::string&) override {
    return nullptr;  // CanVerifyChanges: no subgraphs
  }
  const onnx::SparseTensorProto* getInputSparseData(size_t) const override { return nullptr; }
  const onnx::TensorShapeProto* getSymbolicInput(size_t) const override { return nullptr; }

 private:
  const std::string& Input(size_t i) const {
    if (i >= getNumInputs()) throw std::out_of_range("input index out of range");
    return node_.input(static_cast<int>(i));
  }
  const onnx::NodeProto& node_;
  const GraphIndex& index_;
  std::vector<onnx::TypeProto> outputs_;
};

// Whether each output's type follows from the schema's type constraints once the inputs bind
// them (or is the one type allowed), so that CheckInputOutputType alone gives it: then the
// inference function, which costs most of a node's check, has nothing to add about types.
bool TypesFollowFromConstraints(const onnx::OpSchema& schema) {
  for (const onnx::OpSchema::FormalParameter& output : schema.outputs()) {
    if (output.GetTypes().size() == 1) continue;
    const auto& inputs = schema.inputs();
    if (std::none_of(inputs.begin(), inputs.end(), [&](const onnx::OpSchema::FormalParameter& in) {
          return in.GetTypeStr() == output.GetTypeStr() && in.GetIsHomogeneous();
        })) {
      return false;
    }
  }
  return !schema.outputs().empty();
}

// The schemas of the model's ops at its opsets, each looked up once.
class Schemas {
 public:
  explicit Schemas(const onnx::ModelProto& model) : model_(model) {}
  struct Entry {
    const onnx::OpSchema* schema = nullptr;
    bool types_follow = false;  // TypesFollowFromConstraints
  };
  const Entry& Of(const onnx::NodeProto& node) {
    auto [it, inserted] = entries_.try_emplace(
        std::pair<std::string_view, std::string_view>(node.domain(), node.op_type()));
    if (inserted) {
      const int opset = OpsetOf(model_, node.domain());
      it->second.schema =
          opset < 0 ? nullptr
                    : onnx::OpSchemaRegistry::Schema(node.op_type(), opset, node.domain());
      it->second.types_follow =
          it->second.schema != nullptr && TypesFollowFromConstraints(*it->second.schema);
    }
    return it->second;
  }

 private:
  const onnx::ModelProto& model_;
  absl::flat_hash_map<std::pair<std::string_view, std::string_view>, Entry> entries_;
};

// What strict InferShapes does at one node: the schema's type constraints checked, each output's
// type (from the schema's inference, or from the constraints alone where only element types
// changed and they fix every output's) against the declared one. Nodes without a schema are left
// alone, as there. Throws ONNX's errors. Each declared output type against the one `context` holds
// for it; shapes merged too when `inferred` (the schema's inference ran). Throws ONNX's errors.
void CompareOutputs(const onnx::NodeProto& node, const GraphIndex& index, NodeContext& context,
                    bool inferred) {
  for (int i = 0; i < node.output_size(); ++i) {
    const onnx::TypeProto* declared = node.output(i).empty() ? nullptr : index.Type(node.output(i));
    const onnx::TypeProto* found = context.getOutputType(static_cast<size_t>(i));
    if (declared == nullptr || found->value_case() == onnx::TypeProto::VALUE_NOT_SET) continue;
    onnx::shape_inference::checkShapesAndTypes(*found, *declared);
    if (inferred) {
      onnx::TypeProto merged = *declared;
      onnx::shape_inference::mergeShapesAndTypes(*found, &merged);
    }
  }
}

// Whether an output with a declared type got none from the constraints: the input that binds it
// is an absent optional one (QuantizeLinear without y_zero_point).
bool AnyOutputOpen(const onnx::NodeProto& node, const GraphIndex& index, NodeContext& context) {
  for (int i = 0; i < node.output_size(); ++i) {
    if (!node.output(i).empty() && index.Type(node.output(i)) != nullptr &&
        context.getOutputType(static_cast<size_t>(i))->value_case() ==
            onnx::TypeProto::VALUE_NOT_SET) {
      return true;
    }
  }
  return false;
}

// What strict InferShapes does at one node: the schema's type constraints checked, each output's
// type (from the schema's inference, or from the constraints alone where only element types
// changed and they fix every output's) against the declared one. Nodes without a schema are left
// alone, as there. Throws ONNX's errors.
void InferNode(const Schemas::Entry& entry, const onnx::NodeProto& node, const GraphIndex& index,
               bool structural) {
  const onnx::OpSchema* schema = entry.schema;
  if (schema == nullptr) return;
  const bool can_infer = schema->has_type_and_shape_inference_function();
  const auto run = [&](bool infer) {
    NodeContext context(node, index);
    if (infer) schema->GetTypeAndShapeInferenceFunction()(context);
    schema->CheckInputOutputType(context);
    if (!infer && can_infer && AnyOutputOpen(node, index, context)) return false;
    CompareOutputs(node, index, context, infer);
    return true;
  };
  // Where only element types changed, the shapes and wiring inference accepted are the same.
  if (!run(/*infer=*/(structural || !entry.types_follow) && can_infer)) run(/*infer=*/true);
}

// The values of the graph that differ from the snapshot (or that it lacks), each with whether
// more than its element type changed; `untyped` set when one of them has no declared type.
struct ChangedValues {
  absl::flat_hash_map<std::string_view, bool> structural;
  bool untyped = false;
  bool contains(std::string_view value) const { return structural.contains(value); }
};

ChangedValues FindChanged(const onnx::GraphProto& graph, const GraphIndex& index,
                          const TypeSnapshot& before) {
  ChangedValues changed;
  const auto check = [&](const std::string& value, const onnx::NodeProto* producer) {
    const onnx::TypeProto* type = index.Type(value);
    const TypeSnapshot::Change change = before.Compare(value, type, producer);
    if (change == TypeSnapshot::Change::kNone) return;
    changed.structural.emplace(value, change == TypeSnapshot::Change::kStructure);
    changed.untyped |= type == nullptr;
  };
  for (const onnx::ValueInfoProto& input : graph.input()) check(input.name(), nullptr);
  for (const onnx::TensorProto& tensor : graph.initializer()) check(tensor.name(), nullptr);
  for (const onnx::NodeProto& node : graph.node()) {
    for (const std::string& output : node.output()) {
      if (!output.empty()) check(output, &node);
    }
  }
  return changed;
}

// Whether any of the node's values changed, and whether more than element types did.
struct NodeChange {
  bool any = false, structural = false;
};

NodeChange NodeChanged(const onnx::NodeProto& node, const ChangedValues& changed) {
  NodeChange result;
  const auto look = [&](const std::string& value) {
    const auto it = changed.structural.find(value);
    if (it == changed.structural.end()) return;
    result.any = true;
    result.structural |= it->second;
  };
  for (const std::string& value : node.input()) look(value);
  for (const std::string& value : node.output()) look(value);
  return result;
}

// Initializers against the types their names are declared with (as strict inference checks), and
// ONNX's tensor check on the ones ampc converted.
absl::Status CheckInitializers(const onnx::GraphProto& graph, const GraphIndex& index,
                               const ChangedValues& changed,
                               const onnx::checker::CheckerContext& checker,
                               const std::string& where) {
  for (const onnx::TensorProto& tensor : graph.initializer()) {
    // The index gives a declared type (graph input, value_info) before the initializer's own;
    // strict inference checks and merges the two, dims included.
    const onnx::TypeProto* declared = index.Type(tensor.name());
    if (declared != nullptr && declared->has_tensor_type()) {
      AMPC_RETURN_IF_ERROR(CatchOnnxIn(
          [&] {
            return absl::StrCat(where, ": type inference: initializer '", tensor.name(), "'");
          },
          [&] {
            onnx::TypeProto held;
            held.mutable_tensor_type()->set_elem_type(tensor.data_type());
            auto* shape = held.mutable_tensor_type()->mutable_shape();
            for (int64_t d : tensor.dims()) shape->add_dim()->set_dim_value(d);
            onnx::shape_inference::checkShapesAndTypes(held, *declared);
            onnx::TypeProto merged = *declared;
            onnx::shape_inference::mergeShapesAndTypes(held, &merged);
          }));
    }
    if (changed.contains(tensor.name())) {
      AMPC_RETURN_IF_ERROR(CatchOnnx(absl::StrCat(where, ": ONNX checker"),
                                     [&] { onnx::checker::check_tensor(tensor, checker); }));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckValueInfos(const onnx::GraphProto& graph, const ChangedValues& changed,
                             const onnx::checker::CheckerContext& checker,
                             const std::string& where) {
  for (const auto* infos : {&graph.input(), &graph.output(), &graph.value_info()}) {
    for (const onnx::ValueInfoProto& info : *infos) {
      if (!changed.contains(info.name())) continue;
      AMPC_RETURN_IF_ERROR(CatchOnnx(absl::StrCat(where, ": ONNX checker"),
                                     [&] { onnx::checker::check_value_info(info, checker); }));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string ModelFieldsKey(const onnx::ModelProto& model) {
  std::string key = absl::StrCat(model.ir_version(), ";");
  for (const onnx::OperatorSetIdProto& opset : model.opset_import()) {
    absl::StrAppend(&key, opset.domain(), ":", opset.version(), ";");
  }
  return key;
}

TypeSnapshot::TypeSnapshot(const onnx::ModelProto& model, const GraphIndex& index)
    : model_fields_(ModelFieldsKey(model)) {
  const onnx::GraphProto& graph = index.graph();
  keys_.reserve(graph.input_size() + graph.initializer_size() + graph.node_size());
  const auto add = [&](const std::string& value) {
    keys_.try_emplace(value, KeysOf(index.Type(value), Producer(index, value)));
  };
  for (const onnx::ValueInfoProto& input : graph.input()) add(input.name());
  for (const onnx::TensorProto& tensor : graph.initializer()) add(tensor.name());
  for (const onnx::NodeProto& node : graph.node()) {
    for (const std::string& output : node.output()) {
      if (!output.empty()) add(output);
    }
  }
}

TypeSnapshot::Change TypeSnapshot::Compare(const std::string& value, const onnx::TypeProto* type,
                                           const onnx::NodeProto* producer) const {
  const auto it = keys_.find(value);
  if (it == keys_.end()) return Change::kStructure;
  const Keys now = KeysOf(type, producer);
  if (now.structure != it->second.structure) return Change::kStructure;
  return now.element == it->second.element ? Change::kNone : Change::kElementType;
}

bool TypeSnapshot::SameModelFields(const onnx::ModelProto& model) const {
  return ModelFieldsKey(model) == model_fields_;
}

bool CanVerifyChanges(const onnx::ModelProto& model) {
  if (model.functions_size() > 0 || model.training_info_size() > 0) return false;
  for (const onnx::NodeProto& node : model.graph().node()) {
    if (HasSubgraph(node)) return false;
  }
  return true;
}

absl::StatusOr<bool> VerifyChanges(const onnx::ModelProto& model, const TypeSnapshot& before,
                                   const std::string& where) {
  if (!before.SameModelFields(model)) return false;
  AMPC_RETURN_IF_ERROR(CheckModelFields(model, where));
  const onnx::GraphProto& graph = model.graph();
  absl::StatusOr<std::unique_ptr<GraphIndex>> built = GraphIndex::Build(graph);
  if (!built.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ONNX checker: ", built.status().message()));
  }
  const GraphIndex& index = **built;
  AMPC_RETURN_IF_ERROR(CheckOrder(graph, index, where));
  const onnx::checker::CheckerContext checker = CheckerFor(model);
  const onnx::checker::LexicalScopeContext scope;
  Schemas schemas(model);
  const ChangedValues changed = FindChanged(graph, index, before);
  if (changed.untyped) return false;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    const NodeChange change = NodeChanged(node, changed);
    if (!change.any) continue;
    // An input of unknown type (an op without a schema produced it): ONNX's inference stops
    // judging the nodes after such an op, which only the full check reproduces.
    for (const std::string& input : node.input()) {
      if (!input.empty() && index.Type(input) == nullptr) return false;
    }
    const char* step = "ONNX checker";
    AMPC_RETURN_IF_ERROR(
        CatchOnnxIn([&] { return absl::StrCat(where, ": ", step, ": ", DescribeNode(node, i)); },
                    [&] {
                      onnx::checker::check_node(node, checker, scope);
                      step = "type inference";
                      InferNode(schemas.Of(node), node, index, change.structural);
                    }));
  }
  AMPC_RETURN_IF_ERROR(CheckInitializers(graph, index, changed, checker, where));
  AMPC_RETURN_IF_ERROR(CheckValueInfos(graph, changed, checker, where));
  return true;
}

}  // namespace ampc
