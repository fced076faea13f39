#include "passes/graph/function_calls.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ampc {
namespace {

using Callees = std::vector<std::vector<int>>;

std::string Key(const std::string& domain, const std::string& name) {
  return absl::StrCat(domain, ".", name);
}

void AddCalls(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes,
              const absl::flat_hash_map<std::string, int>& ids, std::vector<int>& out) {
  for (const onnx::NodeProto& node : nodes) {
    if (auto it = ids.find(Key(node.domain(), node.op_type())); it != ids.end()) {
      out.push_back(it->second);
    }
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g()) AddCalls(a.g().node(), ids, out);
      for (const onnx::GraphProto& g : a.graphs()) AddCalls(g.node(), ids, out);
    }
  }
}

// The nodes `nodes` become once every call is expanded (subgraphs included), given each
// function's expanded size in `sizes` (-1: not known yet, which a caller rules out); saturates.
uint64_t ExpandedSize(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes,
                      const absl::flat_hash_map<std::string, int>& ids,
                      const std::vector<uint64_t>& sizes) {
  uint64_t total = 0;
  for (const onnx::NodeProto& node : nodes) {
    auto it = ids.find(Key(node.domain(), node.op_type()));
    total = std::min(kMaxExpandedNodes + 1, total + (it == ids.end() ? 1 : sizes[it->second]));
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g())
        total = std::min(kMaxExpandedNodes + 1, total + ExpandedSize(a.g().node(), ids, sizes));
      for (const onnx::GraphProto& g : a.graphs()) {
        total = std::min(kMaxExpandedNodes + 1, total + ExpandedSize(g.node(), ids, sizes));
      }
    }
  }
  return total;
}

absl::Status TooLarge(absl::string_view what, uint64_t size) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, " expands to ", size > kMaxExpandedNodes ? "more than " : "",
                   std::min(size, kMaxExpandedNodes),
                   " nodes once its function calls are expanded; ampc expands at most ",
                   kMaxExpandedNodes, " (docs/errors.md)"));
}

}  // namespace

absl::Status CheckFunctionExpansion(const onnx::ModelProto& model) {
  const int n = model.functions_size();
  if (n == 0) return absl::OkStatus();
  absl::flat_hash_map<std::string, int> ids;
  for (int i = 0; i < n; ++i)
    ids.emplace(Key(model.functions(i).domain(), model.functions(i).name()), i);
  Callees callees(n);
  for (int i = 0; i < n; ++i) AddCalls(model.functions(i).node(), ids, callees[i]);
  // Depth-first with an explicit stack; a call to a function still on the stack closes a cycle.
  enum Color { kNew, kOnStack, kDone };
  std::vector<Color> color(n, kNew);
  std::vector<uint64_t> sizes(n, 0);
  for (int root = 0; root < n; ++root) {
    if (color[root] != kNew) continue;
    std::vector<std::pair<int, size_t>> stack = {{root, 0}};
    color[root] = kOnStack;
    while (!stack.empty()) {
      auto& [f, next] = stack.back();
      if (next == callees[f].size()) {  // every callee is done: its size is known
        color[f] = kDone;
        const onnx::FunctionProto& fn = model.functions(f);
        sizes[f] = ExpandedSize(fn.node(), ids, sizes);
        if (sizes[f] > kMaxExpandedNodes) {
          return TooLarge(absl::StrCat("function '", Key(fn.domain(), fn.name()), "'"), sizes[f]);
        }
        stack.pop_back();
        continue;
      }
      const int callee = callees[f][next++];
      if (color[callee] == kNew) {
        color[callee] = kOnStack;
        stack.emplace_back(callee, 0);
        continue;
      }
      if (color[callee] != kOnStack) continue;
      std::vector<std::string> cycle;
      size_t start = 0;
      while (stack[start].first != callee) ++start;
      for (size_t i = start; i < stack.size(); ++i) {
        const onnx::FunctionProto& fn = model.functions(stack[i].first);
        cycle.push_back(Key(fn.domain(), fn.name()));
      }
      cycle.push_back(cycle.front());
      return absl::InvalidArgumentError(
          absl::StrCat("function '", cycle.front(), "' calls itself (",
                       absl::StrJoin(cycle, " -> "), "); recursive functions cannot be expanded"));
    }
  }
  if (const uint64_t size = ExpandedSize(model.graph().node(), ids, sizes);
      size > kMaxExpandedNodes) {
    return TooLarge("the graph", size);
  }
  return absl::OkStatus();
}

}  // namespace ampc
