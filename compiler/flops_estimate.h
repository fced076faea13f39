// An estimate of the arithmetic in a compiled model's heavy ops, for the report's "share of FLOPs
// in the low dtype": MatMul, Gemm, Conv, ConvTranspose and Einsum, from static shapes only.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace ampc {

// Static shapes (every dim a known value) of the values of every graph of a model, by name:
// graph inputs and outputs, value_info, initializers and Constant outputs. With `wanted`, only
// those names (a shape per value costs a copy and a map entry, and few values are operands of
// the ops sized here).
class StaticShapes {
 public:
  explicit StaticShapes(const onnx::ModelProto& model,
                        const absl::flat_hash_set<std::string>* wanted = nullptr);
  const std::vector<int64_t>* Find(const std::string& name) const;

 private:
  void AddGraph(const onnx::GraphProto& graph);
  void AddType(const onnx::ValueInfoProto& value);
  bool Wanted(const std::string& name) const;
  const absl::flat_hash_set<std::string>* wanted_;
  absl::flat_hash_map<std::string, std::vector<int64_t>> shapes_;
};

// Whether the estimate covers the node's op (the five above, default domain).
bool CountsFlops(const onnx::NodeProto& node);
// 2 x multiply-accumulates of one node; nullopt when an operand's shape is not static.
std::optional<double> NodeFlops(const onnx::NodeProto& node, const StaticShapes& shapes);

struct FlopsEstimate {
  double low = 0;         // in nodes that compute in the plan's low dtype
  double total = 0;       // in every node the estimate covers and could size
  int64_t estimated = 0;  // nodes sized
  int64_t unknown = 0;    // nodes the estimate covers but could not size (no static shapes)
};

struct FlopsNode {
  const onnx::NodeProto* node;  // a node of the model
  bool low;                     // computes in the low dtype
};
FlopsEstimate EstimateFlops(const onnx::ModelProto& model, const std::vector<FlopsNode>& nodes);

}  // namespace ampc
