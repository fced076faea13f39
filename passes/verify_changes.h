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
#include "absl/status/statusor.h"

namespace ampc {

class GraphIndex;

// What each value of the main graph was once strict inference accepted the model, as two hashes:
// its element type, and everything else inference reads (shape, producer op, the producer's
// inputs and attributes); and the model's IR version and opset imports. Taken by infer-types.
class TypeSnapshot {
 public:
  TypeSnapshot(const onnx::ModelProto& model, const GraphIndex& index);
  struct Keys {
    uint64_t element, structure;
  };
  enum class Change { kNone, kElementType, kStructure };
  // How `value` (produced by `producer`, null for a graph input or initializer) differs from the
  // snapshot; kStructure for a value the snapshot does not know.
  Change Compare(const std::string& value, const onnx::TypeProto* type,
                 const onnx::NodeProto* producer) const;
  bool SameModelFields(const onnx::ModelProto& model) const;

 private:
  std::string model_fields_;
  absl::flat_hash_map<std::string, Keys> keys_;
};

// Whether VerifyChanges can judge `model`: one graph without subgraphs, no model-local functions
// and no training_info. Elsewhere the full check runs.
bool CanVerifyChanges(const onnx::ModelProto& model);

// Fails with ONNX's message, prefixed by `where`, where check_model and strict inference would
// fail on what changed since `before`. Requires CanVerifyChanges(model). False (nothing decided)
// where it cannot judge alone: the IR version or opsets changed, or a changed value, or an input
// of a changed node, has no declared type; the caller then runs the full check.
absl::StatusOr<bool> VerifyChanges(const onnx::ModelProto& model, const TypeSnapshot& before,
                                   const std::string& where);

}  // namespace ampc
