#include "passes/training/training_state.h"

#include <onnx/defs/attr_proto_util.h>

#include "absl/strings/str_cat.h"
#include "passes/graph/tensor_data.h"

namespace ampc {

std::string NextName(const std::string& state) { return absl::StrCat(state, ".ampc.next"); }

std::vector<std::string> MomentNames(const ParamGroup& group, const std::string& p) {
  if (UsesAdam(group)) return {p + ".ampc.m", p + ".ampc.v"};
  if (group.optimizer == TrainingOptions::Optimizer::kMomentum) return {p + ".ampc.momentum"};
  return {};
}

std::string AccumulatorName(const std::string& p) { return p + ".ampc.acc"; }

const std::string* MetadataValue(const onnx::ModelProto& model, const std::string& key) {
  for (const onnx::StringStringEntryProto& entry : model.metadata_props()) {
    if (entry.key() == key) return &entry.value();
  }
  return nullptr;
}

std::vector<int64_t> StaticDims(const onnx::TypeProto& type) {
  std::vector<int64_t> dims;
  for (const auto& dim : type.tensor_type().shape().dim()) dims.push_back(dim.dim_value());
  return dims;
}

absl::StatusOr<std::vector<StateItem>> StepState(const GraphIndex& index,
                                                 const std::vector<std::string>& params,
                                                 const std::vector<ParamGroup>& groups,
                                                 const TrainingOptions& options, float init_scale) {
  constexpr int kFloat = onnx::TensorProto::FLOAT;
  constexpr int kInt64 = onnx::TensorProto::INT64;
  std::vector<StateItem> state;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string& p = params[i];
    const onnx::TypeProto* type = index.Type(p);
    const std::vector<int64_t> dims = StaticDims(*type);
    if (type->tensor_type().elem_type() != kFloat) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", p, "' is not FP32"));
    }
    for (const std::string& moment : MomentNames(groups[i], p))
      state.push_back({moment, kFloat, dims});
    if (options.accumulate > 1) state.push_back({AccumulatorName(p), kFloat, dims});
  }
  state.push_back({kScale, kFloat, {}, init_scale});
  state.push_back({kGrowthTracker, kInt64, {}, 0});
  state.push_back({kHysteresisLeft, kInt64, {}, static_cast<double>(options.hysteresis)});
  for (const char* counter : {kStep, kSkippedSteps, kConsecutiveSkips, kNonfiniteLossSteps}) {
    state.push_back({counter, kInt64, {}, 0});
  }
  if (options.accumulate > 1) {
    state.push_back({kMicroStep, kInt64, {}, 0});
    state.push_back({kWindowLossBad, onnx::TensorProto::BOOL, {}, 0});
  }
  return state;
}

absl::Status ReserveStateNames(const std::vector<StateItem>& state,
                               const std::vector<std::string>& params, NameAllocator& names) {
  for (const StateItem& item : state) {
    for (const std::string& name : {item.name, NextName(item.name)}) {
      if (names.Contains(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat("the model already uses the name '", name, "' that training state needs"));
      }
      names.Reserve(name);
    }
  }
  for (const std::string& p : params) names.Reserve(NextName(p));
  return absl::OkStatus();
}

absl::flat_hash_set<std::string> TrainingReads(const onnx::ModelProto& model) {
  absl::flat_hash_set<std::string> names;
  for (const onnx::TrainingInfoProto& training : model.training_info()) {
    for (const auto& binding : training.update_binding()) names.insert(binding.key());
    for (const onnx::NodeProto& node : training.algorithm().node()) {
      names.insert(node.input().begin(), node.input().end());
    }
  }
  return names;
}

absl::flat_hash_set<std::string> MasterWeights(const onnx::ModelProto& model,
                                               bool training_step_follows) {
  absl::flat_hash_set<std::string> names = TrainingReads(model);
  if (!training_step_follows) return names;
  for (const onnx::TensorProto& tensor : model.graph().initializer()) {
    if (tensor.data_type() == onnx::TensorProto::FLOAT) names.insert(tensor.name());
  }
  return names;
}

onnx::ValueInfoProto TensorValue(const std::string& name, int elem_type,
                                 const std::vector<int64_t>& dims) {
  onnx::ValueInfoProto value;
  value.set_name(name);
  onnx::TypeProto_Tensor& tensor = *value.mutable_type()->mutable_tensor_type();
  tensor.set_elem_type(elem_type);
  onnx::TensorShapeProto& shape = *tensor.mutable_shape();
  for (int64_t dim : dims) shape.add_dim()->set_dim_value(dim);
  return value;
}

namespace {

// One element: the shape [1] an optimizer state of one value is declared with.
onnx::TensorProto OneElement(int elem_type, double value) {
  onnx::TensorProto tensor = ScalarTensor(elem_type, value);
  tensor.add_dims(1);
  return tensor;
}

}  // namespace

onnx::GraphProto BuildInitialization(const std::vector<StateItem>& items) {
  onnx::GraphProto graph;
  graph.set_name("ampc_initialization");
  for (const StateItem& item : items) {
    onnx::NodeProto& node = *graph.add_node();
    node.set_name(absl::StrCat(item.name, "/init"));
    node.add_output(item.name);
    if (item.dims.empty()) {
      node.set_op_type("Constant");
      *node.add_attribute() =
          onnx::MakeAttribute("value", ScalarTensor(item.elem_type, item.value));
    } else {
      const std::string shape = absl::StrCat(item.name, ".shape");
      onnx::NodeProto& dims = *graph.add_node();
      dims.set_name(absl::StrCat(item.name, "/shape"));
      dims.set_op_type("Constant");
      dims.add_output(shape);
      *dims.add_attribute() = onnx::MakeAttribute("value_ints", item.dims);
      // The shape must exist before the fill: swap the two nodes into order.
      graph.mutable_node()->SwapElements(graph.node_size() - 1, graph.node_size() - 2);
      node.set_op_type("ConstantOfShape");
      node.add_input(shape);
      *node.add_attribute() = onnx::MakeAttribute("value", OneElement(item.elem_type, item.value));
    }
    *graph.add_output() = TensorValue(item.name, item.elem_type, item.dims);
  }
  return graph;
}

}  // namespace ampc
