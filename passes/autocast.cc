#include "passes/autocast.h"

#include <re2/re2.h>

#include <cmath>
#include <memory>
#include <string_view>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "passes/float_support.h"
#include "passes/graph/float_scan.h"
#include "passes/graph/graph_index.h"
#include "passes/graph/tensor_data.h"
#include "passes/opset/standard_op_versions.h"
#include "passes/opset/training_ops.h"

namespace ampc {
namespace {

using onnx::TensorProto;

constexpr float kFp16Max = 65504.0f;

bool IsLossOp(const onnx::NodeProto& node) {
  return (node.domain().empty() || node.domain() == "ai.onnx") &&
         (node.op_type() == "SoftmaxCrossEntropyLoss" ||
          node.op_type() == "NegativeLogLikelihoodLoss");
}

bool HasSubgraph(const onnx::NodeProto& node) {
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.has_g() || a.graphs_size() > 0) return true;
  }
  return false;
}

int ElemType(const onnx::TypeProto* type) {
  return type != nullptr && type->has_tensor_type() ? type->tensor_type().elem_type() : 0;
}

bool IsFloat(int dtype) {
  return dtype == TensorProto::FLOAT || dtype == TensorProto::FLOAT16 ||
         dtype == TensorProto::BFLOAT16;
}

// A Conv weight's output channels (dim 0), or 0 when unknown.
int64_t OutputChannels(const onnx::TypeProto* weight) {
  if (weight == nullptr || !weight->tensor_type().has_shape()) return 0;
  const auto& shape = weight->tensor_type().shape();
  return shape.dim_size() > 0 && shape.dim(0).has_dim_value() ? shape.dim(0).dim_value() : 0;
}

// The name explain shows: the node's, else GRAPH#INDEX.
std::string NodeName(const onnx::GraphProto& graph, int i) {
  const onnx::NodeProto& node = graph.node(i);
  return node.name().empty() ? absl::StrCat(graph.name(), "#", i) : node.name();
}

// LayerNormalization or RMSNormalization with stash_type = 0: statistics in the input's type
// (FOLLOW takes the default, 1: FP32 statistics).
bool StashesInInputType(const onnx::NodeProto& node) {
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.name() == "stash_type") return a.i() == 0;
  }
  return false;
}

// A value as the planner sees it: its dtype after upstream decisions, and whether it is a
// constant (initializer or Constant output), which adopts its consumer's dtype.
struct Value {
  int dtype = 0;
  const TensorProto* constant = nullptr;
  bool flexible = false;  // constant, or computed from constants only
  bool loss = false;      // the loss op or downstream of it
  // Of a flexible value computed from constants (FP16 range rule): the largest finite |x| of
  // the constants it comes from.
  float upstream_max = 0;
};

// Keys are views of names in the model, which autocast never changes: a std::string key cost an
// allocation per value at 1M nodes.
class Scope {
 public:
  explicit Scope(const Scope* parent) : parent_(parent) {}
  const Value* Find(std::string_view name) const {
    auto it = values_.find(name);
    if (it != values_.end()) return &it->second;
    return parent_ == nullptr ? nullptr : parent_->Find(name);
  }
  Value& operator[](std::string_view name) { return values_[name]; }
  void Reserve(size_t values) { values_.reserve(values); }

 private:
  const Scope* parent_;
  absl::flat_hash_map<std::string_view, Value> values_;
};

// The values a graph defines itself, for reserving its scope.
size_t LocalValueCount(const onnx::GraphProto& graph) {
  size_t count = graph.initializer_size() + graph.input_size();
  for (const onnx::NodeProto& node : graph.node()) count += node.output_size();
  return count;
}

// Elem types of a node's inputs and outputs in the input model (0 where absent or unknown).
struct NodeTypes {
  std::vector<int> inputs, outputs;
};

class Planner {
 public:
  Planner(ModelContext& context, const AutocastOptions& options, bool training, PrecisionPlan& plan)
      : plan_(plan),
        context_(context),
        options_(options),
        opsets_(OpsetsOf(context.model)),
        cast_opset_(CastOpset(opsets_)),
        cast_supports_low_(CastSupports(opsets_, options_.low_dtype)) {
    if (!options_.block_node_regex.empty()) {
      block_ = std::make_unique<RE2>(options_.block_node_regex);
    }
    if (!options_.lower_node_regex.empty()) {
      lower_ = std::make_unique<RE2>(options_.lower_node_regex);
    }
    training_ = training;
    range_rules_ = options_.low_dtype == TensorProto::FLOAT16 && !options_.clamp;
    if (opsets_.contains(kAmpcDomain)) SeedVersions(context.model.graph());
    conv_bias_ = options_.ampc_versions && options_.low_dtype == TensorProto::BFLOAT16 &&
                 AnyConvHasBias(context.model.graph());
  }

