#include "passes/verify_changes.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <memory>
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

// The type's fields (a tensor's element type and dims; anything else serialized) and the
// producer's op, hashed.
uint64_t Key(const onnx::TypeProto* type, const onnx::NodeProto* producer) {
  thread_local std::string key;
  key.clear();
  const auto append = [](int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
  if (type != nullptr && type->has_tensor_type()) {
    const onnx::TypeProto::Tensor& tensor = type->tensor_type();
    key.push_back('t');
    append(tensor.elem_type());
    if (tensor.has_shape()) {
      append(tensor.shape().dim_size());
      for (const onnx::TensorShapeProto::Dimension& dim : tensor.shape().dim()) {
        if (dim.has_dim_value()) {
          append(dim.dim_value());
        } else {
          absl::StrAppend(&key, "'", dim.dim_param(), "'");
        }
      }
    }
  } else if (type != nullptr) {
    absl::StrAppend(&key, "o", type->SerializeAsString());
  }
  if (producer != nullptr) absl::StrAppend(&key, "|", producer->domain(), ":", producer->op_type());
  return absl::HashOf(std::string_view(key));
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
  const onnx::TypeProto* getInputType(size_t i) const override {
    const std::string& name = node_.input(static_cast<int>(i));
    return name.empty() ? nullptr : index_.Type(name);
  }
  const onnx::TensorProto* getInputData(size_t) const override { return nullptr; }
  size_t getNumOutputs() const override { return outputs_.size(); }
  onnx::TypeProto* getOutputType(size_t i) override { return &outputs_[i]; }
  onnx::GraphInferencer* getGraphAttributeInferencer(const std::string&) override {
    return nullptr;  // CanVerifyChanges: no subgraphs
  }
  const onnx::SparseTensorProto* getInputSparseData(size_t) const override { return nullptr; }
  const onnx::TensorShapeProto* getSymbolicInput(size_t) const override { return nullptr; }

 private:
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
// type (from the constraints, or from the schema's inference where they do not fix it) against
// the declared one. Nodes without a schema are left alone, as there. Throws ONNX's errors.
// Each declared output type against the one `context` holds for it; shapes merged too when
// `inferred` (the schema's inference ran). Throws ONNX's errors.
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
// type (from the constraints, or from the schema's inference where they do not fix it) against
// the declared one. Nodes without a schema are left alone, as there. Throws ONNX's errors.
void InferNode(const Schemas::Entry& entry, const onnx::NodeProto& node, const GraphIndex& index) {
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
  if (!run(/*infer=*/!entry.types_follow && can_infer)) run(/*infer=*/true);
}

// The values of the graph whose type or producer differs from the snapshot, or that it lacks.
using ChangedValues = absl::flat_hash_set<std::string_view>;

ChangedValues FindChanged(const onnx::GraphProto& graph, const GraphIndex& index,
                          const TypeSnapshot& before) {
  ChangedValues changed;
  const auto check = [&](const std::string& value, const onnx::NodeProto* producer) {
    if (!before.Unchanged(value, index.Type(value), producer)) changed.insert(value);
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

bool NodeChanged(const onnx::NodeProto& node, const ChangedValues& changed) {
  const auto in = [&](const std::string& value) { return changed.contains(value); };
  return std::any_of(node.input().begin(), node.input().end(), in) ||
         std::any_of(node.output().begin(), node.output().end(), in);
}

// Initializers against the types their names are declared with (as strict inference checks), and
// ONNX's tensor check on the ones ampc converted.
absl::Status CheckInitializers(const onnx::GraphProto& graph, const GraphIndex& index,
                               const ChangedValues& changed,
                               const onnx::checker::CheckerContext& checker,
                               const std::string& where) {
  for (const onnx::TensorProto& tensor : graph.initializer()) {
    // The index gives a declared type (graph input, value_info) before the initializer's own.
    const onnx::TypeProto* declared = index.Type(tensor.name());
    if (declared != nullptr && declared->has_tensor_type() &&
        declared->tensor_type().elem_type() != tensor.data_type()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": type inference: initializer '", tensor.name(), "' holds ",
                       onnx::TensorProto::DataType_Name(tensor.data_type()), " but is declared as ",
                       onnx::TensorProto::DataType_Name(declared->tensor_type().elem_type())));
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

TypeSnapshot::TypeSnapshot(const GraphIndex& index) {
  const onnx::GraphProto& graph = index.graph();
  keys_.reserve(graph.input_size() + graph.initializer_size() + graph.node_size());
  const auto add = [&](const std::string& value) {
    keys_.try_emplace(value, Key(index.Type(value), Producer(index, value)));
  };
  for (const onnx::ValueInfoProto& input : graph.input()) add(input.name());
  for (const onnx::TensorProto& tensor : graph.initializer()) add(tensor.name());
  for (const onnx::NodeProto& node : graph.node()) {
    for (const std::string& output : node.output()) {
      if (!output.empty()) add(output);
    }
  }
}

bool TypeSnapshot::Unchanged(const std::string& value, const onnx::TypeProto* type,
                             const onnx::NodeProto* producer) const {
  const auto it = keys_.find(value);
  return it != keys_.end() && it->second == Key(type, producer);
}

bool CanVerifyChanges(const onnx::ModelProto& model) {
  if (model.functions_size() > 0 || model.training_info_size() > 0) return false;
  for (const onnx::NodeProto& node : model.graph().node()) {
    if (HasSubgraph(node)) return false;
  }
  return true;
}

absl::Status VerifyChanges(const onnx::ModelProto& model, const TypeSnapshot& before,
                           const std::string& where) {
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
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    if (!NodeChanged(node, changed)) continue;
    const char* step = "ONNX checker";
    AMPC_RETURN_IF_ERROR(
        CatchOnnxIn([&] { return absl::StrCat(where, ": ", step, ": ", DescribeNode(node, i)); },
                    [&] {
                      onnx::checker::check_node(node, checker, scope);
                      step = "type inference";
                      InferNode(schemas.Of(node), node, index);
                    }));
  }
  AMPC_RETURN_IF_ERROR(CheckInitializers(graph, index, changed, checker, where));
  return CheckValueInfos(graph, changed, checker, where);
}

}  // namespace ampc
