// Fresh value/node names that collide with nothing in the model.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace ampc {

class NameAllocator {
 public:
  // Seeded with every name in the model: graph and subgraph values, node names, initializers,
  // value_info, functions (their names, values and nodes) and training_info graphs.
  explicit NameAllocator(const onnx::ModelProto& model);

  // `hint` if unused, else `hint_1`, `hint_2`, ...; the result is reserved. An empty hint is
  // taken as "v", since the empty name means "no value" in ONNX.
  std::string Fresh(std::string_view hint);
  bool Contains(std::string_view name) const;
  // Marks `name` as used (a name created without Fresh).
  void Reserve(std::string_view name);

 private:
  void AddGraph(const onnx::GraphProto& graph);
  void AddNode(const onnx::NodeProto& node);
  void AddFunction(const onnx::FunctionProto& function);

  absl::flat_hash_set<std::string> used_;
  // The next suffix to try for each hint, so repeated hints cost O(1) amortized.
  absl::flat_hash_map<std::string, int> next_suffix_;
};

}  // namespace ampc
