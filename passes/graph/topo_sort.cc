#include "passes/graph/topo_sort.h"

#include <functional>
#include <queue>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "passes/graph/graph_index.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

using Names = std::vector<std::string_view>;

// An edge: the node waits for `value`, produced by node `producer`.
struct Dep {
  int producer;
  std::string_view value;
};

// Dependencies of every node, flattened: node i's are deps[begin[i] .. begin[i + 1]).
struct DepGraph {
  std::vector<Dep> deps;
  std::vector<int> begin;
};

// Sorts `graph` and its subgraphs; fills `free` (when not null) with FreeNames.
absl::Status SortGraph(onnx::GraphProto& graph, bool& changed, Names* free);

absl::StatusOr<absl::flat_hash_map<std::string_view, int>> Producers(
    const onnx::GraphProto& graph) {
  absl::flat_hash_map<std::string_view, int> producers;
  size_t outputs = 0;
  for (const onnx::NodeProto& node : graph.node()) outputs += node.output_size();
  producers.reserve(outputs);
  for (int i = 0; i < graph.node_size(); ++i) {
    for (const std::string& output : graph.node(i).output()) {
      if (output.empty()) continue;
      auto [it, inserted] = producers.try_emplace(output, i);
      if (inserted) continue;
      return absl::InvalidArgumentError(
          absl::StrCat("graph '", graph.name(), "': value '", output, "' is produced twice, by ",
                       DescribeNode(graph.node(it->second), it->second), " and by ",
                       DescribeNode(graph.node(i), i)));
    }
  }
  return producers;
}

// Sorts the subgraphs of every node; returns, per node, the names its subgraphs read from outside.
absl::StatusOr<std::vector<Names>> SortSubgraphs(onnx::GraphProto& graph, bool& changed) {
  std::vector<Names> implicit(graph.node_size());
  for (int i = 0; i < graph.node_size(); ++i) {
    absl::flat_hash_set<std::string_view> seen;
    for (onnx::AttributeProto& attribute : *graph.mutable_node(i)->mutable_attribute()) {
      std::vector<onnx::GraphProto*> subgraphs;
      if (attribute.has_g()) subgraphs.push_back(attribute.mutable_g());
      for (onnx::GraphProto& subgraph : *attribute.mutable_graphs()) subgraphs.push_back(&subgraph);
      for (onnx::GraphProto* subgraph : subgraphs) {
        Names free;
        AMPC_RETURN_IF_ERROR(SortGraph(*subgraph, changed, &free));
        for (std::string_view name : free) {
          if (seen.insert(name).second) implicit[i].push_back(name);
        }
      }
    }
  }
  return implicit;
}

DepGraph Dependencies(const onnx::GraphProto& graph,
                      const absl::flat_hash_map<std::string_view, int>& producers,
                      const std::vector<Names>& implicit) {
  DepGraph result;
  result.begin.reserve(graph.node_size() + 1);
  size_t inputs = 0;
  for (const onnx::NodeProto& node : graph.node()) inputs += node.input_size();
  result.deps.reserve(inputs);
  auto add = [&](std::string_view value) {
    if (auto it = producers.find(value); it != producers.end()) {
      result.deps.push_back({it->second, value});
    }
  };
  for (int i = 0; i < graph.node_size(); ++i) {
    result.begin.push_back(static_cast<int>(result.deps.size()));
    for (const std::string& input : graph.node(i).input()) add(input);
    for (std::string_view value : implicit[i]) add(value);
  }
  result.begin.push_back(static_cast<int>(result.deps.size()));
  return result;
}

// Kahn's algorithm with a min-heap on the original position, so the sort is stable. Returns fewer
// than all nodes when there is a cycle.
std::vector<int> KahnOrder(const DepGraph& graph) {
  const int n = static_cast<int>(graph.begin.size()) - 1;
  std::vector<int> waiting(n), users_begin(n + 1, 0), users(graph.deps.size());
  for (const Dep& dep : graph.deps) ++users_begin[dep.producer + 1];
  for (int i = 0; i < n; ++i) users_begin[i + 1] += users_begin[i];
  std::vector<int> fill(users_begin.begin(), users_begin.end() - 1);
  for (int i = 0; i < n; ++i) {
    waiting[i] = graph.begin[i + 1] - graph.begin[i];
    for (int d = graph.begin[i]; d < graph.begin[i + 1]; ++d)
      users[fill[graph.deps[d].producer]++] = i;
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i) {
    if (waiting[i] == 0) ready.push(i);
  }
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    int node = ready.top();
    ready.pop();
    order.push_back(node);
    for (int u = users_begin[node]; u < users_begin[node + 1]; ++u) {
      if (--waiting[users[u]] == 0) ready.push(users[u]);
    }
  }
  return order;
}