  // Returns whether some node of the graph (or of its subgraphs) is in the loss subgraph.
  bool PlanGraph(const GraphIndex& index, const Scope* outer, bool top_level);

 private:
  struct Deferred {
    const onnx::NodeProto* node;
    std::unique_ptr<FloatSupport> support;
    NodeTypes original;
    float input_max;  // the largest finite |x| of the constants its inputs come from
  };

  bool PlanNode(const onnx::NodeProto& node, const std::string& name, const FloatSupport& support,
                const NodeTypes& original, Scope& scope, NodePlan& plan, float& input_max);
  int DecideByRules(const onnx::NodeProto& node, const std::string& name,
                    const FloatSupport& support, bool loss, NodePlan& plan, bool& deferred);
  int CheckLegality(const onnx::NodeProto& node, const FloatSupport& support, int dtype,
                    NodePlan& plan);
  bool UsesAmpcVersion(const onnx::NodeProto& node, int dtype, NodePlan& plan,
                       std::string& why_not);
  void ApplyDtype(const onnx::NodeProto& node, const FloatSupport& support,
                  const NodeTypes& original, int dtype, NodePlan& plan);
  void ResolveDeferred(const GraphIndex& index, std::vector<Deferred>& deferred);
  float MaxAbs(const TensorProto& tensor);
  // The largest finite |x| of the constants a flexible value comes from (0 for others).
  float FlexibleMax(const Value* value);
  // The ai.ampc versions already in the model (ampc's own output) fix their functions' signatures.
  void SeedVersions(const onnx::GraphProto& graph);  // Whether a Conv that may become ai.ampc.Conv
                                                     // (default domain, not blocked) has a bias.
  bool AnyConvHasBias(const onnx::GraphProto& graph) const;

  PrecisionPlan& plan_;
  ModelContext& context_;
  const AutocastOptions& options_;
  OpsetVersions opsets_;
  int cast_opset_;
  bool cast_supports_low_;
  std::unique_ptr<RE2> block_, lower_;
  // The values the node being planned reads, by slot (null where absent or unknown): found once
  // per node, not once per rule that looks.
  std::vector<const Value*> inputs_;
  absl::flat_hash_map<const TensorProto*, float> max_abs_;
  // Per op with an ai.ampc version: the signature its one model-local function is built for, and
  // the node that fixed it.
  absl::flat_hash_map<std::string, std::pair<std::string, std::string>> versions_;
  bool training_ = false;
  bool conv_bias_ = false;             // some Conv of the model has a bias
  bool range_rules_ = false;           // FP16 without --clamp: constants beyond 65504 stay FP32
  const GraphIndex* index_ = nullptr;  // of the graph whose node is being planned
};

bool Planner::PlanGraph(const GraphIndex& index, const Scope* outer, bool top_level) {
  const onnx::GraphProto& graph = index.graph();
  Scope scope(outer);
  scope.Reserve(LocalValueCount(graph));
  if (top_level) {  // subgraph nodes are few; rehashing 1M plans as the map grows is not
    plan_.nodes.reserve(graph.node_size());
    plan_.order.reserve(graph.node_size());
  }
  for (const TensorProto& init : graph.initializer()) {
    scope[init.name()] = Value{init.data_type(), &init, true, false};
  }
  for (const onnx::ValueInfoProto& input : graph.input()) {
    const int declared = ElemType(&input.type());
    // An input with an initializer (IR < 4 defaults) is a weight: it keeps its type.
    const bool lower = top_level && options_.low_io && declared == TensorProto::FLOAT &&
                       index.Initializer(input.name()) == nullptr;
    scope[input.name()] = Value{lower ? options_.low_dtype : declared};  // never a constant
  }
  std::vector<Deferred> deferred;
  bool any_loss = false;
  NodeTypes original;  // one buffer for every node (two allocations per node at 1M nodes)
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    original.inputs.clear();
    original.outputs.clear();
    for (const std::string& input : node.input()) {
      original.inputs.push_back(input.empty() ? 0 : ElemType(index.Type(input)));
    }
    for (const std::string& output : node.output()) {
      original.outputs.push_back(output.empty() ? 0 : ElemType(index.Type(output)));
    }
    FloatSupport support(node, opsets_, original.inputs);
    index_ = &index;  // again after each subgraph
    NodePlan& plan = plan_.nodes[&node];
    plan.name = NodeName(graph, i);
    plan_.order.push_back(&node);
    float input_max = 0;
    if (PlanNode(node, plan.name, support, original, scope, plan, input_max)) {
      deferred.push_back(
          Deferred{&node, std::make_unique<FloatSupport>(std::move(support)), original, input_max});
    }
    // A body that reads the loss (or computes one) makes the control-flow node's outputs part
    // of the loss subgraph.
    bool body_loss = false;
    for (const GraphIndex* sub : index.Subgraphs(node)) body_loss |= PlanGraph(*sub, &scope, false);
    for (const std::string& output : node.output()) {
      if (body_loss) scope[output].loss = true;
      if (!top_level && !any_loss) any_loss = scope[output].loss;  // only bodies report it
    }
  }
  ResolveDeferred(index, deferred);
  return any_loss;
}

