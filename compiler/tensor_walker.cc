#include "compiler/tensor_walker.h"

#include "absl/strings/str_cat.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

using onnx::TensorProto;

// Reads through has_x() first: mutable_x() would add an absent field.
class TensorWalker {
 public:
  explicit TensorWalker(TensorFn fn) : fn_(fn) {}

  absl::Status Model(onnx::ModelProto& model) {
    if (model.has_graph()) {
      AMPC_RETURN_IF_ERROR(Graph(*model.mutable_graph()));
    }
    for (onnx::FunctionProto& function : *model.mutable_functions()) {
      AMPC_RETURN_IF_ERROR(Nodes(*function.mutable_node()));
    }
    for (onnx::TrainingInfoProto& info : *model.mutable_training_info()) {
      if (info.has_initialization()) {
        AMPC_RETURN_IF_ERROR(Graph(*info.mutable_initialization()));
      }
      if (info.has_algorithm()) {
        AMPC_RETURN_IF_ERROR(Graph(*info.mutable_algorithm()));
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Graph(onnx::GraphProto& graph) {
    for (TensorProto& tensor : *graph.mutable_initializer()) {
      AMPC_RETURN_IF_ERROR(fn_(tensor, {}));
    }
    for (onnx::SparseTensorProto& sparse : *graph.mutable_sparse_initializer()) {
      AMPC_RETURN_IF_ERROR(Sparse(sparse, {}));
    }
    return Nodes(*graph.mutable_node());
  }

  absl::Status Nodes(google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes) {
    for (onnx::NodeProto& node : nodes) {
      for (onnx::AttributeProto& attr : *node.mutable_attribute()) {
        AMPC_RETURN_IF_ERROR(Attribute(attr, {&node, &attr.name()}));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Attribute(onnx::AttributeProto& attr, const TensorSite& site) {
    if (attr.has_t()) {
      AMPC_RETURN_IF_ERROR(fn_(*attr.mutable_t(), site));
    }
    for (TensorProto& tensor : *attr.mutable_tensors()) {
      AMPC_RETURN_IF_ERROR(fn_(tensor, site));
    }
    if (attr.has_sparse_tensor()) {
      AMPC_RETURN_IF_ERROR(Sparse(*attr.mutable_sparse_tensor(), site));
    }
    for (onnx::SparseTensorProto& sparse : *attr.mutable_sparse_tensors()) {
      AMPC_RETURN_IF_ERROR(Sparse(sparse, site));
    }
    if (attr.has_g()) {
      AMPC_RETURN_IF_ERROR(Graph(*attr.mutable_g()));
    }
    for (onnx::GraphProto& graph : *attr.mutable_graphs()) {
      AMPC_RETURN_IF_ERROR(Graph(graph));
    }
    return absl::OkStatus();
  }

  absl::Status Sparse(onnx::SparseTensorProto& sparse, const TensorSite& site) {
    if (sparse.has_values()) {
      AMPC_RETURN_IF_ERROR(fn_(*sparse.mutable_values(), site));
    }
    if (!sparse.has_indices()) return absl::OkStatus();
    return fn_(*sparse.mutable_indices(), site);
  }

  TensorFn fn_;
};

}  // namespace

std::string DescribeTensor(const TensorProto& tensor, const TensorSite& site) {
  std::string text = tensor.name().empty() ? "" : absl::StrCat("tensor '", tensor.name(), "'");
  if (site.node == nullptr) return text;
  return absl::StrCat(text, text.empty() ? "" : " in ", "attribute '", *site.attribute,
                      "' of node '", site.node->name(), "' (", site.node->op_type(), ")");
}

absl::Status VisitTensors(onnx::ModelProto& model, TensorFn fn) {
  return TensorWalker(fn).Model(model);
}

}  // namespace ampc
