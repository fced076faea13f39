// Typed access to a node's attributes, with defaults and errors that name the node.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ampc {

class Attributes {
 public:
  explicit Attributes(const onnx::NodeProto& node) : node_(node) {}

  const onnx::AttributeProto* Find(const std::string& name) const;
  bool Has(const std::string& name) const { return Find(name) != nullptr; }

  int64_t Int(const std::string& name, int64_t fallback) const;
  float Float(const std::string& name, float fallback) const;
  std::string String(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> Ints(const std::string& name, std::vector<int64_t> fallback = {}) const;
  std::vector<float> Floats(const std::string& name, std::vector<float> fallback = {}) const;
  std::vector<std::string> Strings(const std::string& name) const;

  // Required attributes: InvalidArgument naming node and attribute when missing.
  absl::StatusOr<int64_t> RequiredInt(const std::string& name) const;
  absl::StatusOr<const onnx::TensorProto*> RequiredTensor(const std::string& name) const;
  absl::StatusOr<const onnx::GraphProto*> RequiredGraph(const std::string& name) const;

 private:
  absl::Status Missing(const std::string& name) const;
  const onnx::NodeProto& node_;
};

// "node 'name' (Op)", or "Op node producing 'value'" when the node has no name: for messages.
std::string NodeLabel(const onnx::NodeProto& node);

}  // namespace ampc
