#include "passes/fold_casts.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "passes/float_support.h"
#include "passes/graph/convert_constant.h"
#include "passes/graph/convert_deferred.h"
#include "passes/graph/deferred_data.h"
#include "passes/graph/graph_index.h"
#include "passes/graph/name_allocator.h"
#include "passes/graph/remove_if.h"
#include "passes/graph/tensor_data.h"
#include "passes/precision_plan.h"
#include "passes/training/training_state.h"

namespace ampc {
namespace {

using onnx::NodeProto;
using onnx::TensorProto;
using Kind = ValueSource::Kind;

bool IsDefaultDomain(const NodeProto& node) {
  return node.domain().empty() || node.domain() == "ai.onnx";
}

// The `to` of a well-formed Cast; 0 for any other node.
int CastTo(const NodeProto& node) {
  if (node.op_type() != "Cast" || !IsDefaultDomain(node) || node.input_size() != 1 ||
      node.output_size() != 1 || node.input(0).empty() || node.output(0).empty()) {
    return 0;
  }
  for (const onnx::AttributeProto& attribute : node.attribute()) {
    if (attribute.name() == "to" && attribute.type() == onnx::AttributeProto::INT) {
      return static_cast<int>(attribute.i());
    }
  }
  return 0;
}

bool IsConstantNode(const NodeProto& node) {
  return node.op_type() == "Constant" && IsDefaultDomain(node);
}

const TensorProto* ConstantNodeValue(const NodeProto& node) {
  if (!IsConstantNode(node) || node.attribute_size() != 1) return nullptr;
  const onnx::AttributeProto& attribute = node.attribute(0);
  return attribute.name() == "value" && attribute.has_t() ? &attribute.t() : nullptr;
}

bool IsLow(int dtype) { return dtype == TensorProto::FLOAT16 || dtype == TensorProto::BFLOAT16; }

bool IsConvertible(int dtype) { return IsLow(dtype) || dtype == TensorProto::FLOAT; }

// Widenings every value survives, so casting back restores it bit for bit.
bool IsExactWidening(int from, int to) {
  if (IsLow(from)) return to == TensorProto::FLOAT || to == TensorProto::DOUBLE;
  return from == TensorProto::FLOAT && to == TensorProto::DOUBLE;
}

// Ops whose output 0 holds values of input 0, moved or selected: exact in any float dtype.
bool IsExactOp(const NodeProto& node) {
  static const auto* ops = new absl::flat_hash_set<std::string>{
      "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze",
      "Slice",   "Gather",  "Identity",  "Relu",    "MaxPool"};
  return IsDefaultDomain(node) && ops->contains(node.op_type()) && node.input_size() > 0 &&
         node.output_size() > 0 && !node.input(0).empty() && !node.output(0).empty();
}

// Whether the tensor's values are in the proto (not external) and fill its dims, or are deferred
// in an input's data file (passes/graph/deferred_data.h).
bool HasData(const TensorProto& tensor) {
  if (IsDeferred(tensor)) return SpanOf(tensor).file != kSinkFile;
  const std::optional<uint64_t> bytes = DataBytes(tensor);
  if (!bytes || tensor.data_location() == TensorProto::EXTERNAL) return false;
  return HeldBytes(tensor) == *bytes;
}

// `tensor` as `to` as a Cast at run time would give it (rounding and overflow alike); nullopt
// when deferred data cannot be read (the save reports it if the tensor is still used).
std::optional<TensorProto> ConvertLikeCast(const TensorProto& tensor, int to) {
  ConversionStats stats;
  if (!IsDeferred(tensor)) return ConvertConstant(tensor, to, /*clamp=*/false, stats);
  absl::StatusOr<TensorProto> converted = ConvertDeferred(tensor, to, /*clamp=*/false, stats);
  if (!converted.ok()) return std::nullopt;
  return *std::move(converted);
}

// The elem type the model states for `value`: a Cast's `to`, else its declared type; 0 if unknown.
int KnownDtype(const GraphIndex& index, const std::string& value) {
  const ValueSource* source = index.Source(value);
  if (source != nullptr && source->kind == Kind::kNode) {
    if (const int to = CastTo(*source->node); to != 0) return to;
  }
  const onnx::TypeProto* type = index.Type(value);
  return type != nullptr && type->has_tensor_type() ? type->tensor_type().elem_type() : 0;
}

// State shared by every graph and phase of one run.
struct Shared {
  Shared(const onnx::ModelProto& model, bool training_step_follows)
      : model(model),
        opsets(OpsetsOf(model)),
        initializers_allowed(model.ir_version() >= 4),
        master_weights(MasterWeights(model, training_step_follows)) {}

