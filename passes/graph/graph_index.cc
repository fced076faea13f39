#include "passes/graph/graph_index.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

std::string DescribeGraph(const onnx::GraphProto& graph) {
  return absl::StrCat("graph '", graph.name(), "'");
}

onnx::TypeProto TensorType(int32_t elem_type,
                           const google::protobuf::RepeatedField<int64_t>& dims) {
  onnx::TypeProto type;
  onnx::TypeProto::Tensor* tensor = type.mutable_tensor_type();
  tensor->set_elem_type(elem_type);
  onnx::TensorShapeProto* shape = tensor->mutable_shape();
  for (int64_t dim : dims) shape->add_dim()->set_dim_value(dim);
  return type;
}

// The graphs held by `attribute`: one for GRAPH, any number for GRAPHS.
std::vector<const onnx::GraphProto*> AttributeGraphs(const onnx::AttributeProto& attribute) {
  std::vector<const onnx::GraphProto*> graphs;
  if (attribute.has_g()) graphs.push_back(&attribute.g());
  for (const onnx::GraphProto& graph : attribute.graphs()) graphs.push_back(&graph);
  return graphs;
}

}  // namespace

std::string DescribeNode(const onnx::NodeProto& node, int index) {
  if (node.name().empty()) return absl::StrCat("node #", index, " (", node.op_type(), ")");
  return absl::StrCat("node '", node.name(), "' (", node.op_type(), ")");
}

absl::StatusOr<std::unique_ptr<GraphIndex>> GraphIndex::Build(const onnx::GraphProto& graph,
                                                              const GraphIndex* outer) {
  std::unique_ptr<GraphIndex> index(new GraphIndex());
  index->graph_ = &graph;
  index->outer_ = outer;
  if (absl::Status status = index->IndexSources(); !status.ok()) return status;
  index->IndexTypes();
  if (absl::Status status = index->IndexUses(); !status.ok()) return status;
  return index;
}

absl::Status GraphIndex::Check(const onnx::GraphProto& graph) {
  GraphIndex index;
  index.graph_ = &graph;
  if (absl::Status status = index.IndexSources(); !status.ok()) return status;
  return index.IndexUses();  // no error depends on types
}

std::string GraphIndex::DescribeSource(const ValueSource& source) const {
  switch (source.kind) {
    case ValueSource::Kind::kNode:
      return DescribeNode(*source.node, NodeIndex(*source.node));
    case ValueSource::Kind::kGraphInput:
      return "graph input";
    case ValueSource::Kind::kInitializer:
      return "initializer";
    case ValueSource::Kind::kOuterScope:
      break;
  }
  return "outer scope";
}

absl::Status GraphIndex::ProducedTwice(std::string_view value, const ValueSource& first,
                                       const ValueSource& second) const {
  return absl::InvalidArgumentError(absl::StrCat(
      DescribeGraph(*graph_), ": value '", std::string(value), "' is produced twice, by ",
      DescribeSource(first), " and by ", DescribeSource(second)));
}

absl::Status GraphIndex::AddSource(std::string_view value, ValueSource source) {
  Value& entry = values_[value];
  if (!entry.defined) {
    entry.defined = true;
    entry.source = source;
    return absl::OkStatus();
  }
  return ProducedTwice(value, entry.source, source);
}

absl::Status GraphIndex::AddInitializer(std::string_view value, const onnx::TensorProto* tensor) {
  const ValueSource source{ValueSource::Kind::kInitializer};
  Value& entry = values_[value];
  if (entry.initializer == nullptr) entry.initializer = tensor;  // one lookup, not two
  if (!entry.defined) {
    entry.defined = true;
    entry.source = source;
    return absl::OkStatus();
  }
  // A graph input with an initializer is an input with a default value; a second one is not.
  if (entry.source.kind == ValueSource::Kind::kGraphInput && !entry.input_initializer) {
    entry.input_initializer = true;
    return absl::OkStatus();
  }
  return ProducedTwice(value, entry.source, source);
}

