// How the parts of the training step (loss_check, gradients, loss_scaling, optimizer) append
// their nodes to the algorithm graph: fresh node and value names from one NameAllocator, so the
// order in which the parts run fixes every name.
#pragma once

#include <onnx/defs/attr_proto_util.h>
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "passes/graph/name_allocator.h"

namespace ampc {

using Attributes = std::vector<onnx::AttributeProto>;

// Appends the nodes of the step after the forward copy.
class StepWriter {
 public:
  StepWriter(onnx::GraphProto& graph, NameAllocator& names) : graph_(graph), names_(names) {}

  NameAllocator& names() { return names_; }

  void Node(const std::string& op, const std::vector<std::string>& inputs,
            const std::vector<std::string>& outputs, Attributes attributes = {},
            const std::string& domain = "") {
    onnx::NodeProto& node = *graph_.add_node();
    node.set_name(names_.Fresh(absl::StrCat("/ampc/", op)));
    node.set_op_type(op);
    if (!domain.empty()) node.set_domain(domain);
    for (const std::string& input : inputs) node.add_input(input);
    for (const std::string& output : outputs) node.add_output(output);
    for (onnx::AttributeProto& attribute : attributes) *node.add_attribute() = std::move(attribute);
  }
  // A one-output node whose output is named after `hint`.
  std::string Op(const std::string& op, const std::vector<std::string>& inputs,
                 const std::string& hint, Attributes attributes = {}) {
    std::string out = names_.Fresh(hint);
    Node(op, inputs, {out}, std::move(attributes));
    return out;
  }
  std::string Int(int64_t value) {
    return Op("Constant", {}, "ampc.const", {onnx::MakeAttribute("value_int", value)});
  }
  std::string Float(float value) {
    return Op("Constant", {}, "ampc.const", {onnx::MakeAttribute("value_float", value)});
  }

 private:
  onnx::GraphProto& graph_;
  NameAllocator& names_;
};

}  // namespace ampc
