// What an op's schema allows, per input and output slot: the autocast pass asks this (as XLA's
// FloatSupport) instead of guessing from op names. "Main" is the type variable of the node's first
// float input, when that input is FP32: the one the node's compute dtype changes; every other
// variable keeps its dtype.
#pragma once

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace ampc {

// Opset version per domain ("" for the default domain).
using OpsetVersions = absl::flat_hash_map<std::string, int>;
OpsetVersions OpsetsOf(const onnx::ModelProto& model);

// The default-domain opset a Cast is created at: the model's, or kCastOpsetWhenMissing when the
// model imports none (insert-casts then adds that import).
constexpr int kCastOpsetWhenMissing = 13;
int CastOpset(const OpsetVersions& opsets);
// Whether Cast at that opset converts float32 to and from `dtype` (bfloat16 needs Cast-13).
bool CastSupports(const OpsetVersions& opsets, int dtype);

class FloatSupport {
 public:
  // `input_types` are the node's input elem types in the input model (0 for an absent input).
  FloatSupport(const onnx::NodeProto& node, const OpsetVersions& opsets,
               const std::vector<int>& input_types);

  const onnx::OpSchema* schema() const { return schema_; }
  // The main type variable; empty when the node has no FP32 input bound to a type variable.
  const std::string& main_var() const { return main_var_; }
  // Whether the node's first float input bound to a type variable is FP16 or BF16 (then there is
  // no main variable: the node computes low as the model states).
  bool main_is_low() const { return main_is_low_; }
  // Whether the main variable admits elem type `dtype`.
  bool MainAdmits(int dtype) const;
  bool InputFollowsMain(int slot) const;
  bool OutputFollowsMain(int slot) const;
  // "Conv-11" for messages.
  std::string SchemaName() const;

 private:
  const onnx::OpSchema::FormalParameter* Formal(
      const std::vector<onnx::OpSchema::FormalParameter>& formals, int slot) const;

  const onnx::OpSchema* schema_ = nullptr;
  std::string main_var_;
  bool main_is_low_ = false;
  const onnx::DataTypeSet* main_types_ = nullptr;
};

}  // namespace ampc