std::string ShortName(const onnx::NodeProto& node, int index) {
  if (node.name().empty()) return absl::StrCat("node #", index);
  return absl::StrCat("node '", node.name(), "'");
}

// Walks from an unsorted node along unsorted dependencies until a node repeats: that node is on
// a cycle.
absl::Status CycleError(const onnx::GraphProto& graph, const DepGraph& deps,
                        const std::vector<int>& order) {
  std::vector<bool> sorted(graph.node_size(), false), visited(graph.node_size(), false);
  for (int node : order) sorted[node] = true;
  int node = 0;
  while (sorted[node]) ++node;
  std::vector<const Dep*> waits_for(graph.node_size(), nullptr);
  while (!visited[node]) {
    visited[node] = true;
    for (int d = deps.begin[node]; d < deps.begin[node + 1]; ++d) {
      if (!sorted[deps.deps[d].producer]) {
        waits_for[node] = &deps.deps[d];
        break;
      }
    }
    node = waits_for[node]->producer;
  }
  const Dep& dep = *waits_for[node];
  std::string message =
      absl::StrCat("graph '", graph.name(), "' has a cycle: ", DescribeNode(graph.node(node), node),
                   " waits for value '", std::string(dep.value), "', produced by ");
  if (dep.producer == node) return absl::InvalidArgumentError(absl::StrCat(message, "itself"));
  return absl::InvalidArgumentError(
      absl::StrCat(message, DescribeNode(graph.node(dep.producer), dep.producer),
                   ", which depends on ", ShortName(graph.node(node), node)));
}

// Puts the node at order[k] into position k with pointer swaps (no message copies).
bool ApplyOrder(onnx::GraphProto& graph, const std::vector<int>& order) {
  const int n = graph.node_size();
  std::vector<int> where(n), at(n);  // original node -> current position, and back
  for (int i = 0; i < n; ++i) where[i] = at[i] = i;
  bool moved = false;
  for (int k = 0; k < n; ++k) {
    int node = order[k], position = where[node];
    if (position == k) continue;
    moved = true;
    graph.mutable_node()->SwapElements(k, position);
    at[position] = at[k];
    where[at[position]] = position;
    at[k] = node;
    where[node] = k;
  }
  return moved;
}

// Names the graph reads (nodes, nested subgraphs, outputs) but does not define, first use first.
Names FreeNames(const onnx::GraphProto& graph,
                const absl::flat_hash_map<std::string_view, int>& producers,
                const std::vector<Names>& implicit) {
  absl::flat_hash_set<std::string_view> defined;
  for (const onnx::ValueInfoProto& input : graph.input()) defined.insert(input.name());
  for (const onnx::TensorProto& initializer : graph.initializer()) {
    defined.insert(initializer.name());
  }
  for (const onnx::SparseTensorProto& sparse : graph.sparse_initializer()) {
    defined.insert(sparse.values().name());
  }
  Names free;
  absl::flat_hash_set<std::string_view> seen;
  auto read = [&](std::string_view name) {
    if (name.empty() || defined.contains(name) || producers.contains(name)) return;
    if (seen.insert(name).second) free.push_back(name);
  };
  for (int i = 0; i < graph.node_size(); ++i) {
    for (const std::string& input : graph.node(i).input()) read(input);
    for (std::string_view name : implicit[i]) read(name);
  }
  for (const onnx::ValueInfoProto& output : graph.output()) read(output.name());
  return free;
}

absl::Status SortGraph(onnx::GraphProto& graph, bool& changed, Names* free) {
  absl::StatusOr<absl::flat_hash_map<std::string_view, int>> producers = Producers(graph);
  if (!producers.ok()) return producers.status();
  absl::StatusOr<std::vector<Names>> implicit = SortSubgraphs(graph, changed);
  if (!implicit.ok()) return implicit.status();
  DepGraph deps = Dependencies(graph, *producers, *implicit);
  std::vector<int> order = KahnOrder(deps);
  if (static_cast<int>(order.size()) < graph.node_size()) {
    return CycleError(graph, deps, order);
  }
  // Computed before reordering: `implicit` is indexed by the original positions. The top-level
  // graph has no enclosing scope to report them to (two hash lookups per input at 1M nodes).
  if (free != nullptr) *free = FreeNames(graph, *producers, *implicit);
  if (ApplyOrder(graph, order)) changed = true;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<bool> TopologicalSort(onnx::GraphProto& graph) {
  bool changed = false;
  AMPC_RETURN_IF_ERROR(SortGraph(graph, changed, /*free=*/nullptr));
  return changed;
}

}  // namespace ampc
