#include "compiler/tensor_walker.h"

#include "absl/strings/str_cat.h"

namespace ampc {
namespace {

using onnx::TensorProto;

// Reads through has_x() first: mutable_x() would add an absent field.
class TensorWalker {
 public:
  explicit TensorWalker(TensorFn fn) : fn_(fn) {}

  absl::Status Model(onnx::ModelProto& model) {
    if (model.has_graph()) {
      if (absl::Status s = Graph(*model.mutable_graph()); !s.ok()) return s;
    }
    for (onnx::FunctionProto& function : *model.mutable_functions()) {
      if (absl::Status s = Nodes(*function.mutable_node()); !s.ok()) return s;
    }
    for (onnx::TrainingInfoProto& info : *model.mutable_training_info()) {
      if (info.has_initialization()) {
        if (absl::Status s = Graph(*info.mutable_initialization()); !s.ok()) return s;
      }
      if (info.has_algorithm()) {
        if (absl::Status s = Graph(*info.mutable_algorithm()); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Graph(onnx::GraphProto& graph) {
    for (TensorProto& tensor : *graph.mutable_initializer()) {
      if (absl::Status s = fn_(tensor, {}); !s.ok()) return s;
    }
    for (onnx::SparseTensorProto& sparse : *graph.mutable_sparse_initializer()) {
      if (absl::Status s = Sparse(sparse, {}); !s.ok()) return s;
    }
    return Nodes(*graph.mutable_node());
  }

  absl::Status Nodes(google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes) {
    for (onnx::NodeProto& node : nodes) {
      for (onnx::AttributeProto& attr : *node.mutable_attribute()) {
        if (absl::Status s = Attribute(attr, {&node, &attr.name()}); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

  absl::Status Attribute(onnx::AttributeProto& attr, const TensorSite& site) {
    if (attr.has_t()) {
      if (absl::Status s = fn_(*attr.mutable_t(), site); !s.ok()) return s;
    }
    for (TensorProto& tensor : *attr.mutable_tensors()) {
      if (absl::Status s = fn_(tensor, site); !s.ok()) return s;
    }
    if (attr.has_sparse_tensor()) {
      if (absl::Status s = Sparse(*attr.mutable_sparse_tensor(), site); !s.ok()) return s;
    }
    for (onnx::SparseTensorProto& sparse : *attr.mutable_sparse_tensors()) {
      if (absl::Status s = Sparse(sparse, site); !s.ok()) return s;
    }
    if (attr.has_g()) {
      if (absl::Status s = Graph(*attr.mutable_g()); !s.ok()) return s;
    }
    for (onnx::GraphProto& graph : *attr.mutable_graphs()) {
      if (absl::Status s = Graph(graph); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status Sparse(onnx::SparseTensorProto& sparse, const TensorSite& site) {
    if (sparse.has_values()) {
      if (absl::Status s = fn_(*sparse.mutable_values(), site); !s.ok()) return s;
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
