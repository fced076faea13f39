// Where inf or NaN first appear: a graph rerun with every floating-point value kept as an
// output. `ampc run --find-nonfinite` and `ampc train` (after too many skipped steps) use it.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "runtime/core/backend.h"
#include "runtime/core/kernel_registry.h"
#include "runtime/core/tensor.h"

namespace ampc {

struct NonFiniteCount {
  int64_t nan = 0, inf = 0;
  int64_t total() const { return nan + inf; }
};

// NaN and infinite elements of a tensor (copied to the host if needed); zero for a tensor that
// is not of a floating-point type.
absl::StatusOr<NonFiniteCount> CountNonFinite(const Tensor& tensor);

// Adds every floating-point node output that the graph's value_info types as a graph output
// (after the graph's own outputs, in node order).
void KeepFloatValues(onnx::GraphProto& graph);

struct FirstNonFinite {
  std::string value, node, op;  // all empty when every node output is finite
  DType dtype = DType::kUndefined;
  NonFiniteCount count;
  int64_t size = 0;                  // elements of the value
  std::vector<std::string> readers;  // the nodes that read the value, in node order
};

// From the values a run of `kept` (a KeepFloatValues graph) produced, in the order of its
// outputs: the first node output in node order that holds inf or NaN. Adds the name of every
// output holding inf or NaN to `nonfinite` when given.
absl::StatusOr<FirstNonFinite> FirstNonFiniteValue(
    const onnx::GraphProto& kept, std::span<const Tensor> values,
    absl::flat_hash_set<std::string>* nonfinite = nullptr);

// Reruns `model` on `inputs` (in the order of its graph inputs; an empty tensor for an input
// with a default) with every floating-point value kept, and returns where inf or NaN first
// appear. Types come from ONNX's inference on a copy of the model.
absl::StatusOr<FirstNonFinite> FindFirstNonFinite(onnx::ModelProto model,
                                                  std::span<const Tensor> inputs,
                                                  const KernelRegistry& registry, Backend& backend);

}  // namespace ampc