// Returns whether the decision waits for the node's consumers (all float inputs constant); then
// `input_max` is the largest finite |x| of the constants its inputs come from.
bool Planner::PlanNode(const onnx::NodeProto& node, const std::string& name,
                       const FloatSupport& support, const NodeTypes& original, Scope& scope,
                       NodePlan& plan, float& input_max) {
  plan.op_type = node.op_type();
  plan.input_dtypes.assign(node.input_size(), 0);
  bool loss = IsLossOp(node);
  bool all_flexible = node.input_size() > 0;
  inputs_.clear();
  for (const std::string& input : node.input()) {
    const Value* v = input.empty() ? nullptr : scope.Find(input);
    inputs_.push_back(v);
    loss = loss || (v != nullptr && v->loss);
    all_flexible = all_flexible && (input.empty() || (v != nullptr && v->flexible));
  }
  bool deferred = false;
  const int dtype = DecideByRules(node, name, support, loss, plan, deferred);
  ApplyDtype(node, support, original, dtype, plan);
  const bool constant_node = node.op_type() == "Constant" && node.attribute_size() == 1 &&
                             node.attribute(0).name() == "value";
  if (deferred) {
    for (const Value* v : inputs_) input_max = std::max(input_max, FlexibleMax(v));
  }
  for (int i = 0; i < node.output_size(); ++i) {
    Value& out = scope[node.output(i)];
    out.dtype = plan.output_dtypes[i];
    out.constant = constant_node ? &node.attribute(0).t() : nullptr;
    out.flexible = constant_node || (deferred && all_flexible);
    out.loss = loss;
    out.upstream_max = deferred && all_flexible ? input_max : 0;
  }
  return deferred;
}

