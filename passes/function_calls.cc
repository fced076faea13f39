#include "passes/function_calls.h"

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

}  // namespace

absl::Status CheckFunctionsDoNotRecurse(const onnx::ModelProto& model) {
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
  for (int root = 0; root < n; ++root) {
    if (color[root] != kNew) continue;
    std::vector<std::pair<int, size_t>> stack = {{root, 0}};
    color[root] = kOnStack;
    while (!stack.empty()) {
      auto& [f, next] = stack.back();
      if (next == callees[f].size()) {
        color[f] = kDone;
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
  return absl::OkStatus();
}

}  // namespace ampc
