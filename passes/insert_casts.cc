#include "passes/insert_casts.h"

#include <memory>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "passes/float_support.h"
#include "passes/graph/convert_constant.h"
#include "passes/graph/convert_deferred.h"
#include "passes/graph/deferred_data.h"
#include "passes/graph/graph_index.h"
#include "passes/graph/name_allocator.h"
#include "passes/graph/remove_if.h"
#include "passes/opset/standard_op_versions.h"
#include "passes/opset/training_ops.h"
#include "passes/training/training_state.h"

namespace ampc {
namespace {

using onnx::NodeProto;
using onnx::TensorProto;

// absl::string_view is not std::string_view in this Abseil build; StrCat takes the former.
absl::string_view AbslView(std::string_view s) { return {s.data(), s.size()}; }

// A value during the rewrite: its dtype now, the name it goes by now (a graph output's producer
// is renamed), and where a converted copy of it would be placed. Names are views of strings in
// the graph that the rewrite never changes (initializer, graph input and node output names): a
// std::string per value cost two allocations per node at 1M nodes.
struct Value {
  int dtype = 0;
  std::string_view name;
  int producer = -1;                      // position in the graph's nodes; -1: none in this graph
  const TensorProto* constant = nullptr;  // an initializer or a Constant node's tensor
  const onnx::TypeProto* type = nullptr;  // declared/inferred type in the input model
  bool constant_is_initializer = false;
};

class Scope {
 public:
  explicit Scope(const Scope* parent) : parent_(parent) {}
  const Value* Find(std::string_view key) const {
    auto it = values_.find(key);
    if (it != values_.end()) return &it->second;
    return parent_ == nullptr ? nullptr : parent_->Find(key);
  }
  bool IsLocal(std::string_view key) const { return values_.contains(key); }
  const Value* FindLocal(std::string_view key) const {
    auto it = values_.find(key);
    return it == values_.end() ? nullptr : &it->second;
  }
  Value& operator[](std::string_view key) { return values_[key]; }
  void Reserve(size_t values) { values_.reserve(values); }

 private:
  const Scope* parent_;
  absl::flat_hash_map<std::string_view, Value> values_;
};

// State shared by the rewriters of every graph of the model.
struct Shared {
  PrecisionPlan& plan;
  ModelContext& context;  // for diagnostics
  NameAllocator names;
  int cast_opset;
  // Initializers and Constant outputs converted for some reader: removed when no longer read.
  absl::flat_hash_set<std::string> converted_constants;
  // Names a training step updates or reads (TrainingReads): such initializers are read through
  // Cast nodes, so the inference graph always sees the current FP32 master weights.
  absl::flat_hash_set<std::string> master_weights;
  // Output names replaced during the pass, kept alive: the graph indexes key values by views of
  // the names in the model, and a renamed output must stay findable by its old name.
  std::vector<std::unique_ptr<std::string>> retired_names;
  bool ampc_versions = false;  // the graph has ai.ampc versions of standard ops
  absl::Status io;             // the first failure to read or write a deferred tensor's data
};

// Renames output `slot` of `node` with a new string object, moving the old one to `retired`
// unchanged (assigning in place would free or overwrite the characters the indexes point at).
void RenameOutput(NodeProto& node, int slot, const std::string& name,
                  std::vector<std::unique_ptr<std::string>>& retired) {
  google::protobuf::RepeatedPtrField<std::string>& outputs = *node.mutable_output();
  const int last = outputs.size() - 1;
  outputs.SwapElements(slot, last);
  retired.emplace_back(outputs.ReleaseLast());
  *outputs.Add() = name;
  outputs.SwapElements(slot, last);
}

// Cast-1 (opsets 1 to 5) names the target type as a string; later versions use the enum.
void SetCastTarget(NodeProto& cast, int dtype, int opset) {
  onnx::AttributeProto* to = cast.add_attribute();
  to->set_name("to");
  if (opset < 6) {
    to->set_type(onnx::AttributeProto::STRING);
    to->set_s(TensorProto::DataType_Name(static_cast<TensorProto::DataType>(dtype)));
  } else {
    to->set_type(onnx::AttributeProto::INT);
    to->set_i(dtype);
  }
}

// Casts are default-domain nodes; a model importing only other domains gets that import.
void ImportDefaultDomain(onnx::ModelProto& model) {
  for (const onnx::OperatorSetIdProto& opset : model.opset_import()) {
    if (opset.domain().empty() || opset.domain() == "ai.onnx") return;
  }
  onnx::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kCastOpsetWhenMissing);
}

class GraphRewriter {
 public:
  GraphRewriter(onnx::GraphProto& graph, const GraphIndex& index, GraphRewriter* parent,
                Shared& shared)
      : graph_(graph),
        index_(index),
        parent_(parent),
        scope_(parent == nullptr ? nullptr : &parent->scope_),
        top_(parent == nullptr),
        shared_(shared),
        plan_(shared.plan),
        context_(shared.context),
        names_(shared.names) {}

