#include "passes/infer_types.h"

#include <memory>

#include "passes/graph/status_macros.h"
#include "passes/verify_changes.h"

namespace ampc {

namespace {

template <typename Fn>
void ForEachDim(onnx::TypeProto& type, Fn&& fn) {
  if (type.has_tensor_type() && type.tensor_type().has_shape()) {
    for (auto& dim : *type.mutable_tensor_type()->mutable_shape()->mutable_dim()) fn(dim);
  } else if (type.has_sequence_type()) {
    ForEachDim(*type.mutable_sequence_type()->mutable_elem_type(), fn);
  } else if (type.has_optional_type()) {
    ForEachDim(*type.mutable_optional_type()->mutable_elem_type(), fn);
  }
}

// Every value_info of `graph` and its subgraphs.
template <typename Fn>
void ForEachValueInfo(onnx::GraphProto& graph, Fn&& fn) {
  for (onnx::ValueInfoProto& info : *graph.mutable_value_info()) fn(info);
  for (onnx::NodeProto& node : *graph.mutable_node()) {
    for (onnx::AttributeProto& attribute : *node.mutable_attribute()) {
      if (attribute.has_g()) ForEachValueInfo(*attribute.mutable_g(), fn);
      for (onnx::GraphProto& sub : *attribute.mutable_graphs()) ForEachValueInfo(sub, fn);
    }
  }
}

// ONNX's inference names dims it cannot resolve unk__0, unk__1, ... in the order it meets them,
// so recompiling a compiled model would rename them; such dims stay unknown instead.
void ForgetGeneratedDimNames(onnx::GraphProto& graph) {
  ForEachValueInfo(graph, [](onnx::ValueInfoProto& info) {
    ForEachDim(*info.mutable_type(), [](onnx::TensorShapeProto_Dimension& dim) {
      if (dim.has_dim_param() && dim.dim_param().rfind("unk__", 0) == 0) dim.clear_dim_param();
    });
  });
}

}  // namespace

absl::Status InferTypesKeepingIo(onnx::ModelProto& model, const std::string& file) {
  onnx::GraphProto& graph = *model.mutable_graph();
  const auto inputs = graph.input();
  const auto outputs = graph.output();
  AMPC_RETURN_IF_ERROR(InferTypesStrict(model, file));
  // Inference may rename unknown dims of graph outputs (unk__0); the declared I/O is the user's.
  *graph.mutable_input() = inputs;
  *graph.mutable_output() = outputs;
  ForgetGeneratedDimNames(graph);
  return absl::OkStatus();
}

absl::StatusOr<PassResult> InferTypes::Run(ModelContext& context) {
  const int known = context.model.graph().value_info_size();
  AMPC_RETURN_IF_ERROR(InferTypesKeepingIo(context.model, context.file));
  // The index of the typed model, which the passes after this one reuse.
  context.DropIndex();
  AMPC_ASSIGN_OR_RETURN(std::shared_ptr<const GraphIndex> index, context.Index());
  context.inferred_types = std::make_shared<const TypeSnapshot>(context.model, *index);
  return PassResult(context.model.graph().value_info_size() != known, /*index_stale=*/false);
}

}  // namespace ampc
