// Reverse-mode differentiation of a forward graph, from a scalar loss to its trainable parameters,
// with the per-op rules of passes/autodiff/gradient_rules.h (docs/training.md, "Ops with
// gradients").
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/graph/graph_index.h"
#include "passes/graph/name_allocator.h"

namespace ampc {

// Float initializers of `forward` that reach `loss` through inputs with a gradient (so not, e.g.,
// BatchNormalization's running statistics) and whose names do not fully match `freeze_regex`
// (RE2; empty: none frozen), in initializer order. Fails when `loss` is no value of the graph.
absl::StatusOr<std::vector<std::string>> TrainableParameters(const GraphIndex& forward,
                                                             const std::string& loss,
                                                             const std::string& freeze_regex);

struct GradientRequest {
  std::string loss;                     // a value of the forward graph
  std::string seed;                     // the gradient of `loss`: a value of loss's shape and type
  std::vector<std::string> parameters;  // values to differentiate with respect to
  // The default-domain opset, for the function bodies of ops without a gradient rule (0: the
  // earliest version of each such op that covers the node's inputs and attributes).
  int opset = 0;
};

// `graph` starts with a copy of `forward`'s nodes, in the same order (`forward` indexes the
// original, typed by infer-types). Appends the backward nodes to `graph` and returns the gradient
// of each parameter, in order: a value of the parameter's shape and type, summed over all its
// uses. Rules may add optional outputs to the copied forward nodes (log_prob, Mean, Indices). An
// op without a rule on a path from a parameter to the loss is differentiated through its schema's
// function body (recomputed in the backward); without one, it is an error naming the node.
absl::StatusOr<std::vector<std::string>> AppendGradients(onnx::GraphProto& graph,
                                                         const GraphIndex& forward,
                                                         const GradientRequest& request,
                                                         NameAllocator& names);

}  // namespace ampc