  void Run();

 private:
  int DeclaredOutputDtype(const onnx::ValueInfoProto& output) const;
  void RenameMismatchedOutputs();
  void SeedScope();
  void RewriteNode(int position);
  std::string Convert(const std::string& key, const Value& value, int dtype,
                      const std::string& output_name = "");
  std::string ConvertConstant(const std::string& key, const Value& value, int dtype);
  void PlaceConstant(const std::string& name, TensorProto value, int producer);
  const std::string& ZeroBias(int64_t channels);
  void Place(int producer, std::unique_ptr<NodeProto> node);
  void AddValueInfo(const std::string& name, const onnx::TypeProto* like, int dtype);
  void FinishGraphInterface();
  void Reorder();

  const std::string* FindConverted(std::string_view name, int dtype) const;

  onnx::GraphProto& graph_;
  const GraphIndex& index_;
  GraphRewriter* parent_;  // converts the constants its graph defines for this one
  Scope scope_;
  bool top_;
  Shared& shared_;
  PrecisionPlan& plan_;
  ModelContext& context_;
  NameAllocator& names_;
  int original_value_infos_ = 0;
  // New name -> the graph output's name (a view of the output's ValueInfoProto).
  absl::flat_hash_map<std::string, std::string_view> renamed_outputs_;
  // (value's name, dtype) -> the converted value's name; keys view names as Value::name does.
  absl::flat_hash_map<std::pair<std::string_view, int>, std::string> converted_;
  absl::flat_hash_map<int64_t, std::string> zero_biases_;       // ZeroBias's, by size
  std::vector<std::vector<std::unique_ptr<NodeProto>>> after_;  // [0]: top, [i + 1]: after node i
};

int GraphRewriter::DeclaredOutputDtype(const onnx::ValueInfoProto& output) const {
  const onnx::TypeProto* type =
      output.type().has_tensor_type() ? &output.type() : index_.Type(output.name());
  if (type == nullptr || !type->has_tensor_type()) return 0;
  const int declared = type->tensor_type().elem_type();
  // --low-io lowers computed outputs; a weight listed as an output keeps its type, as it does
  // as an input.
  const bool weight = index_.Initializer(output.name()) != nullptr;
  return top_ && plan_.low_io && declared == TensorProto::FLOAT && !weight ? plan_.low_dtype
                                                                           : declared;
}

// A graph output whose producer now computes another dtype: the producer's output gets a new
// name and a Cast back to the declared dtype takes the output's name.
void GraphRewriter::RenameMismatchedOutputs() {
  for (const onnx::ValueInfoProto& output : graph_.output()) {
    const ValueSource* source = index_.Source(output.name());
    if (source == nullptr || source->kind != ValueSource::Kind::kNode) continue;
    auto it = plan_.nodes.find(source->node);
    if (it == plan_.nodes.end()) continue;
    const int now = it->second.output_dtypes[source->slot];
    const int declared = DeclaredOutputDtype(output);
    const int position = index_.NodeIndex(*source->node);
    if (declared == 0 && now != 0) {
      // No declared type, none inferred (a subgraph of an op ONNX does not know): no dtype to
      // cast back to, so the output stays as computed; the user is told.
      context_.Warn(absl::StrCat("graph output '", output.name(), "' declares no type; it is now ",
                                 DtypeName(now)),
                    "", output.name());
      continue;
    }
    if (now == declared || now == 0 ||
        graph_.node(position).output(source->slot) != output.name()) {
      continue;  // the same value listed twice as an output is renamed once
    }
    const std::string renamed = names_.Fresh(absl::StrCat(output.name(), "_", DtypeName(now)));
    renamed_outputs_[renamed] = output.name();
    RenameOutput(*graph_.mutable_node(position), source->slot, renamed, shared_.retired_names);
    const Value value{now, graph_.node(position).output(source->slot), position, nullptr,
                      &output.type()};
    Convert(output.name(), value, declared, output.name());
    AddValueInfo(renamed, &output.type(), now);
  }
}

void GraphRewriter::SeedScope() {
  for (const TensorProto& init : graph_.initializer()) {
    const bool master = top_ && shared_.master_weights.contains(init.name());
    scope_[init.name()] = Value{init.data_type(),         init.name(), -1, master ? nullptr : &init,
                                index_.Type(init.name()), !master};
  }
  for (onnx::ValueInfoProto& input : *graph_.mutable_input()) {
    const bool tensor = input.type().has_tensor_type();
    int dtype = tensor ? input.type().tensor_type().elem_type() : 0;
    // An input with an initializer (IR < 4 defaults) is a weight: it keeps its type.
    if (top_ && plan_.low_io && dtype == TensorProto::FLOAT &&
        index_.Initializer(input.name()) == nullptr) {
      dtype = plan_.low_dtype;
      input.mutable_type()->mutable_tensor_type()->set_elem_type(dtype);
    }
    scope_[input.name()] = Value{dtype, input.name(), -1, nullptr, &input.type()};
  }
}

void GraphRewriter::Run() {
  original_value_infos_ = graph_.value_info_size();
  after_.resize(graph_.node_size() + 1);
  size_t values = graph_.initializer_size() + graph_.input_size();
  for (const NodeProto& node : graph_.node()) values += node.output_size();
  scope_.Reserve(values);
  RenameMismatchedOutputs();
  SeedScope();
  for (int i = 0; i < graph_.node_size(); ++i) RewriteNode(i);
  FinishGraphInterface();
  Reorder();
}

void GraphRewriter::RewriteNode(int position) {
  NodeProto& node = *graph_.mutable_node(position);
  auto planned = plan_.nodes.find(&node);
  NodePlan* plan = planned == plan_.nodes.end() ? nullptr : &planned->second;
  if (plan != nullptr && plan->ampc_version) {
    NormalizeAmpcVersion(node, index_.Type(node.input(0)),
                         node.input_size() > 1 ? index_.Type(node.input(1)) : nullptr);
  }
  for (int slot = 0; slot < node.input_size(); ++slot) {
    if (node.input(slot).empty()) continue;
    const Value* value = scope_.Find(node.input(slot));
    if (value == nullptr) continue;
    const int wanted = plan == nullptr ? 0 : plan->input_dtypes[slot];
    if (wanted == 0 || wanted == value->dtype || value->dtype == 0) {
      if (node.input(slot) != value->name) node.mutable_input(slot)->assign(value->name);
      continue;
    }
    // A value of an enclosing graph is converted at the top of this one.
    Value here = *value;
    if (!scope_.IsLocal(node.input(slot))) here.producer = -1;
    const int64_t before = plan_.casts_added;
    node.set_input(slot, Convert(node.input(slot), here, wanted));
    if (plan != nullptr) plan->casts_added += static_cast<int>(plan_.casts_added - before);
  }
  const std::vector<const GraphIndex*> subgraphs = index_.Subgraphs(node);
  int next = 0;
  for (onnx::AttributeProto& attribute : *node.mutable_attribute()) {
    if (attribute.has_g()) {
      GraphRewriter(*attribute.mutable_g(), *subgraphs[next++], this, shared_).Run();
    }
    for (onnx::GraphProto& sub : *attribute.mutable_graphs()) {
      GraphRewriter(sub, *subgraphs[next++], this, shared_).Run();
    }
  }
  const bool constant_node = node.op_type() == "Constant" && node.attribute_size() == 1 &&
                             node.attribute(0).name() == "value";
  for (int slot = 0; slot < node.output_size(); ++slot) {
    const std::string& name = node.output(slot);
    if (name.empty()) continue;
    std::string_view key = name;
    if (!renamed_outputs_.empty()) {  // most graphs rename none: no hash per output then
      if (auto renamed = renamed_outputs_.find(name); renamed != renamed_outputs_.end()) {
        key = renamed->second;
      }
    }
    const int dtype = plan == nullptr ? 0 : plan->output_dtypes[slot];
    scope_[key] = Value{dtype, name, position, constant_node ? &node.attribute(0).t() : nullptr,
                        index_.Type(key)};
  }
  if (plan != nullptr && plan->ampc_version) node.set_domain(kAmpcDomain);
  if (plan != nullptr && plan->zero_bias > 0) node.add_input(ZeroBias(plan->zero_bias));
  shared_.ampc_versions = shared_.ampc_versions || IsAmpcVersion(node);
}

// A conversion made in this graph, or in an enclosing one (it precedes the node owning this
// graph, so it is in scope here).
const std::string* GraphRewriter::FindConverted(std::string_view name, int dtype) const {
  auto it = converted_.find(std::pair(name, dtype));
  if (it != converted_.end()) return &it->second;
  return parent_ == nullptr ? nullptr : parent_->FindConverted(name, dtype);
}

// `value` as `dtype`: a converted constant, or one shared Cast placed right after the producer.
// `output_name` names the result (a graph output cast back to its declared dtype).
std::string GraphRewriter::Convert(const std::string& key, const Value& value, int dtype,
                                   const std::string& output_name) {
  if (const std::string* cached = FindConverted(value.name, dtype)) return *cached;
  // A constant of an enclosing graph is converted there: one copy for every graph that reads it,
  // placed where the constant is.
  if (value.constant != nullptr && output_name.empty() && parent_ != nullptr &&
      !scope_.IsLocal(value.name)) {
    return parent_->Convert(key, value, dtype, output_name);
  }
  std::string out;
  if (value.constant != nullptr && output_name.empty()) {
    out = ConvertConstant(key, value, dtype);
  } else {
    out = output_name.empty()
              ? names_.Fresh(absl::StrCat(AbslView(value.name), "_", DtypeName(dtype)))
              : output_name;
    auto cast = std::make_unique<NodeProto>();
    cast->set_op_type("Cast");
    cast->set_name(names_.Fresh(absl::StrCat(out, "_cast")));
    cast->add_input(std::string(value.name));
    cast->add_output(out);
    SetCastTarget(*cast, dtype, shared_.cast_opset);
    Place(value.producer, std::move(cast));
    if (output_name.empty()) AddValueInfo(out, value.type, dtype);
    ++plan_.casts_added;
  }
  converted_[std::pair(value.name, dtype)] = out;
  return out;
}

std::string GraphRewriter::ConvertConstant(const std::string& key, const Value& value, int dtype) {
  ConversionStats stats;
  TensorProto converted;
  if (IsDeferred(*value.constant)) {
    absl::StatusOr<TensorProto> streamed =
        ConvertDeferred(*value.constant, dtype, plan_.clamp, stats);
    if (streamed.ok()) converted = *std::move(streamed);
    if (!streamed.ok() && shared_.io.ok()) shared_.io = streamed.status();
  } else {
    converted = ampc::ConvertConstant(*value.constant, dtype, plan_.clamp, stats);
  }
  plan_.values_clamped += stats.clamped;
  plan_.values_flushed_to_zero += stats.flushed_to_zero;
  if (stats.overflowed > 0) {
    context_.Warn(absl::StrCat("constant '", AbslView(value.name), "': ", stats.overflowed,
                               " values overflow ", DtypeName(dtype), " to inf"),
                  "", std::string(AbslView(value.name)));
  }
  ++plan_.constants_converted;
  const std::string name = names_.Fresh(absl::StrCat(AbslView(value.name), "_", DtypeName(dtype)));
  if (value.constant_is_initializer) {
    converted.set_name(name);
    *graph_.add_initializer() = std::move(converted);
    shared_.converted_constants.emplace(value.name);
    return name;
  }
  shared_.converted_constants.emplace(value.name);
  PlaceConstant(name, std::move(converted), value.producer);
  AddValueInfo(name, value.type, dtype);
  return name;
}

void GraphRewriter::PlaceConstant(const std::string& name, TensorProto value, int producer) {
  auto constant = std::make_unique<NodeProto>();
  constant->set_op_type("Constant");
  constant->set_name(names_.Fresh(absl::StrCat(name, "_constant")));
  constant->add_output(name);
  onnx::AttributeProto* attribute = constant->add_attribute();
  attribute->set_name("value");
  attribute->set_type(onnx::AttributeProto::TENSOR);
  *attribute->mutable_t() = std::move(value);
  Place(producer, std::move(constant));
}

// BF16 zeros of `channels` elements, one Constant per size at the top of this graph.
const std::string& GraphRewriter::ZeroBias(int64_t channels) {
  auto [it, added] = zero_biases_.try_emplace(channels);
  if (!added) return it->second;
  it->second = names_.Fresh(absl::StrCat("zero_bias_", channels));
  TensorProto zeros;
  zeros.set_data_type(TensorProto::BFLOAT16);
  zeros.add_dims(channels);
  zeros.set_raw_data(std::string(static_cast<size_t>(2 * channels), '\0'));
  PlaceConstant(it->second, std::move(zeros), -1);
  onnx::TypeProto type;
  type.mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(channels);
  AddValueInfo(it->second, &type, TensorProto::BFLOAT16);
  return it->second;
}

void GraphRewriter::Place(int producer, std::unique_ptr<NodeProto> node) {
  after_[producer + 1].push_back(std::move(node));
}

void GraphRewriter::AddValueInfo(const std::string& name, const onnx::TypeProto* like, int dtype) {
  onnx::ValueInfoProto* info = graph_.add_value_info();
  info->set_name(name);
  if (like != nullptr) *info->mutable_type() = *like;
  info->mutable_type()->mutable_tensor_type()->set_elem_type(dtype);
}

// The declared types of graph outputs (--low-io) and of values whose dtype changed.
void GraphRewriter::FinishGraphInterface() {
  for (onnx::ValueInfoProto& output : *graph_.mutable_output()) {
    if (!output.type().has_tensor_type()) continue;  // sequences, optionals, maps: untouched
    output.mutable_type()->mutable_tensor_type()->set_elem_type(DeclaredOutputDtype(output));
  }
  for (int i = 0; i < original_value_infos_; ++i) {
    onnx::ValueInfoProto& info = *graph_.mutable_value_info(i);
    const Value* value = scope_.FindLocal(info.name());
    if (value == nullptr) continue;
    if (value->name == info.name() && value->dtype != 0 && info.type().has_tensor_type()) {
      info.mutable_type()->mutable_tensor_type()->set_elem_type(value->dtype);
    }
  }
}

// Casts go right after their producer (graph inputs' and outer values' at the top): the node
// order stays topological without a sort, and NodeProto objects keep their addresses.
void GraphRewriter::Reorder() {
  const int count = graph_.node_size();
  std::vector<NodeProto*> nodes(count);
  graph_.mutable_node()->ExtractSubrange(0, count, nodes.data());
  for (auto& cast : after_[0]) graph_.mutable_node()->AddAllocated(cast.release());
  for (int i = 0; i < count; ++i) {
    graph_.mutable_node()->AddAllocated(nodes[i]);
    for (auto& cast : after_[i + 1]) graph_.mutable_node()->AddAllocated(cast.release());
  }
}

// The names in `candidates` that some node or graph output still reads. Only candidates are
// kept: a set of every read name costs a string copy per value.
void CollectReads(const onnx::GraphProto& graph, const absl::flat_hash_set<std::string>& candidates,
                  absl::flat_hash_set<std::string>& reads) {
  auto read = [&](const std::string& name) {
    if (candidates.contains(name)) reads.insert(name);
  };
  for (const onnx::ValueInfoProto& output : graph.output()) read(output.name());
  for (const NodeProto& node : graph.node()) {
    for (const std::string& input : node.input()) read(input);
    for (const onnx::AttributeProto& attribute : node.attribute()) {
      if (attribute.has_g()) CollectReads(attribute.g(), candidates, reads);
      for (const onnx::GraphProto& sub : attribute.graphs()) CollectReads(sub, candidates, reads);
    }
  }
}

// Drops the FP32 initializers and Constant nodes that every reader now takes as a converted copy
// (with the Constants' value_info).
void RemoveConvertedConstants(onnx::GraphProto& graph,
                              const absl::flat_hash_set<std::string>& converted,
                              const absl::flat_hash_set<std::string>& reads) {
  auto unread = [&](const std::string& name) {
    return converted.contains(name) && !reads.contains(name);
  };
  auto* initializers = graph.mutable_initializer();
  RemoveIf(*initializers, [&](int i) { return unread(initializers->Get(i).name()); });
  auto* nodes = graph.mutable_node();
  RemoveIf(*nodes, [&](int i) {
    const NodeProto& node = nodes->Get(i);
    return node.op_type() == "Constant" && node.domain().empty() && node.output_size() == 1 &&
           unread(node.output(0));
  });
  auto* infos = graph.mutable_value_info();
  RemoveIf(*infos, [&](int i) { return unread(infos->Get(i).name()); });
  for (NodeProto& node : *graph.mutable_node()) {
    for (onnx::AttributeProto& attribute : *node.mutable_attribute()) {
      if (attribute.has_g()) RemoveConvertedConstants(*attribute.mutable_g(), converted, reads);
      for (onnx::GraphProto& sub : *attribute.mutable_graphs()) {
        RemoveConvertedConstants(sub, converted, reads);
      }
    }
  }
}

}  // namespace

