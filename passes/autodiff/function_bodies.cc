#include "passes/autodiff/function_bodies.h"

#include <onnx/defs/attr_proto_util.h>
#include <onnx/defs/function.h>
#include <onnx/defs/schema.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "passes/graph/onnx_status.h"
#include "passes/graph/status_macros.h"
#include "passes/graph/tensor_data.h"
#include "passes/opset/strict_inference.h"

namespace ampc {
namespace {

bool HasFunctionBody(const onnx::OpSchema& schema, int version) {
  return (schema.HasFunction() && schema.GetFunction(version) != nullptr) ||
         schema.HasContextDependentFunction();
}

// Whether `schema` takes every input and attribute `node` states.
bool Covers(const onnx::OpSchema& schema, const onnx::NodeProto& node) {
  if (node.input_size() > schema.max_input() || node.output_size() > schema.max_output()) {
    return false;
  }
  for (const onnx::AttributeProto& attribute : node.attribute()) {
    if (!schema.attributes().contains(attribute.name())) return false;
  }
  return true;
}

// The schema to expand `node` with, and the opset its body is built for.
const onnx::OpSchema* BodySchema(const onnx::NodeProto& node, int opset, int& version) {
  const std::string& op = node.op_type();
  if (opset > 0) {
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(op, opset, "");
    version = opset;
    return schema != nullptr && HasFunctionBody(*schema, opset) ? schema : nullptr;
  }
  const onnx::OpSchema* latest = onnx::OpSchemaRegistry::Schema(op, "");
  if (latest == nullptr) return nullptr;
  for (int v = 1; v <= latest->since_version(); ++v) {
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(op, v, "");
    if (schema == nullptr || schema->since_version() != v || !Covers(*schema, node)) continue;
    if (!HasFunctionBody(*schema, v)) continue;
    version = v;
    return schema;
  }
  return nullptr;
}

// An int64 tensor known at compile time.
struct IntValue {
  std::vector<int64_t> dims;
  std::vector<int64_t> data;
};

// The dims of `type`, -1 for one without a size; nullopt when the rank is unknown.
std::optional<std::vector<int64_t>> KnownDims(const onnx::TypeProto* type) {
  if (type == nullptr || !type->has_tensor_type() || !type->tensor_type().has_shape()) {
    return std::nullopt;
  }
  std::vector<int64_t> dims;
  for (const auto& dim : type->tensor_type().shape().dim()) {
    dims.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
  }
  return dims;
}

bool AllKnown(const std::vector<int64_t>& dims) {
  return std::none_of(dims.begin(), dims.end(), [](int64_t d) { return d < 0; });
}

// The int64 result of `node` when its inputs are known (the shape arithmetic of bodies such as
// RMSNormalization's: Shape, Size, Add, Range, ...), from `known` and the types of `index`.
std::optional<IntValue> Evaluate(const onnx::NodeProto& node, const GraphIndex& index,
                                 const absl::flat_hash_map<std::string, IntValue>& known) {
  const std::string& op = node.op_type();
  if (op == "Constant") {
    if (node.attribute_size() != 1) return std::nullopt;
    const onnx::AttributeProto& a = node.attribute(0);
    if (a.name() == "value_int") return IntValue{{}, {a.i()}};
    if (a.name() == "value_ints") {
      return IntValue{{a.ints_size()}, {a.ints().begin(), a.ints().end()}};
    }
    if (a.name() != "value" || a.t().data_type() != onnx::TensorProto::INT64) return std::nullopt;
    const std::string bytes = RawBytes(a.t());
    std::vector<int64_t> data(bytes.size() / sizeof(int64_t));
    std::memcpy(data.data(), bytes.data(), data.size() * sizeof(int64_t));
    return IntValue{{a.t().dims().begin(), a.t().dims().end()}, std::move(data)};
  }
  if (op == "Shape" || op == "Size") {
    // Only the dims read need sizes: Shape(x, start=3, end=4) of a dynamic-batch x is known.
    std::optional<std::vector<int64_t>> dims = KnownDims(index.Type(node.input(0)));
    if (!dims.has_value()) return std::nullopt;
    if (op == "Shape") {
      const int64_t rank = static_cast<int64_t>(dims->size());
      int64_t start = 0, end = rank;
      for (const onnx::AttributeProto& a : node.attribute()) {
        (a.name() == "start" ? start : end) = a.i();
      }
      start = std::clamp(start < 0 ? start + rank : start, int64_t{0}, rank);
      end = std::clamp(end < 0 ? end + rank : end, start, rank);
      std::vector<int64_t> read(dims->begin() + start, dims->begin() + end);
      if (!AllKnown(read)) return std::nullopt;
      return IntValue{{end - start}, std::move(read)};
    }
    if (!AllKnown(*dims)) return std::nullopt;
    int64_t count = 1;
    for (int64_t d : *dims) count *= d;
    return IntValue{{}, {count}};
  }
  std::vector<const IntValue*> in;
  for (const std::string& input : node.input()) {
    auto it = known.find(input);
    if (it == known.end()) return std::nullopt;
    in.push_back(&it->second);
  }
  const bool to_int64 = op == "Cast" && node.attribute_size() == 1 &&
                        node.attribute(0).i() == onnx::TensorProto::INT64;
  if ((op == "Identity" || to_int64) && in.size() == 1) return *in[0];
  if (op == "Concat" && !in.empty()) {
    IntValue out{{0}, {}};
    for (const IntValue* part : in) {
      if (part->dims.size() != 1) return std::nullopt;
      out.data.insert(out.data.end(), part->data.begin(), part->data.end());
    }
    out.dims[0] = static_cast<int64_t>(out.data.size());
    return out;
  }
  if ((op == "Add" || op == "Sub" || op == "Mul" || op == "Div") && in.size() == 2) {
    const IntValue& a = *in[0];
    const IntValue& b = *in[1];
    if (a.data.size() != b.data.size() && a.data.size() != 1 && b.data.size() != 1) {
      return std::nullopt;
    }
    IntValue out = a.data.size() >= b.data.size() ? a : b;
    for (size_t i = 0; i < out.data.size(); ++i) {
      const int64_t x = a.data[a.data.size() == 1 ? 0 : i];
      const int64_t y = b.data[b.data.size() == 1 ? 0 : i];
      if (op == "Div" && y == 0) return std::nullopt;
      out.data[i] = op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : x / y;
    }
    return out;
  }
  if (op == "Range" && in.size() == 3 && in[2]->data.size() == 1 && in[2]->data[0] != 0) {
    IntValue out;
    const int64_t step = in[2]->data[0];
    for (int64_t v = in[0]->data[0]; step > 0 ? v < in[1]->data[0] : v > in[1]->data[0];
         v += step) {
      out.data.push_back(v);
    }
    out.dims = {static_cast<int64_t>(out.data.size())};
    return out;
  }
  return std::nullopt;
}

// Replaces the body's shape arithmetic that the types decide by Constants, so that inference
// gives the values that depend on it (ReduceMean over Range(axis, rank)) a rank. Returns whether
// anything changed.
absl::StatusOr<bool> FoldShapeArithmetic(onnx::ModelProto& model) {
  AMPC_ASSIGN_OR_RETURN(std::unique_ptr<GraphIndex> index, GraphIndex::Build(model.graph()));
  absl::flat_hash_map<std::string, IntValue> known;
  bool changed = false;
  for (onnx::NodeProto& node : *model.mutable_graph()->mutable_node()) {
    if (node.output_size() != 1) continue;
    std::optional<IntValue> value = Evaluate(node, *index, known);
    if (!value.has_value()) continue;
    if (node.op_type() != "Constant") {
      onnx::TensorProto tensor;
      tensor.set_data_type(onnx::TensorProto::INT64);
      for (int64_t d : value->dims) tensor.add_dims(d);
      for (int64_t v : value->data) tensor.add_int64_data(v);
      node.clear_input();
      node.clear_attribute();
      node.set_op_type("Constant");
      *node.add_attribute() = onnx::MakeAttribute("value", tensor);
      changed = true;
    }
    known.emplace(node.output(0), *std::move(value));
  }
  return changed;
}

}  // namespace

absl::StatusOr<ExpandedBody> ExpandFunctionBody(const onnx::NodeProto& node,
                                                const GraphIndex& forward, int opset,
                                                NameAllocator& names) {
  int version = 0;
  const onnx::OpSchema* schema = BodySchema(node, opset, version);
  if (schema == nullptr) return absl::NotFoundError("no function body");
  // The call, renamed: its outputs are recomputed under fresh names, and its name prefixes the
  // body's internal values.
  onnx::NodeProto call = node;
  call.set_name(
      names.Fresh(absl::StrCat(node.name().empty() ? node.op_type() : node.name(), "/grad/body")));
  ExpandedBody body;
  for (int k = 0; k < call.output_size(); ++k) {
    if (call.output(k).empty()) continue;
    call.set_output(k, names.Fresh(absl::StrCat(node.output(k), ".recomputed")));
  }
  body.outputs = {call.output().begin(), call.output().end()};
  onnx::GraphProto& graph = *body.model.mutable_graph();
  graph.set_name("body");
  std::vector<onnx::TypeProto> input_types;
  std::set<std::string> declared;
  int common = 0;  // the float type of the first float input
  for (int k = 0; k < node.input_size(); ++k) {
    const std::string& input = node.input(k);
    const onnx::TypeProto* type = input.empty() ? nullptr : forward.Type(input);
    if (!input.empty() && type == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("the type of '", input, "' is unknown"));
    }
    input_types.push_back(type != nullptr ? *type : onnx::TypeProto());
    if (type == nullptr) continue;
    if (declared.insert(input).second) {
      onnx::ValueInfoProto& info = *graph.add_input();
      info.set_name(input);
      *info.mutable_type() = *type;
    }
    // Mixed precision may leave Attention's V (its own type parameter) FP32 beside FP16 Q and K,
    // which its body's MatMul cannot take: such inputs are cast to the first one's type.
    const int elem = type->tensor_type().elem_type();
    if (!IsFloatElementType(elem)) continue;
    if (common == 0) common = elem;
    if (elem == common) continue;
    onnx::NodeProto& cast = *graph.add_node();
    cast.set_op_type("Cast");
    cast.set_name(names.Fresh(absl::StrCat(call.name(), "/Cast")));
    cast.add_input(input);
    cast.add_output(names.Fresh(absl::StrCat(input, ".cast")));
    *cast.add_attribute() = onnx::MakeAttribute("to", int64_t{common});
    call.set_input(k, cast.output(0));
    input_types.back().mutable_tensor_type()->set_elem_type(common);
  }
  onnx::FunctionProto function;
  if (schema->HasFunction() && schema->GetFunction(version) != nullptr) {
    function = *schema->GetFunction(version);
  } else {
    bool built = false;
    AMPC_RETURN_IF_ERROR(CatchOnnx("building its function body", [&] {
      onnx::FunctionBodyBuildContextImpl context(call, input_types);
      built = schema->BuildContextDependentFunction(context, function, version);
    }));
    if (!built) {
      return absl::InvalidArgumentError("its function body does not cover these attributes");
    }
  }
  AMPC_RETURN_IF_ERROR(CatchOnnx("expanding its function body",
                                 [&] { onnx::FunctionExpandHelper(call, function, graph, ""); }));
  for (onnx::NodeProto& n : *graph.mutable_node()) {
    n.set_name(names.Fresh(absl::StrCat(call.name(), "/", n.op_type())));
    for (const std::string& output : n.output()) names.Reserve(output);
  }
  body.model.set_ir_version(10);
  for (const onnx::OperatorSetIdProto& import : function.opset_import()) {
    *body.model.add_opset_import() = import;
  }
  const std::string file = absl::StrCat(node.op_type(), " body");
  constexpr int kRounds = 4;  // each round's types may decide more of the shape arithmetic
  for (int round = 0; round < kRounds; ++round) {
    AMPC_RETURN_IF_ERROR(InferTypesStrict(body.model, file));
    AMPC_ASSIGN_OR_RETURN(const bool changed, FoldShapeArithmetic(body.model));
    if (!changed) break;
    body.model.mutable_graph()->clear_value_info();
  }
  AMPC_RETURN_IF_ERROR(InferTypesStrict(body.model, file));
  return body;
}

}  // namespace ampc