  // Seeding the allocator costs a walk of the whole model; most runs fold no constant.
  std::string FreshName(std::string_view hint) {
    if (!names) names.emplace(model);
    return names->Fresh(hint);
  }

  const onnx::ModelProto& model;
  std::optional<NameAllocator> names;
  OpsetVersions opsets;
  bool initializers_allowed;  // IR >= 4: an initializer need not be an input
  bool may_move = false;      // an exact op reads a Cast to FP32
  // The nodes the user or the policy pinned to FP32 (--block-node, --block-op, an FP32
  // category): cast motion never lowers them, even where that would be exact.
  absl::flat_hash_set<const NodeProto*> pinned_fp32;
  absl::flat_hash_set<std::string> created;  // initializers this run made
  // Names a training step updates or reads: the inference graph reads them through Casts.
  absl::flat_hash_set<std::string> master_weights;
  absl::flat_hash_set<std::string> unread;  // values cast motion took readers from
  // For the plan (report, explain): planned nodes this run removed, values it retyped.
  const PrecisionPlan* plan = nullptr;
  absl::flat_hash_set<const NodeProto*> removed;
  absl::flat_hash_map<const NodeProto*, int> retyped;  // output 0's new elem type
};

// One graph's rewrite, decided while the index points into the graph and applied after.
struct GraphEdits {
  onnx::GraphProto* graph = nullptr;
  std::vector<bool> deleted;                             // by node position
  absl::flat_hash_map<std::string, std::string> alias;   // readers of the key read the value
  std::vector<std::pair<int, std::string>> data_inputs;  // cast motion: node's new input 0
  std::vector<std::pair<std::string, int>> retyped;      // value, its new elem type
  std::deque<TensorProto> initializers;                  // to add
  absl::flat_hash_set<std::string> dropped_initializers;
};

void RewireInputs(GraphEdits& edits) {
  onnx::GraphProto& graph = *edits.graph;
  for (int i = 0; i < graph.node_size(); ++i) {
    if (edits.deleted[i]) continue;
    for (std::string& input : *graph.mutable_node(i)->mutable_input()) {
      if (auto it = edits.alias.find(input); it != edits.alias.end()) input = it->second;
    }
  }
  for (const auto& [position, input] : edits.data_inputs) {
    graph.mutable_node(position)->set_input(0, input);
  }
}

void Retype(GraphEdits& edits) {
  absl::flat_hash_map<std::string, int> dtypes(edits.retyped.begin(), edits.retyped.end());
  for (onnx::ValueInfoProto& info : *edits.graph->mutable_value_info()) {
    auto it = dtypes.find(info.name());
    if (it == dtypes.end()) continue;
    info.mutable_type()->mutable_tensor_type()->set_elem_type(it->second);
    dtypes.erase(it);
  }
  for (const auto& [name, dtype] : edits.retyped) {
    if (!dtypes.contains(name)) continue;  // had a value_info
    onnx::ValueInfoProto* info = edits.graph->add_value_info();
    info->set_name(name);
    info->mutable_type()->mutable_tensor_type()->set_elem_type(dtype);
  }
}

void RemoveNodes(GraphEdits& edits) {
  onnx::GraphProto& graph = *edits.graph;
  absl::flat_hash_set<std::string> gone;
  for (int i = 0; i < graph.node_size(); ++i) {
    if (!edits.deleted[i]) continue;
    for (const std::string& output : graph.node(i).output()) gone.insert(output);
  }
  RemoveIf(*graph.mutable_node(), [&](int i) { return edits.deleted[i]; });
  auto* infos = graph.mutable_value_info();
  RemoveIf(*infos, [&](int i) { return gone.contains(infos->Get(i).name()); });
}

void UpdateInitializers(GraphEdits& edits) {
  auto* initializers = edits.graph->mutable_initializer();
  RemoveIf(*initializers,
           [&](int i) { return edits.dropped_initializers.contains(initializers->Get(i).name()); });
  for (TensorProto& tensor : edits.initializers) *initializers->Add() = std::move(tensor);
}

bool HasChanges(const GraphEdits& edits) {
  bool deleted = false;
  for (bool d : edits.deleted) deleted = deleted || d;
  return deleted || !edits.data_inputs.empty() || !edits.retyped.empty() ||
         !edits.initializers.empty() || !edits.dropped_initializers.empty();
}

void Apply(GraphEdits& edits) {
  if (!HasChanges(edits)) return;
  RewireInputs(edits);
  Retype(edits);
  RemoveNodes(edits);
  UpdateInitializers(edits);
}

// Decides, in node order, which Casts of one graph fold away (identity, exact round trip,
// duplicate, constant); then, last to first, which Casts and Constants lost their last reader.
class CastFolder {
 public:
  CastFolder(onnx::GraphProto& graph, const GraphIndex& index, Shared& shared)
      : graph_(graph), index_(index), shared_(shared) {
    edits_.graph = &graph;
  }
  GraphEdits Run();

