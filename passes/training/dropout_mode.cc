#include "passes/training/dropout_mode.h"

#include <onnx/defs/attr_proto_util.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "passes/float_support.h"
#include "passes/graph/name_allocator.h"
#include "passes/graph/remove_if.h"
#include "passes/graph/status_macros.h"
#include "passes/graph/tensor_data.h"
#include "passes/opset/training_ops.h"
#include "passes/training/training_state.h"

namespace ampc {
namespace {

using Mode = TrainingOptions::Dropout;

bool IsDropout(const onnx::NodeProto& node) {
  return node.op_type() == "Dropout" && (node.domain().empty() || node.domain() == "ai.onnx");
}

std::vector<onnx::NodeProto*> Dropouts(onnx::GraphProto& graph) {
  std::vector<onnx::NodeProto*> nodes;
  for (onnx::NodeProto& node : *graph.mutable_node()) {
    if (IsDropout(node)) nodes.push_back(&node);
  }
  return nodes;
}

// The values the nodes of `graph` and its outputs read.
absl::flat_hash_set<std::string> ReadValues(const onnx::GraphProto& graph) {
  absl::flat_hash_set<std::string> read;
  for (const onnx::NodeProto& node : graph.node()) {
    read.insert(node.input().begin(), node.input().end());
  }
  for (const onnx::ValueInfoProto& output : graph.output()) read.insert(output.name());
  return read;
}

// Removes the Constant nodes and initializers among `candidates` that nothing in `graph` reads
// any more (nor `read_elsewhere`: the step's reads of the graph's initializers), and the
// value_info of those and of `gone` (values no longer computed).
void RemoveUnread(onnx::GraphProto& graph, const absl::flat_hash_set<std::string>& candidates,
                  absl::flat_hash_set<std::string> gone,
                  const absl::flat_hash_set<std::string>& read_elsewhere) {
  absl::flat_hash_set<std::string> still_read = ReadValues(graph);
  still_read.insert(read_elsewhere.begin(), read_elsewhere.end());
  auto unread = [&](const std::string& name) {
    return candidates.contains(name) && !still_read.contains(name);
  };
  absl::flat_hash_set<std::string> inputs;
  for (const onnx::ValueInfoProto& input : graph.input()) inputs.insert(input.name());
  RemoveIf(*graph.mutable_node(), [&](int i) {
    const onnx::NodeProto& node = graph.node(i);
    if (!(node.op_type() == "Constant" && node.output_size() == 1 && unread(node.output(0)))) {
      return false;
    }
    gone.insert(node.output(0));
    return true;
  });
  RemoveIf(*graph.mutable_initializer(), [&](int i) {
    const std::string& name = graph.initializer(i).name();
    if (!unread(name) || inputs.contains(name)) return false;
    gone.insert(name);
    return true;
  });
  RemoveIf(*graph.mutable_value_info(),
           [&](int i) { return gone.contains(graph.value_info(i).name()); });
}

// Every Dropout of `graph` becomes the identity: an Identity node (which every backend runs), or,
// where its mask is read, the Dropout without training_mode (an all-true mask). Constants and
// initializers that only those Dropouts read (ratio, training_mode) go. Whether anything changed.
bool MakeInference(onnx::GraphProto& graph,
                   const absl::flat_hash_set<std::string>& read_elsewhere) {
  const absl::flat_hash_set<std::string> read = ReadValues(graph);
  absl::flat_hash_set<std::string> dropped;  // inputs 1 and 2 of the Dropouts changed
  absl::flat_hash_set<std::string> gone;     // the masks no longer computed
  bool changed = false;
  for (onnx::NodeProto* node : Dropouts(graph)) {
    const bool mask_read = node->output_size() > 1 && read.contains(node->output(1));
    if (mask_read && node->input_size() <= 2) continue;
    changed = true;
    for (int i = 1; i < node->input_size(); ++i) dropped.insert(node->input(i));
    if (mask_read) {
      node->mutable_input()->DeleteSubrange(2, node->input_size() - 2);
      if (node->input(1).empty()) node->mutable_input()->RemoveLast();
      continue;
    }
    node->set_op_type("Identity");
    node->clear_domain();
    node->clear_attribute();
    node->mutable_input()->DeleteSubrange(1, node->input_size() - 1);
    for (int i = 1; i < node->output_size(); ++i) gone.insert(node->output(i));
    node->mutable_output()->DeleteSubrange(1, node->output_size() - 1);
  }
  if (!changed) return false;
  RemoveUnread(graph, dropped, gone, read_elsewhere);
  return true;
}

onnx::NodeProto ConstantNode(const std::string& name, const onnx::TensorProto& value) {
  onnx::NodeProto node;
  node.set_name(name);
  node.set_op_type("Constant");
  node.add_output(name);
  *node.add_attribute() = onnx::MakeAttribute("value", value);
  return node;
}

// Puts `nodes` before every node of `graph` (they read only initializers and constants).
void Prepend(onnx::GraphProto& graph, std::vector<onnx::NodeProto> nodes) {
  for (onnx::NodeProto& node : *graph.mutable_node()) nodes.push_back(std::move(node));
  graph.clear_node();
  for (onnx::NodeProto& node : nodes) *graph.add_node() = std::move(node);
}

// SplitMix64's finalizer (Steele, Lea, Flood 2014): distinct seeds for the step's nodes.
uint64_t Mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr uint64_t kStepDropoutSeed = 0xd50b'5eed'0000'0000ULL;

}  // namespace

absl::StatusOr<PassResult> DropoutMode::Run(ModelContext& context) {
  onnx::GraphProto& graph = *context.model.mutable_graph();
  for (const onnx::NodeProto& node : graph.node()) {
    const std::string& op = node.op_type();
    if (node.domain().empty() &&
        (op == "RandomUniformLike" || op == "RandomUniform" || op == "RandomNormalLike" ||
         op == "RandomNormal" || op == "Bernoulli" || op == "Multinomial")) {
      return absl::InvalidArgumentError(absl::StrCat(
          context.file, ": node '", node.name(), "' (", op,
          "): --train has no random ops but Dropout (and the dynamo exporter's lowered Dropout, "
          "RandomUniformLike, Less, Cast, Div and Mul, which this is not part of): export in eval "
          "mode and train with --dropout=off, or with dynamo=False, "
          "training=torch.onnx.TrainingMode.TRAINING for --dropout=graph"));
    }
  }
  std::vector<onnx::NodeProto*> dropouts = Dropouts(graph);
  if (mode_ == Mode::kOff) {
    return PassResult(MakeInference(graph, {}));
  }
  const std::string flag =
      mode_ == Mode::kGraph ? "--dropout=graph" : absl::StrCat("--dropout=", ratio_);
  if (dropouts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        context.file, ": ", flag,
        ": the model has no Dropout node (an export in eval mode has none left: export with "
        "torch.onnx.export(..., dynamo=False, training=torch.onnx.TrainingMode.TRAINING) to keep "
        "them), or train with --dropout=off"));
  }
  NameAllocator names(context.model);
  std::vector<onnx::NodeProto> constants;
  const std::string on = names.Fresh("ampc.dropout.training_mode");
  constants.push_back(ConstantNode(on, ScalarTensor(onnx::TensorProto::BOOL, 1)));
  std::string ratio;  // the ratio every node gets, or empty: its own
  if (mode_ == Mode::kRatio) {
    ratio = names.Fresh("ampc.dropout.ratio");
    constants.push_back(ConstantNode(ratio, ScalarTensor(onnx::TensorProto::FLOAT, ratio_)));
  }
  std::string half;  // ONNX's default ratio, for nodes without one
  absl::flat_hash_set<std::string> replaced;
  for (onnx::NodeProto* node : dropouts) {
    while (node->input_size() < 3) node->add_input("");
    replaced.insert(node->input(2));
    if (!ratio.empty()) replaced.insert(node->input(1));
    if (!ratio.empty()) {
      node->set_input(1, ratio);
    } else if (node->input(1).empty()) {
      if (half.empty()) {
        half = names.Fresh("ampc.dropout.default_ratio");
        constants.push_back(ConstantNode(half, ScalarTensor(onnx::TensorProto::FLOAT, 0.5)));
      }
      node->set_input(1, half);
    }
    node->set_input(2, on);
  }
  RemoveUnread(graph, replaced, {}, {});
  Prepend(graph, std::move(constants));
  return PassResult(true);
}