int Planner::DecideByRules(const onnx::NodeProto& node, const std::string& name,
                           const FloatSupport& support, bool loss, NodePlan& plan, bool& deferred) {
  plan.ampc_version = false;
  plan.zero_bias = 0;
  if (HasSubgraph(node)) {
    plan.rule = "control flow: signature kept, bodies planned by the same rules";
    return 0;
  }
  if (node.op_type() == "Cast" && node.domain().empty()) {
    plan.rule = "existing Cast: kept as the model states it";
    return 0;
  }
  if (support.main_var().empty()) {
    plan.rule = support.main_is_low() ? "first float input already low: dtypes kept"
                                      : "no float32 input: dtypes kept";
    return 0;
  }
  for (int slot = 0; slot < node.input_size(); ++slot) {
    if (!node.input(slot).empty() && support.InputFollowsMain(slot) &&
        (inputs_[slot] == nullptr || inputs_[slot]->dtype == 0)) {
      plan.rule = absl::StrCat("input '", node.input(slot),
                               "' has no known type (made by an op ONNX does not know?): dtypes "
                               "kept");
      return 0;
    }
  }
  plan.category = options_.policy.Lookup(node.domain(), node.op_type());
  const std::string& source = options_.policy.Source(node.domain(), node.op_type());
  if (block_ != nullptr && RE2::FullMatch(node.name(), *block_)) {
    plan.rule = absl::StrCat("--block-node '", options_.block_node_regex, "'");
    return TensorProto::FLOAT;
  }
  if (lower_ != nullptr && RE2::FullMatch(node.name(), *lower_)) {
    plan.rule = absl::StrCat("--lower-node '", options_.lower_node_regex, "'");
    return CheckLegality(node, support, options_.low_dtype, plan);
  }
  if (loss) {
    plan.rule = "loss subgraph: the loss and everything downstream of it stay FP32";
    return TensorProto::FLOAT;
  }
  plan.rule = absl::StrCat("category ", CategoryName(plan.category), " (", source, ")");
  switch (plan.category) {
    case Category::kLower:
      return CheckLegality(node, support, options_.low_dtype, plan);
    case Category::kFp32:
      return TensorProto::FLOAT;
    case Category::kKeep:
      if (!options_.policy.Has(node.domain(), node.op_type())) {
        context_.Warn(absl::StrCat("node '", name, "' (", node.op_type(),
                                   "): op not in the policy; its dtypes are kept"),
                      name);
      }
      return 0;
    case Category::kFollow:
      break;
  }
  if ((node.op_type() == "LayerNormalization" || node.op_type() == "RMSNormalization") &&
      StashesInInputType(node)) {
    plan.rule = absl::StrCat(plan.rule,
                             "; but stash_type = 0 computes the statistics in the "
                             "input's type: FP32");
    return TensorProto::FLOAT;
  }
  int widest = 0;
  for (int slot = 0; slot < node.input_size(); ++slot) {
    const Value* v = inputs_[slot];
    if (v == nullptr || v->flexible || !support.InputFollowsMain(slot) || !IsFloat(v->dtype)) {
      continue;
    }
    if (widest == 0 || v->dtype == TensorProto::FLOAT) widest = v->dtype;
  }
  if (widest == 0) {
    deferred = true;
    plan.rule = "category FOLLOW, inputs all constant: follows its consumers";
    return TensorProto::FLOAT;  // until ResolveDeferred looks at the consumers
  }
  if (widest != TensorProto::FLOAT) return CheckLegality(node, support, widest, plan);
  return TensorProto::FLOAT;
}

// The low dtype only where the schema allows it and no constant overflows FP16.
int Planner::CheckLegality(const onnx::NodeProto& node, const FloatSupport& support, int dtype,
                           NodePlan& plan) {
  if (!cast_supports_low_) {
    plan.rule =
        absl::StrCat(plan.rule, "; but Cast-", cast_opset_, " has no ", DtypeName(dtype), ": FP32");
    return TensorProto::FLOAT;
  }
  if (!support.MainAdmits(dtype)) {
    const std::string schema = absl::StrCat("schema ", support.SchemaName(), " does not allow ",
                                            DtypeName(dtype), " for ", support.main_var());
    std::string why_not;
    if (UsesAmpcVersion(node, dtype, plan, why_not)) {
      plan.rule = absl::StrCat(plan.rule, "; ", schema, ": runs as ai.ampc.", node.op_type(),
                               plan.zero_bias > 0 ? ", with a zero bias as the other Convs" : "");
      plan.ampc_version = true;
      return dtype;
    }
    plan.rule = absl::StrCat(plan.rule, "; but ", schema, why_not, ": FP32");
    return TensorProto::FLOAT;
  }
  if (dtype != TensorProto::FLOAT16 || options_.clamp) return dtype;
  for (int slot = 0; slot < node.input_size(); ++slot) {
    const Value* v = inputs_[slot];
    if (!support.InputFollowsMain(slot)) continue;
    const float max = FlexibleMax(v);
    if (max > kFp16Max) {
      plan.rule = absl::StrFormat(
          "range: %s '%s' holds |x| = %g > 65504, which FP16 cannot represent: FP32 "
          "(--clamp clamps instead)",
          v->constant != nullptr ? "constant" : "the constants behind", node.input(slot), max);
      return TensorProto::FLOAT;
    }
  }
  return dtype;
}

float Planner::FlexibleMax(const Value* value) {
  if (!range_rules_ || value == nullptr || !value->flexible) return 0;
  return value->constant != nullptr ? MaxAbs(*value->constant) : value->upstream_max;
}

