// An op with no gradient rule but a schema function body (RMSNormalization, RotaryEmbedding,
// Attention, ...) is differentiated through its body: the body's nodes are recomputed in the
// backward, typed, and differentiated with the rules of the ops they use.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/graph/graph_index.h"
#include "passes/graph/name_allocator.h"

namespace ampc {

// A copy of `node`'s function body: nodes with fresh names that read the node's inputs and write
// `outputs` (fresh names for the node's outputs, "" where it has none), typed by inference.
struct ExpandedBody {
  onnx::ModelProto model;
  std::vector<std::string> outputs;
};

// The body of `node` (a default-domain op) for its attributes and input types: at `opset`, or
// with `opset` 0 at the earliest version of the op whose inputs and attributes cover the node's.
// NotFound when the op has no function body; InvalidArgument when it cannot be built or typed.
absl::StatusOr<ExpandedBody> ExpandFunctionBody(const onnx::NodeProto& node,
                                                const GraphIndex& forward, int opset,
                                                NameAllocator& names);

}  // namespace ampc
