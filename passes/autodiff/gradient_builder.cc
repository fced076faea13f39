#include "passes/autodiff/gradient_builder.h"

#include <onnx/defs/attr_proto_util.h>

#include "absl/strings/str_cat.h"
#include "passes/graph/tensor_data.h"

namespace ampc {

bool Dim::SameAs(const Dim& other) const {
  if (size.has_value() && other.size.has_value()) return *size == *other.size;
  return !param.empty() && param == other.param;
}

onnx::NodeProto& GradientBuilder::Node(std::string_view op, const std::vector<std::string>& inputs,
                                       int outputs, std::string_view domain) {
  onnx::NodeProto& node = *out_.add_node();
  const std::string name = names_.Fresh(absl::StrCat(prefix_, "/grad/", std::string(op)));
  node.set_name(name);
  node.set_op_type(std::string(op));
  if (!domain.empty()) node.set_domain(std::string(domain));
  for (const std::string& input : inputs) node.add_input(input);
  for (int i = 0; i < outputs; ++i) {
    node.add_output(i == 0 ? name : names_.Fresh(absl::StrCat(name, ":", i)));
  }
  return node;
}

std::string GradientBuilder::Op(std::string_view op, const std::vector<std::string>& inputs,
                                std::vector<onnx::AttributeProto> attributes) {
  onnx::NodeProto& node = Node(op, inputs);
  for (onnx::AttributeProto& attribute : attributes) *node.add_attribute() = std::move(attribute);
  return node.output(0);
}

std::string GradientBuilder::Scalar(double value, int elem_type) {
  onnx::TensorProto tensor;
  if (elem_type == onnx::TensorProto::DOUBLE) {
    tensor.set_data_type(onnx::TensorProto::DOUBLE);
    tensor.add_double_data(value);
  } else {
    tensor.set_data_type(onnx::TensorProto::FLOAT);
    tensor.add_float_data(static_cast<float>(value));
  }
  const std::string constant = Op("Constant", {}, {onnx::MakeAttribute("value", tensor)});
  if (elem_type == onnx::TensorProto::FLOAT || elem_type == onnx::TensorProto::DOUBLE) {
    return constant;
  }
  return Op("Cast", {constant}, {onnx::MakeAttribute("to", int64_t{elem_type})});
}

std::string GradientBuilder::Ints(const std::vector<int64_t>& values) {
  if (!values.empty()) return Op("Constant", {}, {onnx::MakeAttribute("value_ints", values)});
  onnx::TensorProto empty;  // value_ints cannot be empty: a scalar's shape
  empty.set_data_type(onnx::TensorProto::INT64);
  empty.add_dims(0);
  return Op("Constant", {}, {onnx::MakeAttribute("value", empty)});
}

std::string GradientBuilder::ShapeOf(const std::string& value) {
  std::optional<std::vector<Dim>> dims = Dims(value);
  std::vector<int64_t> sizes;
  for (const Dim& dim : dims.value_or(std::vector<Dim>{})) {
    if (!dim.size.has_value()) break;
    sizes.push_back(*dim.size);
  }
  if (dims.has_value() && sizes.size() == dims->size()) return Ints(sizes);
  return Op("Shape", {value});
}

std::string GradientBuilder::ZerosLike(const std::string& value) {
  onnx::TensorProto zero;
  zero.set_data_type(ElemType(value));
  zero.add_dims(1);
  zero.set_raw_data(std::string(ElementSize(zero.data_type()).value_or(4), '\0'));
  return Op("ConstantOfShape", {ShapeOf(value)}, {onnx::MakeAttribute("value", zero)});
}

int GradientBuilder::ElemType(const std::string& value) const {
  const onnx::TypeProto* type = types_.Type(value);
  if (type == nullptr || !type->has_tensor_type()) return 0;
  return type->tensor_type().elem_type();
}

std::optional<std::vector<Dim>> GradientBuilder::Dims(const std::string& value) const {
  const onnx::TypeProto* type = types_.Type(value);
  if (type == nullptr || !type->has_tensor_type() || !type->tensor_type().has_shape()) {
    return std::nullopt;
  }
  std::vector<Dim> dims;
  for (const auto& dim : type->tensor_type().shape().dim()) {
    Dim d;
    if (dim.has_dim_value()) d.size = dim.dim_value();
    if (dim.has_dim_param()) d.param = dim.dim_param();
    dims.push_back(std::move(d));
  }
  return dims;
}

absl::StatusOr<std::string> GradientBuilder::ReduceTo(const std::string& grad,
                                                      const std::vector<Dim>& grad_dims,
                                                      const std::string& target) {
  std::optional<std::vector<Dim>> target_dims = Dims(target);
  if (!target_dims.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("the rank of '", target, "' is unknown"));
  }
  const size_t lead = grad_dims.size() - target_dims->size();
  if (target_dims->size() > grad_dims.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", target, "' has a higher rank than its broadcast result"));
  }
  std::vector<int64_t> axes;
  bool undecided = false;  // a dim whose broadcast only the run can tell
  for (size_t i = 0; i < grad_dims.size(); ++i) {
    if (i < lead) {
      axes.push_back(static_cast<int64_t>(i));
      continue;
    }
    const Dim& have = grad_dims[i];
    const Dim& want = (*target_dims)[i - lead];
    if (want.SameAs(have) || have.IsOne() || (want.size.has_value() && !want.IsOne())) continue;
    if (want.IsOne()) {
      axes.push_back(static_cast<int64_t>(i));
      continue;
    }
    undecided = true;
  }
  if (undecided) return ReduceToAtRunTime(grad, lead, target);
  if (axes.empty()) return grad;
  std::string sum = Op("ReduceSum", {grad, Ints(axes)}, {onnx::MakeAttribute("keepdims", 1L)});
  if (lead == 0) return sum;
  return Op("Reshape", {sum, ShapeOf(target)});
}

// The leading `lead` axes are summed away; of the rest, every axis where the target's run-time
// shape is 1 (summing an axis of size 1 changes nothing, so no comparison with grad's shape).
std::string GradientBuilder::ReduceToAtRunTime(const std::string& grad, size_t lead,
                                               const std::string& target) {
  std::string summed = grad;
  if (lead > 0) {
    std::vector<int64_t> lead_axes(lead);
    for (size_t i = 0; i < lead; ++i) lead_axes[i] = static_cast<int64_t>(i);
    summed = Op("ReduceSum", {grad, Ints(lead_axes)}, {onnx::MakeAttribute("keepdims", 0L)});
  }
  const std::string ones = Op("Equal", {Op("Shape", {target}), Ints({1})});
  const std::string axes = Op("Reshape", {Op("NonZero", {ones}), Ints({-1})});
  return Op("ReduceSum", {summed, axes},
            {onnx::MakeAttribute("keepdims", 1L), onnx::MakeAttribute("noop_with_empty_axes", 1L)});
}

}  // namespace ampc
