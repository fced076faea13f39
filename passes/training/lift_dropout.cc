#include "passes/training/lift_dropout.h"

#include <onnx/defs/attr_proto_util.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "passes/graph/graph_index.h"
#include "passes/graph/name_allocator.h"
#include "passes/graph/remove_if.h"
#include "passes/graph/tensor_data.h"

namespace ampc {
namespace {

bool IsOp(const onnx::NodeProto* node, absl::string_view op) {
  return node != nullptr && node->op_type() == op &&
         (node->domain().empty() || node->domain() == "ai.onnx");
}

// The node producing `value` when it has exactly one reader (the chain's next node).
const onnx::NodeProto* SoleProducer(const GraphIndex& index, const std::string& value) {
  const ValueSource* source = index.Source(value);
  if (source == nullptr || source->kind != ValueSource::Kind::kNode) return nullptr;
  if (index.Consumers(value).size() != 1 || index.IsGraphOutput(value)) return nullptr;
  return source->node;
}

float FloatAttribute(const onnx::NodeProto& node, absl::string_view name, float otherwise) {
  for (const onnx::AttributeProto& attribute : node.attribute()) {
    if (attribute.name() == name) return attribute.f();
  }
  return otherwise;
}

// The FP32 scalar an initializer `value` holds.
std::optional<float> ScalarInitializer(const GraphIndex& index, const std::string& value) {
  const onnx::TensorProto* tensor = index.Initializer(value);
  if (tensor == nullptr || tensor->data_type() != onnx::TensorProto::FLOAT ||
      tensor->dims_size() != 0 || tensor->data_location() == onnx::TensorProto::EXTERNAL) {
    return std::nullopt;
  }
  const std::string raw = RawBytes(*tensor);
  if (raw.size() != sizeof(float)) return std::nullopt;
  float v;
  std::memcpy(&v, raw.data(), sizeof v);
  return v;
}

bool SameShape(const onnx::TypeProto* a, const onnx::TypeProto* b) {
  if (a == nullptr || b == nullptr || !a->tensor_type().has_shape() ||
      !b->tensor_type().has_shape()) {
    return false;
  }
  const auto& da = a->tensor_type().shape().dim();
  const auto& db = b->tensor_type().shape().dim();
  if (da.size() != db.size()) return false;
  for (int i = 0; i < da.size(); ++i) {
    if (!da[i].has_dim_value() || !db[i].has_dim_value() ||
        da[i].dim_value() != db[i].dim_value()) {
      return false;
    }
  }
  return true;
}

// One lowered Dropout: the Mul it ends in, the input it masks, its keep probability and the
// nodes of the mask.
struct Chain {
  const onnx::NodeProto* mul;
  std::string x;
  float keep;
  std::vector<const onnx::NodeProto*> mask;  // RandomUniformLike, Less, Cast, Div
};

std::optional<Chain> ChainAt(const GraphIndex& index, const onnx::NodeProto& mul, int side) {
  const onnx::NodeProto* div = SoleProducer(index, mul.input(side));
  if (!IsOp(div, "Div") || div->input_size() != 2) return std::nullopt;
  const onnx::NodeProto* cast = SoleProducer(index, div->input(0));
  if (!IsOp(cast, "Cast")) return std::nullopt;
  const onnx::NodeProto* less = SoleProducer(index, cast->input(0));
  if (!IsOp(less, "Less") || less->input(1) != div->input(1)) return std::nullopt;
  const onnx::NodeProto* random = SoleProducer(index, less->input(0));
  if (!IsOp(random, "RandomUniformLike") || FloatAttribute(*random, "low", 0) != 0 ||
      FloatAttribute(*random, "high", 1) != 1) {
    return std::nullopt;
  }
  const std::optional<float> keep = ScalarInitializer(index, less->input(1));
  const std::string& x = mul.input(1 - side);
  if (!keep || !(*keep > 0 && *keep <= 1) ||
      !SameShape(index.Type(random->input(0)), index.Type(x)) ||
      index.Type(div->output(0)) == nullptr ||
      index.Type(div->output(0))->tensor_type().elem_type() !=
          index.Type(x)->tensor_type().elem_type()) {
    return std::nullopt;
  }
  return Chain{&mul, x, *keep, {random, less, cast, div}};
}

}  // namespace

absl::StatusOr<PassResult> LiftDropout::Run(ModelContext& context) {
  absl::StatusOr<std::shared_ptr<const GraphIndex>> index = context.Index();
  if (!index.ok()) return index.status();
  onnx::GraphProto& graph = *context.model.mutable_graph();
  std::vector<Chain> chains;
  for (const onnx::NodeProto& node : graph.node()) {
    if (!IsOp(&node, "Mul") || node.input_size() != 2) continue;
    for (int side : {1, 0}) {
      if (std::optional<Chain> chain = ChainAt(**index, node, side)) {
        chains.push_back(*chain);
        break;
      }
    }
  }
  if (chains.empty()) return false;
  NameAllocator names(context.model);
  absl::flat_hash_set<const onnx::NodeProto*> removed;
  absl::flat_hash_set<std::string> gone;  // values no longer computed, and unread constants
  absl::flat_hash_set<std::string> maybe_unread;
  std::vector<std::pair<int, onnx::NodeProto>> dropouts;  // by the Mul's position
  for (const Chain& chain : chains) {
    for (const onnx::NodeProto* node : chain.mask) {
      removed.insert(node);
      gone.insert(node->output(0));
      for (const std::string& input : node->input()) maybe_unread.insert(input);
    }
    const std::string ratio = names.Fresh(chain.mul->output(0) + ".ratio");
    const std::string training = names.Fresh(chain.mul->output(0) + ".training_mode");
    // 1 - k in double, rounded once: PyTorch's p for the k = 1 - p the exporter wrote.
    onnx::TensorProto& ratio_value = *graph.add_initializer() =
        ScalarTensor(onnx::TensorProto::FLOAT, 1.0 - double{chain.keep});
    ratio_value.set_name(ratio);
    onnx::TensorProto& training_value = *graph.add_initializer() =
        ScalarTensor(onnx::TensorProto::BOOL, 1);
    training_value.set_name(training);
    onnx::NodeProto dropout;
    dropout.set_name(chain.mul->name());
    dropout.set_op_type("Dropout");
    dropout.add_input(chain.x);
    dropout.add_input(ratio);
    dropout.add_input(training);
    dropout.add_output(chain.mul->output(0));
    dropouts.emplace_back((*index)->NodeIndex(*chain.mul), std::move(dropout));
  }
  for (auto& [position, dropout] : dropouts) *graph.mutable_node(position) = std::move(dropout);
  // RemoveIf reads node i before it moves anything from i on: the pointers still match.
  RemoveIf(*graph.mutable_node(), [&](int i) { return removed.contains(&graph.node(i)); });
  absl::flat_hash_set<std::string> read;
  for (const onnx::NodeProto& node : graph.node())
    read.insert(node.input().begin(), node.input().end());
  for (const onnx::ValueInfoProto& output : graph.output()) read.insert(output.name());
  RemoveIf(*graph.mutable_initializer(), [&](int i) {
    const std::string& name = graph.initializer(i).name();
    if (!maybe_unread.contains(name) || read.contains(name)) return false;
    gone.insert(name);
    return true;
  });
  RemoveIf(*graph.mutable_value_info(),
           [&](int i) { return gone.contains(graph.value_info(i).name()); });
  return true;
}

}  // namespace ampc
