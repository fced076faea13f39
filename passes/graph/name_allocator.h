// Fresh value/node names that collide with nothing in the model.
#pragma once

#include <onnx/onnx_pb.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

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
  // Adds `name` (a copy) to used_; false if it was there already.
  bool Insert(std::string_view name);
  std::string_view Store(std::string_view name);

  // Views of copies held in blocks_: at 1M nodes, a std::string per name cost two million
  // allocations (and frees) and most of seeding.
  absl::flat_hash_set<std::string_view> used_;
  std::vector<std::unique_ptr<char[]>> blocks_;
  char* block_next_ = nullptr;
  size_t block_left_ = 0;
  // The next suffix to try for each hint, so repeated hints cost O(1) amortized.
  absl::flat_hash_map<std::string, int> next_suffix_;
};

}  // namespace ampc
