// The output check in linear time (docs/architecture.md, "verify"): instead of a second
// whole-model check_model and strict InferShapes, the nodes ampc changed get exactly what those
// would give them (ONNX's check_node, the schema's type and shape inference with its type
// constraints, the inferred types against the declared ones), and the whole graph gets the
// structural checks that are linear anyway (topological order, one producer per value, every
// read defined, initializers against their declared types).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

namespace ampc {

class GraphIndex;

// What each value of the main graph was once strict inference accepted the model: its declared
// type and the op that produced it, as an opaque key. Taken by infer-types from the index of the
// main graph.
class TypeSnapshot {
 public:
  explicit TypeSnapshot(const GraphIndex& index);
  // Whether `value` (produced by `producer`, null for a graph input or initializer) still has
  // the type and producer it had; false for a value the snapshot does not know.
  bool Unchanged(const std::string& value, const onnx::TypeProto* type,
                 const onnx::NodeProto* producer) const;

 private:
  absl::flat_hash_map<std::string, uint64_t>
      keys_;  // a hash of the serialized type and producer op
};

// Whether VerifyChanges can judge `model`: one graph without subgraphs, no model-local functions
// and no training_info. Elsewhere the full check runs.
bool CanVerifyChanges(const onnx::ModelProto& model);

// Fails with ONNX's message, prefixed by `where`, where check_model and strict inference would
// fail on what changed since `before`. Requires CanVerifyChanges(model).
absl::Status VerifyChanges(const onnx::ModelProto& model, const TypeSnapshot& before,
                           const std::string& where);

}  // namespace ampc
