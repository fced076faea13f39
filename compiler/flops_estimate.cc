#include "compiler/flops_estimate.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_split.h"
#include "passes/opset/standard_op_versions.h"

namespace ampc {
namespace {

double Elements(const std::vector<int64_t>& shape) {
  double n = 1;
  for (int64_t d : shape) n *= static_cast<double>(d);
  return n;
}

// Elements of shape[from:].
double ElementsFrom(const std::vector<int64_t>& shape, size_t from) {
  return Elements(std::vector<int64_t>(shape.begin() + std::min(from, shape.size()), shape.end()));
}

const onnx::AttributeProto* Attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

const std::vector<int64_t>* Operand(const onnx::NodeProto& node, int slot,
                                    const StaticShapes& shapes) {
  return slot < node.input_size() ? shapes.Find(node.input(slot)) : nullptr;
}

const std::vector<int64_t>* Result(const onnx::NodeProto& node, const StaticShapes& shapes) {
  return node.output_size() > 0 ? shapes.Find(node.output(0)) : nullptr;
}

// Y = A x B: every element of Y sums K products, K the last dim of A.
std::optional<double> MatMulFlops(const onnx::NodeProto& node, const StaticShapes& shapes) {
  const auto* a = Operand(node, 0, shapes);
  const auto* y = Result(node, shapes);
  if (a == nullptr || y == nullptr || a->empty()) return std::nullopt;
  return 2 * Elements(*y) * static_cast<double>(a->back());
}

std::optional<double> GemmFlops(const onnx::NodeProto& node, const StaticShapes& shapes) {
  const auto* a = Operand(node, 0, shapes);
  const auto* y = Result(node, shapes);
  if (a == nullptr || y == nullptr || a->size() != 2) return std::nullopt;
  const onnx::AttributeProto* trans_a = Attribute(node, "transA");
  const int64_t k = trans_a != nullptr && trans_a->i() != 0 ? (*a)[0] : (*a)[1];
  return 2 * Elements(*y) * static_cast<double>(k);
}

// Conv: every output element sums C/group x kernel products, the size of W[0]. ConvTranspose:
// every input element scatters into M/group x kernel outputs, again the size of W[0].
std::optional<double> ConvFlops(const onnx::NodeProto& node, const StaticShapes& shapes,
                                bool transpose) {
  const auto* w = Operand(node, 1, shapes);
  const auto* per = transpose ? Operand(node, 0, shapes) : Result(node, shapes);
  if (w == nullptr || per == nullptr || w->empty()) return std::nullopt;
  return 2 * Elements(*per) * ElementsFrom(*w, 1);
}

// Product of the sizes of every index letter (and of the broadcast "..." dims): each
// combination is one multiply-accumulate of the operands' elements.
std::optional<double> EinsumFlops(const onnx::NodeProto& node, const StaticShapes& shapes) {
  const onnx::AttributeProto* attribute = Attribute(node, "equation");
  if (attribute == nullptr) return std::nullopt;
  std::string equation = attribute->s();
  equation.erase(std::remove(equation.begin(), equation.end(), ' '), equation.end());
  const std::string lhs = equation.substr(0, equation.find("->"));
  const std::vector<std::string> terms = absl::StrSplit(lhs, ',');
  if (static_cast<int>(terms.size()) != node.input_size()) return std::nullopt;
  std::map<char, int64_t> sizes;
  double ellipsis = 1;
  for (size_t i = 0; i < terms.size(); ++i) {
    const auto* shape = Operand(node, static_cast<int>(i), shapes);
    if (shape == nullptr) return std::nullopt;
    const size_t dots = terms[i].find("...");
    const std::string prefix = terms[i].substr(0, dots);
    const std::string suffix = dots == std::string::npos ? "" : terms[i].substr(dots + 3);
    const size_t letters = prefix.size() + suffix.size();
    const size_t rank = shape->size();
    if (letters > rank || (dots == std::string::npos && letters != rank)) return std::nullopt;
    for (size_t j = 0; j < prefix.size(); ++j) {
      sizes[prefix[j]] = std::max(sizes[prefix[j]], (*shape)[j]);
    }
    for (size_t j = 0; j < suffix.size(); ++j) {
      sizes[suffix[j]] = std::max(sizes[suffix[j]], (*shape)[rank - suffix.size() + j]);
    }
    const std::vector<int64_t> middle(shape->begin() + prefix.size(), shape->end() - suffix.size());
    ellipsis = std::max(ellipsis, Elements(middle));
  }
  double flops = terms.size() > 1 ? 2 * ellipsis : ellipsis;
  for (const auto& [letter, size] : sizes) flops *= static_cast<double>(size);
  return flops;
}

}  // namespace

StaticShapes::StaticShapes(const onnx::ModelProto& model,
                           const absl::flat_hash_set<std::string>* wanted)
    : wanted_(wanted) {
  AddGraph(model.graph());
}

bool StaticShapes::Wanted(const std::string& name) const {
  return wanted_ == nullptr || wanted_->contains(name);
}

const std::vector<int64_t>* StaticShapes::Find(const std::string& name) const {
  auto it = shapes_.find(name);
  return it == shapes_.end() ? nullptr : &it->second;
}

void StaticShapes::AddType(const onnx::ValueInfoProto& value) {
  if (!value.type().has_tensor_type() || !value.type().tensor_type().has_shape() ||
      !Wanted(value.name())) {
    return;
  }
  std::vector<int64_t> dims;
  for (const auto& dim : value.type().tensor_type().shape().dim()) {
    if (!dim.has_dim_value() || dim.dim_value() < 0) return;
    dims.push_back(dim.dim_value());
  }
  shapes_.try_emplace(value.name(), std::move(dims));
}

void StaticShapes::AddGraph(const onnx::GraphProto& graph) {
  for (const auto& value : graph.input()) AddType(value);
  for (const auto& value : graph.output()) AddType(value);
  for (const auto& value : graph.value_info()) AddType(value);
  for (const onnx::TensorProto& init : graph.initializer()) {
    if (Wanted(init.name()))
      shapes_.try_emplace(init.name(), init.dims().begin(), init.dims().end());
  }
  for (const onnx::NodeProto& node : graph.node()) {
    const onnx::AttributeProto* value = Attribute(node, "value");
    if (node.op_type() == "Constant" && value != nullptr && value->has_t() &&
        node.output_size() == 1 && Wanted(node.output(0))) {
      shapes_.try_emplace(node.output(0), value->t().dims().begin(), value->t().dims().end());
    }
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g()) AddGraph(a.g());
      for (const onnx::GraphProto& sub : a.graphs()) AddGraph(sub);
    }
  }
}

