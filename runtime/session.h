// A loaded model ready to run: shape inference once, kernels chosen for every node (an
// unsupported op or element type fails here, not at step 1000), then any number of runs.
#pragma once

#include <onnx/onnx_pb.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/core/backend.h"
#include "runtime/core/graph_executor.h"
#include "runtime/core/kernel_registry.h"

namespace ampc {

// A graph input or output as the model declares it; dims < 0 are symbolic or unknown.
struct ValueSpec {
  std::string name;
  DType dtype;
  std::vector<int64_t> dims;
  bool rank_known = true;    // false: no shape declared, any rank is accepted (dims empty)
  bool has_default = false;  // an input with an initializer of the same name
};

// The declaration of a graph input or output (dims < 0 where symbolic or unknown).
ValueSpec SpecOf(const onnx::ValueInfoProto& value);

// InvalidArgument naming the input when `tensor`'s dtype or a fixed dim contradicts `spec`.
absl::Status CheckInput(const ValueSpec& spec, const Tensor& tensor);

class Session {
 public:
  static absl::StatusOr<std::unique_ptr<Session>> Create(onnx::ModelProto model,
                                                         const KernelRegistry& registry,
                                                         Backend& backend);

  const std::vector<ValueSpec>& inputs() const { return inputs_; }
  const std::vector<ValueSpec>& outputs() const { return outputs_; }
  Backend& backend() const { return backend_; }

  // Inputs in the order of inputs(); an empty tensor for an input with a default. Checks element
  // types and fixed dims against the declarations (errors name the input). Host tensors are
  // copied to the backend; outputs are the backend's tensors.
  absl::StatusOr<std::vector<Tensor>> Run(std::span<const Tensor> inputs) const;

 private:
  Session(onnx::ModelProto model, Backend& backend);

  onnx::ModelProto model_;  // kernels keep references to its nodes
  Backend& backend_;
  std::unique_ptr<GraphExecutor> executor_;
  std::vector<ValueSpec> inputs_;
  std::vector<ValueSpec> outputs_;
};

}  // namespace ampc