 private:
  std::string Resolve(const std::string& value) const;
  int Dtype(const std::string& value) const;
  int& Readers(const std::string& value);
  void LoseReader(const std::string& value);
  bool Removable(const std::string& value) const;
  void VisitCast(int position);
  bool ReadsUpcast(const NodeProto& node) const;
  std::optional<std::string> FoldTarget(const std::string& in, int to);
  std::optional<std::string> RoundTripSource(const std::string& in, int to) const;
  std::optional<std::string> FoldConstant(const std::string& in, int to);
  const TensorProto* Constant(const std::string& value) const;
  void SweepUnread();
  void DropUnreadInitializers();

  const onnx::GraphProto& graph_;
  const GraphIndex& index_;
  Shared& shared_;
  GraphEdits edits_;
  absl::flat_hash_map<std::string, int> readers_;  // as the graph will read after the edits
  absl::flat_hash_set<std::string> lost_;          // values that lost a reader here
  absl::flat_hash_map<std::pair<std::string, int>, std::string> first_cast_;  // (input, to)
  absl::flat_hash_map<std::string, const TensorProto*> created_;  // initializers made here
};

GraphEdits CastFolder::Run() {
  edits_.deleted.assign(graph_.node_size(), false);
  for (int i = 0; i < graph_.node_size(); ++i) {
    const NodeProto& node = graph_.node(i);
    if (CastTo(node) != 0) VisitCast(i);
    if (IsExactOp(node) && ReadsUpcast(node)) shared_.may_move = true;
  }
  SweepUnread();
  DropUnreadInitializers();
  return std::move(edits_);
}

std::string CastFolder::Resolve(const std::string& value) const {
  auto it = edits_.alias.find(value);
  return it == edits_.alias.end() ? value : it->second;
}

int CastFolder::Dtype(const std::string& value) const {
  if (auto it = created_.find(value); it != created_.end()) return it->second->data_type();
  return KnownDtype(index_, value);
}

int& CastFolder::Readers(const std::string& value) {
  auto [it, inserted] = readers_.try_emplace(value, 0);
  if (inserted) {
    it->second = static_cast<int>(index_.Consumers(value).size()) + index_.IsGraphOutput(value);
  }
  return it->second;
}

void CastFolder::LoseReader(const std::string& value) {
  --Readers(value);
  lost_.insert(value);
}

// A graph output keeps its name; a value a subgraph reads keeps its producer.
bool CastFolder::Removable(const std::string& value) const {
  if (index_.IsGraphOutput(value)) return false;
  for (const ValueUse& use : index_.Consumers(value)) {
    if (use.slot == ValueUse::kImplicitSlot) return false;
  }
  return true;
}

void CastFolder::VisitCast(int position) {
  const NodeProto& cast = graph_.node(position);
  const std::string in = Resolve(cast.input(0));
  const std::string& out = cast.output(0);
  const int to = CastTo(cast);
  std::optional<std::string> target;
  if (Removable(out)) target = FoldTarget(in, to);
  first_cast_.try_emplace(std::pair(in, to), target.value_or(out));
  if (!target) return;
  edits_.deleted[position] = true;
  edits_.alias[out] = *target;
  const int readers = Readers(out);
  Readers(*target) += readers;
  LoseReader(in);
}

bool CastFolder::ReadsUpcast(const NodeProto& node) const {
  const ValueSource* source = index_.Source(Resolve(node.input(0)));
  return source != nullptr && source->kind == Kind::kNode &&
         CastTo(*source->node) == TensorProto::FLOAT;
}

// What readers of Cast(in, to) can read instead, if anything.
std::optional<std::string> CastFolder::FoldTarget(const std::string& in, int to) {
  if (Dtype(in) == to) return in;
  if (std::optional<std::string> source = RoundTripSource(in, to)) return source;
  if (auto it = first_cast_.find(std::pair(in, to)); it != first_cast_.end()) return it->second;
  return FoldConstant(in, to);
}

// X when `in` is Cast(X, wide), X has dtype `to` and widening it to `wide` is exact.
std::optional<std::string> CastFolder::RoundTripSource(const std::string& in, int to) const {
  const ValueSource* source = index_.Source(in);
  if (source == nullptr || source->kind != Kind::kNode) return std::nullopt;
  const int wide = CastTo(*source->node);
  if (wide == 0 || !IsExactWidening(to, wide)) return std::nullopt;
  std::string x = Resolve(source->node->input(0));
  if (Dtype(x) != to) return std::nullopt;
  return x;
}

std::optional<std::string> CastFolder::FoldConstant(const std::string& in, int to) {
  const TensorProto* tensor = Constant(in);
  if (tensor == nullptr || !shared_.initializers_allowed || shared_.master_weights.contains(in) ||
      !IsConvertible(to) || !IsConvertible(tensor->data_type()) || !HasData(*tensor)) {
    return std::nullopt;
  }
  if (tensor->data_type() == to) return in;
  std::optional<TensorProto> converted = ConvertLikeCast(*tensor, to);
  if (!converted) return std::nullopt;
  converted->set_name(shared_.FreshName(absl::StrCat(in, "_", DtypeName(to))));
  shared_.created.insert(converted->name());
  const TensorProto& added = edits_.initializers.emplace_back(*std::move(converted));
  created_[added.name()] = &added;
  return added.name();
}

// The tensor `value` always holds: an initializer that is not a graph input, or a Constant's
// value, in this graph or an enclosing one.
const TensorProto* CastFolder::Constant(const std::string& value) const {
  if (auto it = created_.find(value); it != created_.end()) return it->second;
  for (const GraphIndex* scope = &index_; scope != nullptr; scope = scope->outer()) {
    const ValueSource* source = scope->Source(value);
    if (source == nullptr) return nullptr;
    switch (source->kind) {
      case Kind::kOuterScope:
        continue;
      case Kind::kInitializer:
        return scope->Initializer(value);
      case Kind::kNode:
        return ConstantNodeValue(*source->node);
      case Kind::kGraphInput:
        return nullptr;
    }
  }
  return nullptr;
}

// Last to first, so a chain whose end lost its readers goes whole. Nodes that had no readers
// before this pass are not its business.
void CastFolder::SweepUnread() {
  for (int i = graph_.node_size() - 1; i >= 0; --i) {
    const NodeProto& node = graph_.node(i);
    if (edits_.deleted[i] || (CastTo(node) == 0 && !IsConstantNode(node))) continue;
    bool unread = true;
    bool lost = false;
    for (const std::string& output : node.output()) {
      if (output.empty()) continue;
      unread = unread && Readers(output) == 0;
      lost = lost || lost_.contains(output) || shared_.unread.contains(output);
    }
    if (!unread || !lost) continue;
    edits_.deleted[i] = true;
    for (const std::string& input : node.input()) {
      if (!input.empty()) LoseReader(Resolve(input));
    }
  }
}

void CastFolder::DropUnreadInitializers() {
  for (const TensorProto& initializer : graph_.initializer()) {
    const std::string& name = initializer.name();
    // Initializers that had readers and lost them all to this run (a folded cast) go too.
    const bool orphaned = lost_.contains(name) && Removable(name);
    if ((shared_.created.contains(name) || orphaned) && Readers(name) == 0) {
      edits_.dropped_initializers.insert(name);
    }
  }
  std::deque<TensorProto> read;
  for (TensorProto& tensor : edits_.initializers) {
    if (Readers(tensor.name()) > 0) read.push_back(std::move(tensor));
  }
  edits_.initializers = std::move(read);
}

// Cast motion (see the header). `low_readers_[i]` is the low dtype every reader of exact op i's
// output casts it to, or is an exact op that can run in it; 0 if there is none such.
class CastMotion {
 public:
  CastMotion(onnx::GraphProto& graph, const GraphIndex& index, Shared& shared)
      : graph_(graph), index_(index), shared_(shared) {
    edits_.graph = &graph;
  }
  GraphEdits Run();

