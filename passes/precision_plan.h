// What the autocast pass decided, handed to insert-casts and to the report (`ampc explain`).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "passes/autocast_policy.h"

namespace ampc {

struct AutocastOptions {
  int low_dtype = onnx::TensorProto::FLOAT16;  // or BFLOAT16
  bool low_io = false;                         // float graph inputs and outputs become low
  bool clamp = false;                          // clamp constants to ±65504 instead of keeping FP32
  std::string block_node_regex;                // nodes (by name) forced to FP32
  std::string lower_node_regex;                // nodes (by name) forced to the low dtype
  bool ampc_versions = true;  // ops without the low dtype in their schema run as ai.ampc versions
  AutocastPolicy policy = AutocastPolicy::Defaults(onnx::TensorProto::FLOAT16);
};

struct NodePlan {
  std::string name;  // node name, or "#index" in its graph when unnamed
  std::string op_type;
  int dtype = 0;              // the node's compute dtype; 0: not a candidate, its dtypes are kept
  bool ampc_version = false;  // runs as its ai.ampc version (passes/opset/standard_op_versions.h)
  int64_t zero_bias = 0;      // > 0: the ai.ampc.Conv gets a zero bias of that many channels
  Category category = Category::kKeep;
  std::string rule;                // what decided, in words
  std::vector<int> input_dtypes;   // wanted elem type per input slot; 0: as the value comes
  std::vector<int> output_dtypes;  // elem type of each output after the pass
  int casts_added = 0;             // filled by insert-casts
};

struct PrecisionPlan {
  int low_dtype = onnx::TensorProto::FLOAT16;
  bool low_io = false;
  bool clamp = false;
  // Every node of the model, subgraphs included, in the order they were planned, keyed by the
  // node's address: the one key of the plan, stable for the whole compilation because no pass
  // after autocast copies a node (they add nodes, and remove them with RemoveIf,
  // passes/graph/remove_if.h, which keeps the others where they are). The report, explain and
  // the passes after autocast all read the plan through it.
  std::vector<const onnx::NodeProto*> order;
  absl::flat_hash_map<const onnx::NodeProto*, NodePlan> nodes;
  // Filled by insert-casts.
  int64_t casts_added = 0;
  int64_t constants_converted = 0;
  int64_t values_clamped = 0;
  int64_t values_flushed_to_zero = 0;
};

// "fp16", "bf16", "fp32", "fp64", or the ONNX type name.
std::string DtypeName(int elem_type);

}  // namespace ampc