bool CountsFlops(const onnx::NodeProto& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx" && !IsAmpcVersion(node)) return false;
  const std::string& op = node.op_type();
  return op == "MatMul" || op == "Gemm" || op == "Conv" || op == "ConvTranspose" || op == "Einsum";
}

std::optional<double> NodeFlops(const onnx::NodeProto& node, const StaticShapes& shapes) {
  if (!CountsFlops(node)) return std::nullopt;
  const std::string& op = node.op_type();
  if (op == "MatMul") return MatMulFlops(node, shapes);
  if (op == "Gemm") return GemmFlops(node, shapes);
  if (op == "Einsum") return EinsumFlops(node, shapes);
  return ConvFlops(node, shapes, op == "ConvTranspose");
}

FlopsEstimate EstimateFlops(const onnx::ModelProto& model, const std::vector<FlopsNode>& nodes) {
  absl::flat_hash_set<std::string> operands;
  for (const FlopsNode& n : nodes) {
    if (!CountsFlops(*n.node)) continue;
    operands.insert(n.node->input().begin(), n.node->input().end());
    operands.insert(n.node->output().begin(), n.node->output().end());
  }
  const StaticShapes shapes(model, &operands);
  FlopsEstimate estimate;
  for (const FlopsNode& n : nodes) {
    if (!CountsFlops(*n.node)) continue;
    const std::optional<double> flops = NodeFlops(*n.node, shapes);
    if (!flops.has_value()) {
      ++estimate.unknown;
      continue;
    }
    ++estimate.estimated;
    estimate.total += *flops;
    if (n.low) estimate.low += *flops;
  }
  return estimate;
}

}  // namespace ampc
