#include "passes/autodiff/gradient_rules.h"

#include <onnx/defs/attr_proto_util.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace ampc {
namespace {

const std::string& Empty() {
  static const std::string* empty = new std::string;
  return *empty;
}

const onnx::AttributeProto* FindAttribute(const onnx::NodeProto& node, std::string_view name) {
  for (const onnx::AttributeProto& attribute : node.attribute()) {
    if (attribute.name() == name) return &attribute;
  }
  return nullptr;
}

}  // namespace

const std::string& GradientContext::input(int slot) const {
  return slot < node_.input_size() ? node_.input(slot) : Empty();
}

const std::string& GradientContext::output(int slot) const {
  return slot < node_.output_size() ? node_.output(slot) : Empty();
}

const std::string& GradientContext::dy(int slot) const {
  return slot < static_cast<int>(output_grads_.size()) ? output_grads_[slot] : Empty();
}

void GradientContext::SetGrad(int slot, std::string grad) {
  if (NeedsGrad(slot)) input_grads_[slot] = std::move(grad);
}

absl::Status GradientContext::SetReducedGrad(int slot, const std::string& grad,
                                             const std::vector<Dim>& grad_dims) {
  if (!NeedsGrad(slot)) return absl::OkStatus();
  absl::StatusOr<std::string> reduced = builder_.ReduceTo(grad, grad_dims, input(slot));
  if (!reduced.ok()) return Error(std::string(reduced.status().message()));
  SetGrad(slot, *std::move(reduced));
  return absl::OkStatus();
}

std::string GradientContext::EnsureOutput(int slot, std::string_view hint) {
  while (node_.output_size() <= slot) node_.add_output("");
  if (node_.output(slot).empty()) {
    node_.set_output(slot, builder_.Fresh(absl::StrCat(node_.output(0), ".", std::string(hint))));
  }
  return node_.output(slot);
}

void GradientContext::SetTrainingMode() {
  for (onnx::AttributeProto& attribute : *node_.mutable_attribute()) {
    if (attribute.name() == "training_mode") {
      attribute.set_i(1);
      return;
    }
  }
  *node_.add_attribute() = onnx::MakeAttribute("training_mode", int64_t{1});
}

int64_t GradientContext::Int(std::string_view name, int64_t fallback) const {
  const onnx::AttributeProto* attribute = FindAttribute(node_, name);
  return attribute != nullptr ? attribute->i() : fallback;
}

float GradientContext::Float(std::string_view name, float fallback) const {
  const onnx::AttributeProto* attribute = FindAttribute(node_, name);
  return attribute != nullptr ? attribute->f() : fallback;
}

std::string GradientContext::String(std::string_view name, std::string fallback) const {
  const onnx::AttributeProto* attribute = FindAttribute(node_, name);
  return attribute != nullptr ? attribute->s() : fallback;
}

std::vector<int64_t> GradientContext::Ints(std::string_view name) const {
  const onnx::AttributeProto* attribute = FindAttribute(node_, name);
  if (attribute == nullptr) return {};
  return {attribute->ints().begin(), attribute->ints().end()};
}

std::vector<onnx::AttributeProto> GradientContext::CopyAttributes(
    const std::vector<std::string>& names) const {
  std::vector<onnx::AttributeProto> copied;
  for (const std::string& name : names) {
    if (const onnx::AttributeProto* attribute = FindAttribute(node_, name)) {
      copied.push_back(*attribute);
    }
  }
  return copied;
}

absl::StatusOr<std::vector<Dim>> GradientContext::DimsOf(const std::string& value) const {
  std::optional<std::vector<Dim>> dims = builder_.Dims(value);
  if (!dims.has_value()) return Error(absl::StrCat("the rank of '", value, "' is unknown"));
  return *std::move(dims);
}

absl::Status GradientContext::Error(std::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(description_, ": ", std::string(message)));
}

const GradientRule* FindGradientRule(std::string_view op_type) {
  static const auto* rules = [] {
    GradientRuleTable table;
    AddMathGradientRules(table);
    AddTensorGradientRules(table);
    AddNnGradientRules(table);
    AddEinsumGradientRules(table);
    auto* map = new absl::flat_hash_map<std::string, GradientRule>;
    for (auto& [op, rule] : table) map->emplace(op, std::move(rule));
    return map;
  }();
  auto it = rules->find(std::string(op_type));
  return it == rules->end() ? nullptr : &it->second;
}

}  // namespace ampc
