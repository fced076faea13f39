#include "runtime/conv_fusion.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/attributes.h"
#include "runtime/core/tensor_proto.h"

namespace ampc {
namespace {

bool IsOnnxOp(const onnx::NodeProto& node, const char* op) {
  return node.op_type() == op && (node.domain().empty() || node.domain() == "ai.onnx");
}

// What the rewrites need to know about the graph, kept up to date as they change it.
struct GraphFacts {
  absl::flat_hash_map<std::string, int> reads;     // node inputs, subgraph reads, graph outputs
  absl::flat_hash_map<std::string, int> producer;  // value -> index of the node writing it
  absl::flat_hash_map<std::string, int> constant;  // FP32 initializer no input overrides -> index
  absl::flat_hash_set<std::string> names;          // every name in the graph, for fresh ones
  std::vector<bool> removed;                       // per node
};

GraphFacts Collect(const onnx::GraphProto& graph) {
  GraphFacts facts;
  const auto read = [&](const std::string& name) {
    if (!name.empty()) ++facts.reads[name];
  };
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    for (const std::string& input : node.input()) read(input);
    for (const onnx::AttributeProto& attribute : node.attribute()) {
      if (attribute.has_g()) {
        for (const std::string& name : FreeVariables(attribute.g())) read(name);
      }
      for (const auto& g : attribute.graphs()) {
        for (const std::string& name : FreeVariables(g)) read(name);
      }
    }
    for (const std::string& output : node.output()) {
      facts.producer[output] = i;
      facts.names.insert(output);
    }
  }
  for (const auto& output : graph.output()) read(output.name());
  absl::flat_hash_set<std::string> inputs;
  for (const auto& input : graph.input()) inputs.insert(input.name());
  for (int i = 0; i < graph.initializer_size(); ++i) {
    const onnx::TensorProto& init = graph.initializer(i);
    facts.names.insert(init.name());
    if (init.data_type() == onnx::TensorProto::FLOAT && !inputs.contains(init.name())) {
      facts.constant[init.name()] = i;
    }
  }
  facts.names.insert(inputs.begin(), inputs.end());
  facts.removed.assign(graph.node_size(), false);
  return facts;
}

// The node that alone reads `value`, written by a node `op`: its index, or -1.
int SoleProducer(const GraphFacts& facts, const onnx::GraphProto& graph, const std::string& value,
                 const char* op) {
  auto it = facts.producer.find(value);
  auto reads = facts.reads.find(value);
  if (it == facts.producer.end() || reads == facts.reads.end() || reads->second != 1) return -1;
  return IsOnnxOp(graph.node(it->second), op) && !facts.removed[it->second] ? it->second : -1;
}

std::string FreshName(GraphFacts& facts, const std::string& base) {
  std::string name = base;
  for (int i = 1; facts.names.contains(name); ++i) name = absl::StrCat(base, "_", i);
  facts.names.insert(name);
  return name;
}

// The values of constant initializer `name` with `count` elements, or nothing.
std::vector<float> ConstantValues(const GraphFacts& facts, const onnx::GraphProto& graph,
                                  const std::string& name, int64_t count) {
  auto it = facts.constant.find(name);
  if (it == facts.constant.end()) return {};
  absl::StatusOr<Tensor> tensor = TensorFromProto(graph.initializer(it->second));
  if (!tensor.ok() || tensor->size() != count || count == 0) return {};
  const float* data = tensor->data<float>();
  return std::vector<float>(data, data + count);
}

// Adds a float initializer with a fresh name based on `base`; returns the name.
std::string AddInitializer(onnx::GraphProto& graph, GraphFacts& facts, const std::string& base,
                           const Shape& shape, const std::vector<double>& values) {
  Tensor tensor = Tensor::Host(DType::kFloat, shape);
  float* data = tensor.data<float>();
  for (size_t i = 0; i < values.size(); ++i) data[i] = static_cast<float>(values[i]);
  const std::string name = FreshName(facts, base);
  *graph.add_initializer() = TensorToProto(tensor, name);
  facts.reads[name] = 1;
  return name;
}

// Folds BatchNormalization node `b` into the Conv writing its input, when the rules allow.
bool FoldBatchNorm(onnx::GraphProto& graph, GraphFacts& facts, int b) {
  const onnx::NodeProto& bn = graph.node(b);
  const Attributes attributes(bn);
  if (bn.input_size() != 5 || attributes.Int("training_mode", 0) != 0) return false;
  for (int i = 1; i < bn.output_size(); ++i) {
    if (!bn.output(i).empty()) return false;
  }
  const int c = SoleProducer(facts, graph, bn.input(0), "Conv");
  if (c < 0) return false;
  onnx::NodeProto& conv = *graph.mutable_node(c);
  if (conv.input_size() < 2 || !facts.constant.contains(conv.input(1))) return false;
  const absl::StatusOr<Tensor> read_w =
      TensorFromProto(graph.initializer(facts.constant.at(conv.input(1))));
  if (!read_w.ok() || read_w->rank() < 1 || read_w->size() == 0) return false;
  const Tensor& w = *read_w;
  const int64_t m = w.dim(0), per_channel = w.size() / m;
  std::vector<float> params[4];  // scale, bias, mean, var
  for (int i = 0; i < 4; ++i) {
    params[i] = ConstantValues(facts, graph, bn.input(i + 1), m);
    if (params[i].empty()) return false;
  }
  const bool has_bias = conv.input_size() > 2 && !conv.input(2).empty();
  const std::vector<float> bias =
      has_bias ? ConstantValues(facts, graph, conv.input(2), m) : std::vector<float>(m, 0.0f);
  if (bias.empty()) return false;
  const double epsilon = attributes.Float("epsilon", 1e-5f);
  std::vector<double> new_w(static_cast<size_t>(w.size())), new_b(static_cast<size_t>(m));
  for (int64_t k = 0; k < m; ++k) {
    const double s = params[0][k] / std::sqrt(static_cast<double>(params[3][k]) + epsilon);
    for (int64_t j = 0; j < per_channel; ++j) {
      new_w[k * per_channel + j] = w.data<float>()[k * per_channel + j] * s;
    }
    new_b[k] = (static_cast<double>(bias[k]) - params[2][k]) * s + params[1][k];
  }
  for (int i = 1; i < conv.input_size(); ++i) {
    if (!conv.input(i).empty()) --facts.reads[conv.input(i)];
  }
  for (int i = 1; i < 5; ++i) --facts.reads[bn.input(i)];
  conv.set_input(1, AddInitializer(graph, facts, conv.input(1) + "/bn_folded", w.shape(), new_w));
  const std::string b_name = AddInitializer(graph, facts, bn.input(2) + "/bn_folded", {m}, new_b);
  if (conv.input_size() > 2) {
    conv.set_input(2, b_name);
  } else {
    conv.add_input(b_name);
  }
  conv.set_output(0, bn.output(0));
  facts.producer[bn.output(0)] = c;
  facts.removed[b] = true;
  return true;
}

// Turns the FP32 Conv writing Relu node `r`'s input into FusedConv <activation = "Relu">.
bool FuseRelu(onnx::GraphProto& graph, GraphFacts& facts, const TypeMap& types, int r) {
  const onnx::NodeProto& relu = graph.node(r);
  const int c = SoleProducer(facts, graph, relu.input(0), "Conv");
  auto type = types.find(relu.input(0));
  if (c < 0 || type == types.end() || type->second != DType::kFloat) return false;
  onnx::NodeProto& conv = *graph.mutable_node(c);
  conv.set_op_type("FusedConv");
  conv.set_domain(kRuntimeDomain);
  onnx::AttributeProto* activation = conv.add_attribute();
  activation->set_name("activation");
  activation->set_type(onnx::AttributeProto::STRING);
  activation->set_s("Relu");
  conv.set_output(0, relu.output(0));
  facts.producer[relu.output(0)] = c;
  facts.removed[r] = true;
  return true;
}

// Drops the removed nodes, and the initializers that were constant and are no longer read.
void Compact(onnx::GraphProto& graph, const GraphFacts& facts) {
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int i = 0; i < graph.node_size(); ++i) {
    if (!facts.removed[i]) nodes.Add()->Swap(graph.mutable_node(i));
  }
  graph.mutable_node()->Swap(&nodes);
  google::protobuf::RepeatedPtrField<onnx::TensorProto> initializers;
  for (onnx::TensorProto& init : *graph.mutable_initializer()) {
    auto reads = facts.reads.find(init.name());
    const bool unread = reads == facts.reads.end() || reads->second <= 0;
    if (!(unread && facts.constant.contains(init.name()))) initializers.Add()->Swap(&init);
  }
  graph.mutable_initializer()->Swap(&initializers);
}

}  // namespace

int FuseConvs(onnx::GraphProto& graph, const TypeMap& types) {
  GraphFacts facts = Collect(graph);
  int removed = 0;
  for (int i = 0; i < graph.node_size(); ++i) {
    if (IsOnnxOp(graph.node(i), "BatchNormalization") && FoldBatchNorm(graph, facts, i)) ++removed;
  }
  for (int i = 0; i < graph.node_size(); ++i) {
    if (!facts.removed[i] && IsOnnxOp(graph.node(i), "Relu") && graph.node(i).input_size() == 1 &&
        FuseRelu(graph, facts, types, i)) {
      ++removed;
    }
  }
  if (removed > 0) Compact(graph, facts);
  return removed;
}

}  // namespace ampc