absl::Status GraphIndex::IndexSources() {
  const onnx::GraphProto& graph = *graph_;
  size_t values = graph.input_size() + graph.initializer_size() + graph.sparse_initializer_size();
  for (const onnx::NodeProto& node : graph.node()) values += node.output_size();
  values_.reserve(values);
  subgraphs_.resize(graph.node_size());
  for (const onnx::ValueInfoProto& input : graph.input()) {
    if (absl::Status s = AddSource(input.name(), {ValueSource::Kind::kGraphInput}); !s.ok()) {
      return s;
    }
  }
  for (const onnx::TensorProto& initializer : graph.initializer()) {
    AMPC_RETURN_IF_ERROR(AddInitializer(initializer.name(), &initializer));
  }
  for (const onnx::SparseTensorProto& sparse : graph.sparse_initializer()) {
    AMPC_RETURN_IF_ERROR(AddInitializer(sparse.values().name(), nullptr));
  }
  for (const onnx::NodeProto& node : graph.node()) {
    for (int slot = 0; slot < node.output_size(); ++slot) {
      if (node.output(slot).empty()) continue;  // an omitted optional output
      if (absl::Status s = AddSource(node.output(slot), {ValueSource::Kind::kNode, &node, slot});
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

void GraphIndex::IndexTypes() {
  const onnx::GraphProto& graph = *graph_;
  for (const auto* infos : {&graph.input(), &graph.output(), &graph.value_info()}) {
    for (const onnx::ValueInfoProto& info : *infos) {
      if (!info.has_type()) continue;
      const onnx::TypeProto*& type = values_[info.name()].type;
      if (type == nullptr) type = &info.type();
    }
  }
  for (const onnx::TensorProto& initializer : graph.initializer()) {
    const onnx::TypeProto*& type = values_[initializer.name()].type;
    if (type != nullptr) continue;
    type =
        &initializer_types_.emplace_back(TensorType(initializer.data_type(), initializer.dims()));
  }
  for (const onnx::SparseTensorProto& sparse : graph.sparse_initializer()) {
    const onnx::TypeProto*& type = values_[sparse.values().name()].type;
    if (type != nullptr) continue;
    type = &initializer_types_.emplace_back(TensorType(sparse.values().data_type(), sparse.dims()));
  }
}

absl::Status GraphIndex::IndexUses() {
  const onnx::GraphProto& graph = *graph_;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    for (int slot = 0; slot < node.input_size(); ++slot) {
      const std::string& value = node.input(slot);
      if (value.empty()) continue;  // an omitted optional input
      Value& entry = values_[value];
      if (!entry.defined && !AddRead(value)) {
        return absl::InvalidArgumentError(
            absl::StrCat(DescribeGraph(graph), ": ", DescribeNode(node, i), " reads value '", value,
                         "' (input ", slot, "), which nothing in scope defines"));
      }
      entry.consumers.push_back({&node, slot});
    }
    AMPC_RETURN_IF_ERROR(AddSubgraphs(i));
  }
  for (const onnx::ValueInfoProto& output : graph.output()) {
    values_[output.name()].graph_output = true;
    if (!AddRead(output.name())) {
      return absl::InvalidArgumentError(absl::StrCat(DescribeGraph(graph), ": output '",
                                                     output.name(),
                                                     "' is not defined by anything in scope"));
    }
  }
  return absl::OkStatus();
}

absl::Status GraphIndex::AddSubgraphs(int node_index) {
  const onnx::NodeProto& node = graph_->node(node_index);
  absl::flat_hash_set<std::string_view> implicit;
  for (const onnx::AttributeProto& attribute : node.attribute()) {
    for (const onnx::GraphProto* subgraph : AttributeGraphs(attribute)) {
      absl::StatusOr<std::unique_ptr<GraphIndex>> child = Build(*subgraph, this);
      if (!child.ok()) {
        return absl::Status(
            child.status().code(),
            absl::StrCat(child.status().message(), " (in attribute '", attribute.name(), "' of ",
                         DescribeNode(node, node_index), ")"));
      }
      for (const std::string& ref : (*child)->outer_refs_) {
        // Key by the child's view, which points into the proto rather than into a std::string.
        std::string_view value = *(*child)->outer_ref_set_.find(ref);
        AddRead(value);  // cannot fail: the child resolved it through this scope
        if (implicit.insert(value).second) {
          values_[value].consumers.push_back({&node, ValueUse::kImplicitSlot});
        }
      }
      subgraphs_[node_index].push_back(*std::move(child));
      has_subgraphs_ = true;
    }
  }
  return absl::OkStatus();
}

bool GraphIndex::AddRead(std::string_view value) {
  if (DefinesLocally(value)) return true;
  if (outer_ == nullptr || outer_->Source(value) == nullptr) return false;
  if (outer_ref_set_.insert(value).second) outer_refs_.emplace_back(value);
  return true;
}

const GraphIndex::Value* GraphIndex::Find(std::string_view value) const {
  auto it = values_.find(value);
  return it == values_.end() ? nullptr : &it->second;
}

bool GraphIndex::DefinesLocally(std::string_view value) const {
  const Value* entry = Find(value);
  return entry != nullptr && entry->defined;
}

const ValueSource* GraphIndex::Source(std::string_view value) const {
  static const ValueSource kOuterScope{ValueSource::Kind::kOuterScope};
  const Value* entry = Find(value);
  if (entry != nullptr && entry->defined) return &entry->source;
  if (outer_ != nullptr && outer_->Source(value) != nullptr) return &kOuterScope;
  return nullptr;
}

absl::Span<const ValueUse> GraphIndex::Consumers(std::string_view value) const {
  const Value* entry = Find(value);
  if (entry == nullptr) return {};
  return entry->consumers;
}

const onnx::TypeProto* GraphIndex::Type(std::string_view value) const {
  const Value* entry = Find(value);
  if (entry != nullptr && entry->type != nullptr) return entry->type;
  if ((entry != nullptr && entry->defined) || outer_ == nullptr) return nullptr;
  return outer_->Type(value);
}

const onnx::TensorProto* GraphIndex::Initializer(std::string_view value) const {
  const Value* entry = Find(value);
  if (entry != nullptr && entry->initializer != nullptr) return entry->initializer;
  if ((entry != nullptr && entry->defined) || outer_ == nullptr) return nullptr;
  return outer_->Initializer(value);
}

bool GraphIndex::IsGraphOutput(std::string_view value) const {
  const Value* entry = Find(value);
  return entry != nullptr && entry->graph_output;
}

std::vector<const GraphIndex*> GraphIndex::Subgraphs(const onnx::NodeProto& node) const {
  std::vector<const GraphIndex*> result;
  if (!has_subgraphs_) return result;
  int index = NodeIndex(node);
  if (index < 0) return result;
  for (const auto& subgraph : subgraphs_[index]) result.push_back(subgraph.get());
  return result;
}

int GraphIndex::NodeIndex(const onnx::NodeProto& node) const {
  if (node_index_.empty() && graph_->node_size() > 0) {
    node_index_.reserve(graph_->node_size());
    for (int i = 0; i < graph_->node_size(); ++i) node_index_[&graph_->node(i)] = i;
  }
  auto it = node_index_.find(&node);
  return it == node_index_.end() ? -1 : it->second;
}

std::string GraphIndex::Describe(const onnx::NodeProto& node) const {
  return DescribeNode(node, NodeIndex(node));
}

}  // namespace ampc
