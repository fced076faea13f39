// The gradient of each op, as data: op type -> a function that emits the backward nodes of one
// forward node, plus the float inputs that have no gradient (constants of the op).
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "passes/autodiff/gradient_builder.h"

namespace ampc {

// What a rule sees of one forward node: its inputs and outputs, the gradients of its outputs,
// which inputs need a gradient, and where to put them.
class GradientContext {
 public:
  GradientContext(onnx::NodeProto& node, std::string description, GradientBuilder& builder,
                  std::vector<std::string> output_grads, std::vector<bool> needs_grad)
      : node_(node),
        description_(std::move(description)),
        builder_(builder),
        output_grads_(std::move(output_grads)),
        needs_grad_(std::move(needs_grad)),
        input_grads_(needs_grad_.size()) {}

  const onnx::NodeProto& node() const { return node_; }
  GradientBuilder& b() { return builder_; }
  int num_inputs() const { return node_.input_size(); }
  // "" for an absent optional input.
  const std::string& input(int slot) const;
  const std::string& output(int slot) const;
  // The gradient of output `slot`; "" when no path from it reaches the loss.
  const std::string& dy(int slot = 0) const;
  bool NeedsGrad(int slot) const {
    return slot < static_cast<int>(needs_grad_.size()) && needs_grad_[slot];
  }
  // Records the gradient of input `slot` (ignored when that input needs none).
  void SetGrad(int slot, std::string grad);
  // Sets the gradient of input `slot` to `grad` summed to the input's shape (`grad` has the dims
  // `grad_dims`, a broadcast of the input's).
  absl::Status SetReducedGrad(int slot, const std::string& grad, const std::vector<Dim>& grad_dims);
  const std::vector<std::string>& input_grads() const { return input_grads_; }

  // The forward node's output `slot`, added under a fresh name when the node lacks it (the
  // backward of some ops reads an optional output of the forward: log_prob, Mean, Indices).
  std::string EnsureOutput(int slot, std::string_view hint);
  // Sets the forward node's training_mode attribute to 1 (BatchNormalization, Dropout).
  void SetTrainingMode();

  // Attributes of the forward node, with defaults.
  int64_t Int(std::string_view name, int64_t fallback) const;
  float Float(std::string_view name, float fallback) const;
  std::string String(std::string_view name, std::string fallback) const;
  std::vector<int64_t> Ints(std::string_view name) const;
  // The forward node's attributes named `names` (those it has), to copy onto a gradient node.
  std::vector<onnx::AttributeProto> CopyAttributes(const std::vector<std::string>& names) const;
  // The dims of forward value `value`; an error naming the node when the rank is unknown.
  absl::StatusOr<std::vector<Dim>> DimsOf(const std::string& value) const;

  // InvalidArgument "<node description>: <message>".
  absl::Status Error(std::string_view message) const;

 private:
  onnx::NodeProto& node_;
  std::string description_;
  GradientBuilder& builder_;
  std::vector<std::string> output_grads_;
  std::vector<bool> needs_grad_;
  std::vector<std::string> input_grads_;
};

struct GradientRule {
  std::function<absl::Status(GradientContext&)> emit;
  std::vector<int> constant_inputs;  // float inputs that get no gradient (e.g. running stats)
};

// The rule for a default-domain op; null when there is none.
const GradientRule* FindGradientRule(std::string_view op_type);

// Tables filled by gradient_rules_{math,tensor,nn,einsum}.cc.
using GradientRuleTable = std::vector<std::pair<std::string, GradientRule>>;
void AddMathGradientRules(GradientRuleTable& table);
void AddTensorGradientRules(GradientRuleTable& table);
void AddNnGradientRules(GradientRuleTable& table);
void AddEinsumGradientRules(GradientRuleTable& table);

}  // namespace ampc
