#include "runtime/core/attributes.h"

#include "absl/strings/str_cat.h"

namespace ampc {

const onnx::AttributeProto* Attributes::Find(const std::string& name) const {
  for (const onnx::AttributeProto& attribute : node_.attribute()) {
    if (attribute.name() == name) return &attribute;
  }
  return nullptr;
}

int64_t Attributes::Int(const std::string& name, int64_t fallback) const {
  const onnx::AttributeProto* a = Find(name);
  return a != nullptr ? a->i() : fallback;
}

float Attributes::Float(const std::string& name, float fallback) const {
  const onnx::AttributeProto* a = Find(name);
  return a != nullptr ? a->f() : fallback;
}

std::string Attributes::String(const std::string& name, const std::string& fallback) const {
  const onnx::AttributeProto* a = Find(name);
  return a != nullptr ? a->s() : fallback;
}

std::vector<int64_t> Attributes::Ints(const std::string& name,
                                      std::vector<int64_t> fallback) const {
  const onnx::AttributeProto* a = Find(name);
  return a != nullptr ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : fallback;
}

std::vector<float> Attributes::Floats(const std::string& name, std::vector<float> fallback) const {
  const onnx::AttributeProto* a = Find(name);
  return a != nullptr ? std::vector<float>(a->floats().begin(), a->floats().end()) : fallback;
}

std::vector<std::string> Attributes::Strings(const std::string& name) const {
  const onnx::AttributeProto* a = Find(name);
  if (a == nullptr) return {};
  return {a->strings().begin(), a->strings().end()};
}

absl::Status Attributes::Missing(const std::string& name) const {
  return absl::InvalidArgumentError(
      absl::StrCat(NodeLabel(node_), ": required attribute '", name, "' is missing"));
}

absl::StatusOr<int64_t> Attributes::RequiredInt(const std::string& name) const {
  const onnx::AttributeProto* a = Find(name);
  if (a == nullptr) return Missing(name);
  return a->i();
}

absl::StatusOr<const onnx::TensorProto*> Attributes::RequiredTensor(const std::string& name) const {
  const onnx::AttributeProto* a = Find(name);
  if (a == nullptr || !a->has_t()) return Missing(name);
  return &a->t();
}

absl::StatusOr<const onnx::GraphProto*> Attributes::RequiredGraph(const std::string& name) const {
  const onnx::AttributeProto* a = Find(name);
  if (a == nullptr || !a->has_g()) return Missing(name);
  return &a->g();
}

std::string NodeLabel(const onnx::NodeProto& node) {
  const std::string op =
      node.domain().empty() ? node.op_type() : absl::StrCat(node.domain(), ".", node.op_type());
  if (!node.name().empty()) return absl::StrCat("node '", node.name(), "' (", op, ")");
  if (node.output_size() > 0) return absl::StrCat(op, " node producing '", node.output(0), "'");
  return absl::StrCat(op, " node");
}

}  // namespace ampc
