// Emits the nodes of a backward graph: fresh names, constants of a value's dtype, shape queries of
// forward values, and the reduction of a broadcast gradient to its operand's shape.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/graph/graph_index.h"
#include "passes/graph/name_allocator.h"

namespace ampc {

// One dim of a forward value: a known size, a symbolic name, or unknown (both empty).
struct Dim {
  std::optional<int64_t> size;
  std::string param;
  bool SameAs(const Dim& other) const;
  bool IsOne() const { return size.has_value() && *size == 1; }
};

class GradientBuilder {
 public:
  // Appends nodes to `out`; `types` describes the forward values (their types and shapes).
  GradientBuilder(onnx::GraphProto& out, NameAllocator& names, const GraphIndex& types)
      : out_(out), names_(names), types_(types) {}

  // Names the nodes and values emitted next after `prefix` (the forward node being differentiated).
  void SetPrefix(std::string prefix) { prefix_ = std::move(prefix); }

  // Appends `op` with `outputs` outputs named after `hint` (or after the op); returns the node.
  onnx::NodeProto& Node(std::string_view op, const std::vector<std::string>& inputs,
                        int outputs = 1, std::string_view domain = "");
  // Appends a one-output node and returns its output.
  std::string Op(std::string_view op, const std::vector<std::string>& inputs,
                 std::vector<onnx::AttributeProto> attributes = {});
  // A scalar of `elem_type` (FLOAT, DOUBLE, FLOAT16 or BFLOAT16; the last two through a Cast).
  std::string Scalar(double value, int elem_type);
  // A 1-D int64 constant.
  std::string Ints(const std::vector<int64_t>& values);
  // The shape of forward value `value`: a constant when static, else Shape(value).
  std::string ShapeOf(const std::string& value);
  // Zeros of forward value `value`'s shape and element type.
  std::string ZerosLike(const std::string& value);
  // A fresh value name from `hint`.
  std::string Fresh(std::string_view hint) { return names_.Fresh(hint); }

  // The element type of forward value `value` (0 when unknown).
  int ElemType(const std::string& value) const;
  // The dims of forward value `value`; nullopt when its rank is unknown.
  std::optional<std::vector<Dim>> Dims(const std::string& value) const;

  // `grad` has dims `grad_dims` and `target` broadcast to them: sums `grad` over the broadcast axes
  // and reshapes the result to `target`'s shape. A dim whose broadcast the shapes cannot decide
  // (unknown sizes under different or no names) is decided at run time from Shape(target).
  absl::StatusOr<std::string> ReduceTo(const std::string& grad, const std::vector<Dim>& grad_dims,
                                       const std::string& target);

 private:
  std::string ReduceToAtRunTime(const std::string& grad, size_t lead, const std::string& target);

  onnx::GraphProto& out_;
  NameAllocator& names_;
  const GraphIndex& types_;
  std::string prefix_;
};

}  // namespace ampc