absl::StatusOr<PassResult> DropoutStep::Run(ModelContext& context) {
  if (mode_ == Mode::kOff) return PassResult(false);
  onnx::ModelProto& model = context.model;
  if (model.training_info_size() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(context.file, ": dropout-step runs after training-step"));
  }
  // The graph is the inference model: no dropout there.
  MakeInference(*model.mutable_graph(), ReadValues(model.training_info(0).algorithm()));
  onnx::GraphProto& step = *model.mutable_training_info(0)->mutable_algorithm();
  std::vector<onnx::NodeProto*> dropouts;
  for (onnx::NodeProto* node : Dropouts(step)) {
    if (node->input_size() > 2 && !node->input(2).empty()) dropouts.push_back(node);
  }
  if (dropouts.empty()) return PassResult(true);
  NameAllocator names(model);
  int64_t k = 1;
  if (const std::string* value = MetadataValue(model, kAccumulateKey); value != nullptr) {
    if (!absl::SimpleAtoi(*value, &k) || k < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(context.file, ": metadata ", kAccumulateKey, " is '", *value, "'"));
    }
  }
  // call = (step + skipped) * K + micro_step: the algorithm's runs before this one.
  std::vector<onnx::NodeProto> counting;
  auto add = [&](const std::string& op, std::vector<std::string> inputs, const std::string& hint) {
    onnx::NodeProto node;
    node.set_op_type(op);
    const std::string output = names.Fresh(hint);
    node.set_name(output);
    for (const std::string& input : inputs) node.add_input(input);
    node.add_output(output);
    counting.push_back(std::move(node));
    return output;
  };
  std::string call = add("Add", {kStep, kSkippedSteps}, "ampc.dropout.steps_run");
  if (k > 1) {
    const std::string kname = names.Fresh("ampc.dropout.accumulate");
    counting.push_back(
        ConstantNode(kname, ScalarTensor(onnx::TensorProto::INT64, static_cast<double>(k))));
    call = add("Mul", {call, kname}, "ampc.dropout.windows_run");
    call = add("Add", {call, kMicroStep}, "ampc.dropout.call");
  }
  Prepend(step, std::move(counting));
  int ordinal = 0;
  for (onnx::NodeProto* node : Dropouts(step)) {
    if (!(node->input_size() > 2 && !node->input(2).empty())) continue;
    int64_t seed = 0;
    bool has_seed = false;
    for (const onnx::AttributeProto& attribute : node->attribute()) {
      if (attribute.name() == "seed") {
        seed = attribute.i();
        has_seed = true;
      }
    }
    if (!has_seed) {
      seed = static_cast<int64_t>(Mix(kStepDropoutSeed + static_cast<uint64_t>(ordinal)));
      *node->add_attribute() = onnx::MakeAttribute("seed", seed);
    }
    ++ordinal;
    node->set_domain(kAmpcDomain);
    node->add_input(call);
    // One model-local function serves every node: give each the mask output.
    if (node->output_size() < 2) node->add_output("");
    if (node->output(1).empty()) node->set_output(1, names.Fresh(node->output(0) + "/mask"));
  }
  AMPC_ASSIGN_OR_RETURN(onnx::FunctionProto body,
                        AmpcFunctionBody("Dropout", 4, 2, CastOpset(OpsetsOf(model))));
  *model.add_functions() = std::move(body);
  return PassResult(true);
}

}  // namespace ampc
