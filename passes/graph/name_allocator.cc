#include "passes/graph/name_allocator.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ampc {
namespace {

// absl::string_view is not std::string_view in this Abseil build; its string hash takes the former.
absl::string_view AbslView(std::string_view s) { return {s.data(), s.size()}; }

constexpr size_t kBlockSize = size_t{1} << 20;

}  // namespace

NameAllocator::NameAllocator(const onnx::ModelProto& model) {
  // Mostly one node name and one output per node: rehashing millions of strings as the set
  // grows costs more than this estimate.
  const onnx::GraphProto& graph = model.graph();
  used_.reserve(2 * static_cast<size_t>(graph.node_size()) + graph.input_size() +
                graph.initializer_size());
  AddGraph(model.graph());
  for (const onnx::FunctionProto& function : model.functions()) AddFunction(function);
  for (const onnx::TrainingInfoProto& training : model.training_info()) {
    AddGraph(training.initialization());
    AddGraph(training.algorithm());
    for (const auto* bindings : {&training.initialization_binding(), &training.update_binding()}) {
      for (const onnx::StringStringEntryProto& binding : *bindings) {
        Reserve(binding.key());
        Reserve(binding.value());
      }
    }
  }
}

void NameAllocator::AddGraph(const onnx::GraphProto& graph) {
  Reserve(graph.name());
  for (const auto* infos : {&graph.input(), &graph.output(), &graph.value_info()}) {
    for (const onnx::ValueInfoProto& info : *infos) Reserve(info.name());
  }
  for (const onnx::TensorProto& initializer : graph.initializer()) Reserve(initializer.name());
  for (const onnx::SparseTensorProto& sparse : graph.sparse_initializer()) {
    Reserve(sparse.values().name());
    Reserve(sparse.indices().name());
  }
  for (const onnx::NodeProto& node : graph.node()) AddNode(node);
}

void NameAllocator::AddNode(const onnx::NodeProto& node) {
  Reserve(node.name());
  for (const std::string& input : node.input()) Reserve(input);
  for (const std::string& output : node.output()) Reserve(output);
  for (const onnx::AttributeProto& attribute : node.attribute()) {
    if (attribute.has_g()) AddGraph(attribute.g());
    for (const onnx::GraphProto& graph : attribute.graphs()) AddGraph(graph);
  }
}

void NameAllocator::AddFunction(const onnx::FunctionProto& function) {
  Reserve(function.name());
  for (const std::string& input : function.input()) Reserve(input);
  for (const std::string& output : function.output()) Reserve(output);
  for (const onnx::NodeProto& node : function.node()) AddNode(node);
}

std::string_view NameAllocator::Store(std::string_view name) {
  if (name.size() > block_left_) {
    const size_t size = std::max(kBlockSize, name.size());
    blocks_.emplace_back(new char[size]);
    block_next_ = blocks_.back().get();
    block_left_ = size;
  }
  char* copy = block_next_;
  std::memcpy(copy, name.data(), name.size());
  block_next_ += name.size();
  block_left_ -= name.size();
  return {copy, name.size()};
}

bool NameAllocator::Insert(std::string_view name) {
  bool inserted = false;
  used_.lazy_emplace(name, [&](const auto& construct) {
    inserted = true;
    construct(Store(name));
  });
  return inserted;
}

void NameAllocator::Reserve(std::string_view name) {
  if (!name.empty()) Insert(name);
}

bool NameAllocator::Contains(std::string_view name) const { return used_.contains(name); }

std::string NameAllocator::Fresh(std::string_view hint) {
  if (hint.empty()) hint = "v";
  if (Insert(hint)) return std::string(hint);
  int& suffix = next_suffix_.try_emplace(AbslView(hint), 1).first->second;
  std::string name = absl::StrCat(AbslView(hint), "_", suffix++);
  while (!Insert(name)) name = absl::StrCat(AbslView(hint), "_", suffix++);
  return name;
}

}  // namespace ampc
