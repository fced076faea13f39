// What a kernel sees: at creation the node, its opset and its element types (KernelInfo); at each
// run its input tensors and a way to allocate outputs (KernelContext).
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/attributes.h"
#include "runtime/core/backend.h"
#include "runtime/core/tensor.h"

namespace ampc {

class GraphExecutor;
class KernelRegistry;

struct KernelInfo {
  const onnx::NodeProto& node;
  int opset;                       // of the node's domain in the model
  std::vector<DType> input_types;  // kUndefined for an omitted optional input
  std::vector<DType> output_types;
  Backend& backend;
  // Values of enclosing graphs the node's subgraphs use, in the order KernelContext gives them.
  std::vector<std::string> implicit_inputs;
  // Builds the executor of one of the node's graph attributes (If, Loop, Scan).
  std::function<absl::StatusOr<std::unique_ptr<GraphExecutor>>(const onnx::GraphProto&)>
      build_subgraph;

  Attributes attributes() const { return Attributes(node); }
  std::string label() const { return NodeLabel(node); }
};

class KernelContext {
 public:
  KernelContext(const KernelInfo& info, std::span<Tensor* const> inputs,
                std::span<Tensor* const> implicit_inputs, std::span<Tensor> outputs)
      : info_(info), inputs_(inputs), implicit_inputs_(implicit_inputs), outputs_(outputs) {}

  const KernelInfo& info() const { return info_; }
  Attributes attributes() const { return info_.attributes(); }
  Backend& backend() const { return info_.backend; }

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  // nullptr for an omitted optional input (empty name, or past the end).
  const Tensor* input(int i) const {
    return i < num_inputs() && inputs_[i] != nullptr ? inputs_[i] : nullptr;
  }
  const Tensor& in(int i) const { return *inputs_[i]; }
  std::span<Tensor* const> implicit_inputs() const { return implicit_inputs_; }

  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  // Where the caller wants outputs (per output, null for none): Output writes into such a tensor
  // when its type and size match, instead of allocating. No input may share its memory.
  void set_destinations(std::span<Tensor* const> destinations) { destinations_ = destinations; }
  // Allocates output i with the element type the graph declares for it.
  absl::StatusOr<Tensor*> Output(int i, Shape shape);
  absl::StatusOr<Tensor*> Output(int i, Shape shape, DType dtype);
  // Makes output i this tensor (a view of an input, a constant): no copy. An output the node
  // does not have (an omitted optional output) is dropped.
  void SetOutput(int i, Tensor tensor) {
    if (i >= 0 && i < num_outputs()) outputs_[i] = std::move(tensor);
  }

 private:
  const KernelInfo& info_;
  std::span<Tensor* const> inputs_;
  std::span<Tensor* const> implicit_inputs_;
  std::span<Tensor> outputs_;
  std::span<Tensor* const> destinations_;
};

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  virtual absl::Status Compute(KernelContext& context) = 0;
};

// A kernel that is a plain function of its context (attributes are read at each run).
using KernelFunction = absl::Status (*)(KernelContext&);

// An error for a kernel to return: "<node label>: <message>".
absl::Status NodeError(const KernelContext& context, absl::string_view message);

}  // namespace ampc