 private:
  int CommonLowReader(int position) const;
  bool Admits(const NodeProto& node, int dtype) const;

  const onnx::GraphProto& graph_;
  const GraphIndex& index_;
  Shared& shared_;
  GraphEdits edits_;
  std::vector<int> low_readers_;
};

GraphEdits CastMotion::Run() {
  const int count = graph_.node_size();
  edits_.deleted.assign(count, false);
  low_readers_.assign(count, 0);
  for (int i = count - 1; i >= 0; --i) {
    if (IsExactOp(graph_.node(i))) low_readers_[i] = CommonLowReader(i);
  }
  std::vector<bool> lowered(count, false);
  for (int i = 0; i < count; ++i) {
    if (low_readers_[i] == 0) continue;
    const NodeProto& node = graph_.node(i);
    const ValueSource* source = index_.Source(node.input(0));
    if (source == nullptr || source->kind != Kind::kNode) continue;
    const NodeProto& producer = *source->node;
    if (CastTo(producer) == TensorProto::FLOAT &&
        KnownDtype(index_, producer.input(0)) == low_readers_[i]) {
      edits_.data_inputs.emplace_back(i, producer.input(0));
      shared_.unread.insert(node.input(0));
    } else if (!lowered[index_.NodeIndex(producer)]) {
      continue;
    }
    lowered[i] = true;
    edits_.retyped.emplace_back(node.output(0), low_readers_[i]);
    shared_.retyped[&node] = low_readers_[i];
  }
  return std::move(edits_);
}

int CastMotion::CommonLowReader(int position) const {
  const NodeProto& node = graph_.node(position);
  if (index_.IsGraphOutput(node.output(0))) return 0;
  int common = 0;
  for (const ValueUse& use : index_.Consumers(node.output(0))) {
    int dtype = CastTo(*use.node);
    if (!IsLow(dtype)) {
      const bool exact_data = use.slot == 0 && IsExactOp(*use.node);
      dtype = exact_data ? low_readers_[index_.NodeIndex(*use.node)] : 0;
    }
    if (dtype == 0 || (common != 0 && dtype != common)) return 0;
    common = dtype;
  }
  return common != 0 && Admits(node, common) ? common : 0;
}

// Whether the node's schema lets input 0 and output 0, and nothing else, become `dtype`.
bool CastMotion::Admits(const NodeProto& node, int dtype) const {
  if (shared_.pinned_fp32.contains(&node)) return false;
  const FloatSupport support(node, shared_.opsets, {TensorProto::FLOAT});
  if (!support.MainAdmits(dtype) || !support.InputFollowsMain(0) || !support.OutputFollowsMain(0)) {
    return false;
  }
  for (int slot = 1; slot < node.input_size(); ++slot) {
    if (support.InputFollowsMain(slot)) return false;
  }
  for (int slot = 1; slot < node.output_size(); ++slot) {
    if (support.OutputFollowsMain(slot)) return false;
  }
  return true;
}

// Analyzes `graph` and, recursively, its subgraphs.
template <typename Analysis>
void Analyze(onnx::GraphProto& graph, const GraphIndex& index, Shared& shared,
             std::vector<GraphEdits>& edits) {
  edits.push_back(Analysis(graph, index, shared).Run());
  for (int i = 0; i < graph.node_size(); ++i) {
    const std::vector<const GraphIndex*> subgraphs = index.Subgraphs(graph.node(i));
    if (subgraphs.empty()) continue;
    size_t next = 0;
    for (onnx::AttributeProto& attribute : *graph.mutable_node(i)->mutable_attribute()) {
      if (attribute.has_g()) {
        Analyze<Analysis>(*attribute.mutable_g(), *subgraphs[next++], shared, edits);
      }
      for (onnx::GraphProto& subgraph : *attribute.mutable_graphs()) {
        Analyze<Analysis>(subgraph, *subgraphs[next++], shared, edits);
      }
    }
  }
}

// Runs one phase with `index` (built here when null). The index holds views of names the edits
// rewrite, so it is dropped before they apply; a phase that changes nothing hands it back for the
// next one (one build fewer, of three, at 1M nodes).
template <typename Analysis>
absl::StatusOr<bool> RunPhase(onnx::ModelProto& model, Shared& shared,
                              std::unique_ptr<GraphIndex>& index) {
  if (index == nullptr) {
    absl::StatusOr<std::unique_ptr<GraphIndex>> built = GraphIndex::Build(model.graph());
    if (!built.ok()) return built.status();
    index = *std::move(built);
  }
  std::vector<GraphEdits> edits;
  Analyze<Analysis>(*model.mutable_graph(), *index, shared, edits);
  const bool changes = std::any_of(edits.begin(), edits.end(), HasChanges);
  if (changes) index.reset();
  for (GraphEdits& graph_edits : edits) {
    for (size_t i = 0; i < graph_edits.deleted.size(); ++i) {
      const NodeProto* node = &graph_edits.graph->node(static_cast<int>(i));
      if (graph_edits.deleted[i] && shared.plan != nullptr && shared.plan->nodes.contains(node)) {
        shared.removed.insert(node);
      }
    }
    Apply(graph_edits);
  }
  return changes;
}

// The plan says what fold-casts did to planned nodes: a user's Cast folded away, a node that
// cast motion moved into the low dtype (the report and explain describe the model written).
void UpdatePlan(PrecisionPlan& plan, const Shared& shared) {
  for (const NodeProto* node : shared.removed) {
    NodePlan& p = plan.nodes[node];
    p.rule = absl::StrCat(p.rule, "; then removed by fold-casts (an exact round trip)");
  }
  for (const auto& [node, dtype] : shared.retyped) {
    auto it = plan.nodes.find(node);
    if (it == plan.nodes.end() || shared.removed.contains(node)) continue;
    NodePlan& p = it->second;
    if (p.output_dtypes.empty() || p.output_dtypes[0] == dtype) continue;
    p.rule = absl::StrCat(p.rule, "; then moved to ", DtypeName(dtype),
                          " by cast motion (exact for this op)");
    p.dtype = dtype;
    p.output_dtypes[0] = dtype;
  }
}

absl::StatusOr<bool> RunPhases(onnx::ModelProto& model, Shared& shared) {
  std::unique_ptr<GraphIndex> index;
  absl::StatusOr<bool> folded = RunPhase<CastFolder>(model, shared, index);
  if (!folded.ok() || !shared.may_move) return folded;
  absl::StatusOr<bool> moved = RunPhase<CastMotion>(model, shared, index);
  if (!moved.ok()) return moved.status();
  if (!*moved) return *folded;
  // Motion leaves identity casts behind, and upcasts without readers.
  absl::StatusOr<bool> cleaned = RunPhase<CastFolder>(model, shared, index);
  if (!cleaned.ok()) return cleaned.status();
  return true;
}

}  // namespace

absl::StatusOr<PassResult> FoldCasts::Run(ModelContext& context) {
  Shared shared(context.model, training_);
  if (context.plan != nullptr) {
    for (const auto& [node, plan] : context.plan->nodes) {
      const bool pinned =
          plan.category == Category::kFp32 || absl::StartsWith(plan.rule, "--block-node");
      if (pinned && plan.dtype == TensorProto::FLOAT) shared.pinned_fp32.insert(node);
    }
  }
  shared.plan = context.plan.get();
  absl::StatusOr<bool> changed = RunPhases(context.model, shared);
  if (changed.ok() && context.plan != nullptr) UpdatePlan(*context.plan, shared);
  return changed;
}

}  // namespace ampc
