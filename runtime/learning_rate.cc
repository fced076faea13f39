#include "runtime/learning_rate.h"

#include "runtime/conv_fusion.h"  // kRuntimeDomain
#include "runtime/lr_schedule.h"

namespace ampc {
namespace {

constexpr char kLearningRate[] = "ampc.lr";
constexpr char kStep[] = "ampc.step";

// A float of rank 0, or of unknown rank (fed as a scalar).
bool IsFloatScalar(const onnx::ValueInfoProto& value) {
  const onnx::TypeProto::Tensor& type = value.type().tensor_type();
  return type.elem_type() == onnx::TensorProto::FLOAT &&
         (!type.has_shape() || type.shape().dim_size() == 0);
}

}  // namespace

bool ComputeLearningRate(onnx::GraphProto& graph) {
  onnx::ValueInfoProto* input = nullptr;
  for (onnx::ValueInfoProto& value : *graph.mutable_input()) {
    if (value.name() == kLearningRate && IsFloatScalar(value)) input = &value;
  }
  if (input == nullptr) return false;
  *graph.add_output() = *input;
  input->set_name(kRateInput);
  auto* type = input->mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx::TensorProto::DOUBLE);
  type->mutable_shape()->add_dim()->set_dim_value(kRateWords);
  onnx::NodeProto node;
  node.set_op_type("LearningRate");
  node.set_domain(kRuntimeDomain);
  node.set_name("ampc.lr/schedule");
  node.add_input(kRateInput);
  node.add_input(kStep);
  node.add_output(kLearningRate);
  graph.mutable_node()->Add(std::move(node));
  // First: every reader of the rate comes after it.
  for (int i = graph.node_size() - 1; i > 0; --i) graph.mutable_node()->SwapElements(i, i - 1);
  return true;
}

}  // namespace ampc