bool Planner::AnyConvHasBias(const onnx::GraphProto& graph) const {
  for (const onnx::NodeProto& node : graph.node()) {
    if (node.op_type() == "Conv" && (node.domain().empty() || node.domain() == "ai.onnx") &&
        node.input_size() > 2 && !node.input(2).empty() &&
        !(block_ != nullptr && RE2::FullMatch(node.name(), *block_))) {
      return true;
    }
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g() && AnyConvHasBias(a.g())) return true;
      for (const onnx::GraphProto& sub : a.graphs()) {
        if (AnyConvHasBias(sub)) return true;
      }
    }
  }
  return false;
}

void Planner::SeedVersions(const onnx::GraphProto& graph) {
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    if (IsAmpcVersion(node)) {
      versions_.try_emplace(node.op_type(), AmpcVersionSignature(node, training_),
                            NodeName(graph, i));
    }
    for (const onnx::AttributeProto& attribute : node.attribute()) {
      if (attribute.has_g()) SeedVersions(attribute.g());
      for (const onnx::GraphProto& sub : attribute.graphs()) SeedVersions(sub);
    }
  }
}

// Whether the node can run as its ai.ampc version; `why_not` is empty or says why it cannot.
bool Planner::UsesAmpcVersion(const onnx::NodeProto& node, int dtype, NodePlan& plan,
                              std::string& why_not) {
  if (!HasAmpcVersion(node, dtype)) return false;
  if (!options_.ampc_versions) {
    why_not = absl::StrCat(" (--standard-ops: no ai.ampc.", node.op_type(), ")");
    return false;
  }
  onnx::NodeProto stated = node;  // as insert-casts will state its attributes
  NormalizeAmpcVersion(stated, index_->Type(node.input(0)),
                       node.input_size() > 1 ? index_->Type(node.input(1)) : nullptr);
  const std::string signature = AmpcVersionSignature(stated, training_);
  // With a bias on some Conv, the one function takes three inputs: a Conv without gets zeros
  // (unless the function is fixed to two inputs already).
  const int64_t channels = conv_bias_ && node.op_type() == "Conv" && stated.input_size() == 2
                               ? OutputChannels(index_->Type(node.input(1)))
                               : 0;
  std::string with_zero_bias;
  if (channels > 0) {
    stated.add_input("zero bias");
    with_zero_bias = AmpcVersionSignature(stated, training_);
  }
  auto [it, first] =
      versions_.try_emplace(node.op_type(), channels > 0 ? with_zero_bias : signature, plan.name);
  if (first || it->second.first == with_zero_bias) {
    plan.zero_bias = channels;
    return true;
  }
  if (it->second.first == signature) return true;
  why_not = absl::StrCat(", and ai.ampc.", node.op_type(), "'s one model-local function is for ",
                         it->second.first, " (node '", it->second.second, "'), not ", signature);
  return false;
}

float Planner::MaxAbs(const TensorProto& tensor) {
  auto [it, inserted] = max_abs_.try_emplace(&tensor, 0.0f);
  if (inserted) it->second = ScanFloats(tensor).max_finite_abs;
  return it->second;
}

// Wanted input and resulting output dtypes: slots of the main type variable take `dtype`; other
// float slots keep the input model's dtype. dtype 0 keeps every slot as the input model had it.
void Planner::ApplyDtype(const onnx::NodeProto& node, const FloatSupport& support,
                         const NodeTypes& original, int dtype, NodePlan& plan) {
  plan.dtype = dtype;
  const bool keeps_all = dtype == 0 && !(node.op_type() == "Cast" && node.domain().empty());
  for (int slot = 0; slot < node.input_size(); ++slot) {
    const int before = original.inputs[slot];
    const int wanted = dtype != 0 && support.InputFollowsMain(slot) ? dtype : before;
    plan.input_dtypes[slot] = (dtype != 0 || keeps_all) && IsFloat(before) ? wanted : 0;
  }
  plan.output_dtypes.clear();
  for (int slot = 0; slot < node.output_size(); ++slot) {
    const bool follows =
        dtype != 0 && support.OutputFollowsMain(slot) &&
        (support.schema() != nullptr || original.outputs[slot] == TensorProto::FLOAT ||
         original.outputs[slot] == 0);  // an op a policy classified: its untyped outputs too
    plan.output_dtypes.push_back(follows ? dtype : original.outputs[slot]);
  }
}

