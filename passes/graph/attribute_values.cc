#include "passes/graph/attribute_values.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "passes/graph/graph_index.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

struct AttributeMinimum {
  absl::string_view ops;  // space-separated op types of the default domain
  absl::string_view attribute;
  int64_t minimum;
};

constexpr absl::string_view kConvAndPool =
    " Conv ConvInteger QLinearConv ConvTranspose AveragePool MaxPool LpPool MaxUnpool ";

constexpr AttributeMinimum kMinimums[] = {
    {kConvAndPool, "strides", 1},
    {kConvAndPool, "dilations", 1},
    {kConvAndPool, "kernel_shape", 1},
    {" Conv ConvInteger QLinearConv ConvTranspose ", "group", 1},
    {" SpaceToDepth DepthToSpace ", "blocksize", 1},
};

bool Lists(absl::string_view ops, const std::string& op) {
  return absl::StrContains(ops, absl::StrCat(" ", op, " "));
}

absl::Status CheckNode(const onnx::NodeProto& node, int index) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") return absl::OkStatus();
  for (const onnx::AttributeProto& attribute : node.attribute()) {
    for (const AttributeMinimum& rule : kMinimums) {
      if (attribute.name() != rule.attribute || !Lists(rule.ops, node.op_type())) continue;
      std::vector<int64_t> values(attribute.ints().begin(), attribute.ints().end());
      if (attribute.has_i()) values.push_back(attribute.i());
      for (int64_t value : values) {
        if (value >= rule.minimum) continue;
        return absl::InvalidArgumentError(absl::StrCat(DescribeNode(node, index), ": attribute '",
                                                       rule.attribute, "' holds ", value,
                                                       "; it must be at least ", rule.minimum));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckNodes(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes) {
  for (int i = 0; i < nodes.size(); ++i) {
    AMPC_RETURN_IF_ERROR(CheckNode(nodes[i], i));
    for (const onnx::AttributeProto& attribute : nodes[i].attribute()) {
      if (attribute.has_g()) {
        AMPC_RETURN_IF_ERROR(CheckNodes(attribute.g().node()));
      }
      for (const onnx::GraphProto& graph : attribute.graphs()) {
        AMPC_RETURN_IF_ERROR(CheckNodes(graph.node()));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckAttributeValues(const onnx::ModelProto& model) {
  AMPC_RETURN_IF_ERROR(CheckNodes(model.graph().node()));
  for (const onnx::FunctionProto& function : model.functions()) {
    if (absl::Status s = CheckNodes(function.node()); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("function '", function.domain(), ".",
                                                 function.name(), "': ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace ampc
