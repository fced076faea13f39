// Topological order of a graph's nodes, taking subgraph outer-scope reads as edges.
#pragma once

#include <onnx/onnx_pb.h>

#include "absl/status/statusor.h"

namespace ampc {

// Reorders graph.node() topologically, stable: among ready nodes the one first in the given order
// goes first, so an already valid order is kept. Subgraphs are sorted too. Names produced by no
// node of the graph (inputs, initializers, outer scope, unknown) impose no order. Returns whether
// anything moved. A cycle, or a value produced by two nodes, is an InvalidArgument error naming a
// node and value on it. O((nodes + edges) log nodes).
absl::StatusOr<bool> TopologicalSort(onnx::GraphProto& graph);

}  // namespace ampc