void Planner::ResolveDeferred(const GraphIndex& index, std::vector<Deferred>& deferred) {
  for (auto it = deferred.rbegin(); it != deferred.rend(); ++it) {
    const onnx::NodeProto& node = *it->node;
    NodePlan& plan = plan_.nodes[&node];
    bool all_low = true, any = false;
    for (const std::string& output : node.output()) {
      if (index.IsGraphOutput(output)) all_low = false;
      for (const ValueUse& use : index.Consumers(output)) {
        if (use.slot == ValueUse::kImplicitSlot) {
          all_low = false;
          continue;
        }
        const int wanted = plan_.nodes[use.node].input_dtypes[use.slot];
        if (wanted == 0) continue;
        any = true;
        all_low = all_low && wanted == options_.low_dtype;
      }
    }
    // Computed in FP16 from constants FP16 cannot hold, it would give inf (the consumers' range
    // checks keep them FP32 then; --clamp clamps the constants instead).
    if (any && all_low && it->input_max > kFp16Max) {
      context_.Warn(
          absl::StrFormat(
              "node '%s' (%s) computes from constants holding |x| = %g > 65504 and stays FP32, but "
              "its readers compute in FP16: they read inf (--clamp clamps the constants)",
              plan.name, node.op_type(), it->input_max),
          plan.name);
    }
    if (any && all_low && it->input_max <= kFp16Max &&
        it->support->MainAdmits(options_.low_dtype)) {
      ApplyDtype(node, *it->support, it->original, options_.low_dtype, plan);
    }
  }
}

// Constant <value_float = v> and <value_floats = [...]> become the same Constant <value = tensor>,
// so they are constants as the planner and insert-casts see them (converted at compile time,
// range-checked) rather than values cast at run time.
bool StateFloatConstantsAsTensors(onnx::GraphProto& graph) {
  bool changed = false;
  for (onnx::NodeProto& node : *graph.mutable_node()) {
    for (onnx::AttributeProto& a : *node.mutable_attribute()) {
      if (a.has_g()) changed |= StateFloatConstantsAsTensors(*a.mutable_g());
      for (onnx::GraphProto& sub : *a.mutable_graphs())
        changed |= StateFloatConstantsAsTensors(sub);
    }
    if (node.op_type() != "Constant" || !(node.domain().empty() || node.domain() == "ai.onnx") ||
        node.attribute_size() != 1) {
      continue;
    }
    onnx::AttributeProto& a = *node.mutable_attribute(0);
    if (a.name() != "value_float" && a.name() != "value_floats") continue;
    TensorProto tensor;
    tensor.set_data_type(TensorProto::FLOAT);
    if (a.name() == "value_float") {
      tensor.add_float_data(a.f());
    } else {
      tensor.add_dims(a.floats_size());
      *tensor.mutable_float_data() = a.floats();
    }
    a.Clear();
    a.set_name("value");
    a.set_type(onnx::AttributeProto::TENSOR);
    *a.mutable_t() = std::move(tensor);
    changed = true;
  }
  return changed;
}

}  // namespace

std::string DtypeName(int elem_type) {
  switch (elem_type) {
    case TensorProto::FLOAT16:
      return "fp16";
    case TensorProto::BFLOAT16:
      return "bf16";
    case TensorProto::FLOAT:
      return "fp32";
    case TensorProto::DOUBLE:
      return "fp64";
    case 0:
      return "kept";
  }
  return TensorProto::DataType_Name(static_cast<TensorProto::DataType>(elem_type));
}

absl::StatusOr<PassResult> Autocast::Run(ModelContext& context) {
  const bool normalized = StateFloatConstantsAsTensors(*context.model.mutable_graph());
  absl::StatusOr<std::shared_ptr<const GraphIndex>> index = context.Index();
  if (!index.ok()) return index.status();
  auto plan = std::make_shared<PrecisionPlan>();
  plan->low_dtype = options_.low_dtype;
  plan->low_io = options_.low_io;
  plan->clamp = options_.clamp;
  const OpsetVersions opsets = OpsetsOf(context.model);
  if (!CastSupports(opsets, plan->low_dtype)) {
    // Without a Cast to the low dtype nothing can change: every node plans FP32.
    plan->low_io = false;
    context.Warn(absl::StrCat(
        "Cast at opset ", CastOpset(opsets), " has no ", DtypeName(plan->low_dtype),
        " (bfloat16 needs opset 13): the model stays FP32; re-export it with opset 13 or newer"));
  }
  Planner(context, options_, training_, *plan).PlanGraph(**index, nullptr, true);
  context.plan = std::move(plan);
  // Stating float constants as tensors changes no node or value: the index stays valid.
  return PassResult(normalized, false);
}

}  // namespace ampc