absl::StatusOr<PassResult> InsertCasts::Run(ModelContext& context) {
  if (context.plan == nullptr) {
    return absl::FailedPreconditionError(
        "insert-casts applies the plan of autocast; run --passes=autocast,insert-casts");
  }
  // Autocast's index when it ran just before (the common case): one build fewer at 1M nodes.
  absl::StatusOr<std::shared_ptr<const GraphIndex>> index = context.Index();
  if (!index.ok()) return index.status();
  Shared shared{*context.plan,
                context,
                NameAllocator(context.model),
                CastOpset(OpsetsOf(context.model)),
                {},
                {},
                {},
                false,
                absl::OkStatus()};
  shared.master_weights = MasterWeights(context.model, training_);
  GraphRewriter(*context.model.mutable_graph(), **index, nullptr, shared).Run();
  if (!shared.io.ok()) return shared.io;
  absl::flat_hash_set<std::string> reads;
  if (!shared.converted_constants.empty()) {
    CollectReads(context.model.graph(), shared.converted_constants, reads);
  }
  RemoveConvertedConstants(*context.model.mutable_graph(), shared.converted_constants, reads);
  if (context.plan->casts_added > 0) ImportDefaultDomain(context.model);
  if (shared.ampc_versions) {
    if (absl::Status s = AddAmpcVersionFunctions(context.model); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(context.file, ": ", s.message()));
    }
  }
  return context.plan->casts_added > 0 || context.plan->constants_converted > 0 ||
         context.plan->low_io;
}

}  // namespace ampc
