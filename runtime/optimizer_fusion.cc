#include "runtime/optimizer_fusion.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "runtime/conv_fusion.h"

namespace ampc {
namespace {

constexpr int kScalars = 3;  // skip, lr, and step (Adam) or first (SGD)

// The fused op of an optimizer node, or null.
const char* FusedOp(const onnx::NodeProto& node) {
  if (node.domain() != "ai.ampc" || node.input_size() <= kScalars) return nullptr;
  if (node.op_type() == "Adam") return "MultiAdam";
  if (node.op_type() == "SGD") return "MultiSGD";
  return nullptr;
}

// Nodes fuse when this is equal: the op, the arity, the scalar inputs and the attributes, in
// name order.
std::string GroupKey(const onnx::NodeProto& node) {
  std::string key = node.op_type() + '\n' + std::to_string(node.input_size()) + '\n' +
                    std::to_string(node.output_size()) + '\n';
  for (int k = 0; k < kScalars; ++k) key += node.input(k) + '\n';
  std::vector<const onnx::AttributeProto*> attributes;
  for (const onnx::AttributeProto& a : node.attribute()) attributes.push_back(&a);
  std::sort(attributes.begin(), attributes.end(),
            [](const auto* x, const auto* y) { return x->name() < y->name(); });
  for (const onnx::AttributeProto* a : attributes) key += a->SerializeAsString() + '\n';
  return key;
}

// No node strictly between the group's first and last member reads a member's output.
bool Movable(const onnx::GraphProto& graph, const std::vector<int>& members) {
  absl::flat_hash_set<std::string> outputs;
  for (int i : members) {
    for (const std::string& out : graph.node(i).output()) outputs.insert(out);
  }
  const absl::flat_hash_set<int> in_group(members.begin(), members.end());
  for (int i = members.front() + 1; i < members.back(); ++i) {
    if (in_group.contains(i)) continue;
    for (const std::string& in : graph.node(i).input()) {
      if (outputs.contains(in)) return false;
    }
  }
  return true;
}

onnx::NodeProto Fused(const onnx::GraphProto& graph, const std::vector<int>& members) {
  const onnx::NodeProto& first = graph.node(members.front());
  onnx::NodeProto fused;
  fused.set_op_type(FusedOp(first));
  fused.set_domain(kRuntimeDomain);
  fused.set_name(first.name() + "/multi");
  for (int k = 0; k < kScalars; ++k) fused.add_input(first.input(k));
  for (int i : members) {
    const onnx::NodeProto& node = graph.node(i);
    for (int k = kScalars; k < node.input_size(); ++k) fused.add_input(node.input(k));
    for (const std::string& out : node.output()) fused.add_output(out);
  }
  *fused.mutable_attribute() = first.attribute();
  return fused;
}

}  // namespace

int FuseOptimizers(onnx::GraphProto& graph) {
  std::map<std::string, std::vector<int>> groups;
  for (int i = 0; i < graph.node_size(); ++i) {
    if (FusedOp(graph.node(i)) != nullptr) groups[GroupKey(graph.node(i))].push_back(i);
  }
  // The fused node replaces each group's last member; the others go.
  std::vector<bool> drop(graph.node_size(), false);
  std::map<int, onnx::NodeProto> replacement;
  int removed = 0;
  for (const auto& [key, members] : groups) {
    if (members.size() < 2 || !Movable(graph, members)) continue;
    replacement[members.back()] = Fused(graph, members);
    for (size_t m = 0; m + 1 < members.size(); ++m) drop[members[m]] = true;
    removed += static_cast<int>(members.size()) - 1;
  }
  if (removed == 0) return 0;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int i = 0; i < graph.node_size(); ++i) {
    if (drop[i]) continue;
    auto it = replacement.find(i);
    *nodes.Add() = it != replacement.end() ? std::move(it->second) : graph.node(i);
  }
  graph.mutable_node()->Swap(&nodes);
  return removed;
}

int FuseCheckUnscaleClip(onnx::GraphProto& graph) {
  auto find = [&graph](const char* op) {
    int found = -1;
    for (int i = 0; i < graph.node_size(); ++i) {
      const onnx::NodeProto& node = graph.node(i);
      if (node.domain() != "ai.ampc" || node.op_type() != op) continue;
      if (found >= 0) return -2;  // more than one
      found = i;
    }
    return found;
  };
  const int check = find("CheckFinite"), unscale = find("UnscaleClip");
  if (check < 0 || unscale < check) return 0;
  const onnx::NodeProto& c = graph.node(check);
  const onnx::NodeProto& u = graph.node(unscale);
  if (c.output_size() != 1 || u.input_size() != c.input_size() + 1) return 0;
  for (int k = 0; k < c.input_size(); ++k) {
    if (c.input(k) != u.input(k + 1)) return 0;
  }
  // The scale must not come from CheckFinite's place or later (a graph input, an initializer or
  // a value of the enclosing graph, as the step's `ampc.scale`, are all there before).
  for (int i = check; i < graph.node_size(); ++i) {
    for (const std::string& out : graph.node(i).output()) {
      if (out == u.input(0)) return 0;
    }
  }
  onnx::NodeProto fused;
  fused.set_op_type("CheckUnscaleClip");
  fused.set_domain(kRuntimeDomain);
  fused.set_name(c.name() + "/unscale");
  *fused.mutable_input() = u.input();
  fused.add_output(c.output(0));
  for (const std::string& out : u.output()) fused.add_output(out);
  *fused.mutable_attribute() = u.attribute();
  *graph.mutable_node(check) = std::move(fused);
  graph.mutable_node()->DeleteSubrange(unscale, 1);
  return 1;
}

}  // namespace ampc
