#include "passes/opset/standard_op_versions.h"

#include <onnx/defs/attr_proto_util.h>
#include <onnx/defs/schema.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/opset/training_ops.h"

namespace ampc {
namespace {

using onnx::OpSchema;
using onnx::TensorProto;

// The ops, and the standard schema each copies (the latest up to opset 17).
constexpr const char* kOps[] = {"Conv", "MaxPool", "AveragePool", "GlobalAveragePool"};
constexpr char kFloatVar[] = "T";

bool InTable(const std::string& op) {
  return std::find_if(std::begin(kOps), std::end(kOps),
                      [&](const char* known) { return op == known; }) != std::end(kOps);
}

const OpSchema* Standard(const std::string& op) {
  return onnx::OpSchemaRegistry::Schema(op, kAmpcVersionStandardOpset, "");
}

bool NoneEmpty(const google::protobuf::RepeatedPtrField<std::string>& names) {
  return std::none_of(names.begin(), names.end(), [](const std::string& n) { return n.empty(); });
}

// The ONNX text name of an attribute's type ("" for types a body cannot reference).
const char* TypeText(onnx::AttributeProto::AttributeType type) {
  switch (type) {
    case onnx::AttributeProto::INT:
      return "int";
    case onnx::AttributeProto::INTS:
      return "ints";
    case onnx::AttributeProto::FLOAT:
      return "float";
    case onnx::AttributeProto::FLOATS:
      return "floats";
    case onnx::AttributeProto::STRING:
      return "string";
    default:
      return "";
  }
}

OpSchema AmpcVersionSchema(const OpSchema& standard) {
  OpSchema schema(standard.Name(), __FILE__, __LINE__);
  schema.SetDomain(kAmpcDomain)
      .SinceVersion(kAmpcOpsetVersion)
      .SetDoc(absl::StrCat(standard.Name(), "-", standard.SinceVersion(),
                           " on bfloat16 tensors (ONNX has none before opset 22); the function "
                           "body computes it in float32 and rounds the outputs to bfloat16."));
  for (size_t i = 0; i < standard.inputs().size(); ++i) {
    const OpSchema::FormalParameter& p = standard.inputs()[i];
    schema.Input(static_cast<int>(i), p.GetName(), p.GetDescription(), p.GetTypeStr(),
                 p.GetOption(), p.GetIsHomogeneous(), p.GetMinArity(),
                 p.GetDifferentiationCategory());
  }
  for (size_t i = 0; i < standard.outputs().size(); ++i) {
    const OpSchema::FormalParameter& p = standard.outputs()[i];
    schema.Output(static_cast<int>(i), p.GetName(), p.GetDescription(), p.GetTypeStr(),
                  p.GetOption(), p.GetIsHomogeneous(), p.GetMinArity(),
                  p.GetDifferentiationCategory());
  }
  for (const auto& [name, a] : standard.attributes()) {
    if (a.default_value.type() != onnx::AttributeProto::UNDEFINED) {
      schema.Attr(OpSchema::Attribute(a.name, a.description, a.default_value));
    } else {
      schema.Attr(OpSchema::Attribute(a.name, a.description, a.type, a.required));
    }
  }
  for (const OpSchema::TypeConstraintParam& t : standard.typeConstraintParams()) {
    schema.TypeConstraint(t.type_param_str,
                          t.type_param_str == kFloatVar
                              ? std::vector<std::string>{"tensor(bfloat16)"}
                              : t.allowed_type_strs,
                          t.description);
  }
  schema.TypeAndShapeInferenceFunction(standard.GetTypeAndShapeInferenceFunction());
  return schema;
}

// Visits every node of `graph` and its subgraphs.
// Visits every node of `graph` and its subgraphs with its name for messages ("graph#i" when
// unnamed, as explain names it).
template <typename Visit>
void ForEachNode(const onnx::GraphProto& graph, const Visit& visit) {
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    visit(node, node.name().empty() ? absl::StrCat(graph.name(), "#", i) : node.name());
    for (const onnx::AttributeProto& attribute : node.attribute()) {
      if (attribute.has_g()) ForEachNode(attribute.g(), visit);
      for (const onnx::GraphProto& sub : attribute.graphs()) ForEachNode(sub, visit);
    }
  }
}

}  // namespace

const std::vector<std::string>& AmpcVersionOps() {
  static const auto* ops = new std::vector<std::string>(std::begin(kOps), std::end(kOps));
  return *ops;
}

bool HasAmpcVersion(const onnx::NodeProto& node, int dtype) {
  if (dtype != TensorProto::BFLOAT16 || !(node.domain().empty() || node.domain() == "ai.onnx") ||
      !InTable(node.op_type()) || !NoneEmpty(node.output())) {
    return false;
  }
  // Trailing empty inputs are dropped (NormalizeAmpcVersion); one before a given one is not.
  int given = node.input_size();
  while (given > 0 && node.input(given - 1).empty()) --given;
  for (int i = 0; i < given; ++i) {
    if (node.input(i).empty()) return false;
  }
  for (const onnx::AttributeProto& attribute : node.attribute()) {
    if (*TypeText(attribute.type()) == '\0') return false;
  }
  return true;
}

bool IsAmpcVersion(const onnx::NodeProto& node) {
  return node.domain() == kAmpcDomain && InTable(node.op_type());
}

void NormalizeAmpcVersion(onnx::NodeProto& node, const onnx::TypeProto* input,
                          const onnx::TypeProto* weight) {
  const OpSchema* standard = Standard(node.op_type());
  if (standard == nullptr) return;
  while (node.input_size() > 0 && node.input(node.input_size() - 1).empty()) {
    node.mutable_input()->RemoveLast();
  }
  // Conv's kernel_shape must equal the weight's dims, from which ONNX infers it: left out, it
  // never makes two Convs differ.
  auto& attributes = *node.mutable_attribute();
  for (int i = attributes.size() - 1; i >= 0; --i) {
    if (node.op_type() == "Conv" && attributes.Get(i).name() == "kernel_shape") {
      attributes.DeleteSubrange(i, 1);
    }
  }
  absl::flat_hash_map<std::string, const onnx::AttributeProto*> stated;
  for (const onnx::AttributeProto& a : node.attribute()) stated[a.name()] = &a;
  const auto rank = [](const onnx::TypeProto* type) {
    return type == nullptr || !type->tensor_type().has_shape()
               ? -1
               : type->tensor_type().shape().dim_size();
  };
  // Spatial dims: the weight's rank (known even with symbolic dims), the pool's kernel_shape (it
  // is required), else the input's rank.
  int spatial = rank(weight) - 2;
  if (stated.contains("kernel_shape")) spatial = stated.at("kernel_shape")->ints_size();
  if (spatial <= 0) spatial = rank(input) - 2;
  const bool explicit_pads = !stated.contains("auto_pad") || stated.at("auto_pad")->s() == "NOTSET";
  std::vector<onnx::AttributeProto> added;
  // By name: the schema's attribute map has no order of its own (ONNX 1.23 hashes it).
  std::map<std::string, const OpSchema::Attribute*> by_name;
  for (const auto& [name, a] : standard->attributes()) by_name.emplace(name, &a);
  for (const auto& [name, attribute] : by_name) {
    const OpSchema::Attribute& a = *attribute;
    if (stated.contains(name) || (node.op_type() == "Conv" && name == "kernel_shape")) continue;
    onnx::AttributeProto value;
    if (a.default_value.type() != onnx::AttributeProto::UNDEFINED) {
      value = a.default_value;
    } else if (spatial <= 0) {
      continue;
    } else if (name == "strides" || name == "dilations") {
      value = onnx::MakeAttribute(name, std::vector<int64_t>(spatial, 1));
    } else if (name == "pads" && explicit_pads) {
      value = onnx::MakeAttribute(name, std::vector<int64_t>(2 * spatial, 0));
    } else {
      continue;
    }
    value.set_name(name);
    added.push_back(std::move(value));
  }
  for (onnx::AttributeProto& a : added) *node.add_attribute() = std::move(a);
}

std::string AmpcVersionSignature(const onnx::NodeProto& node, bool training) {
  std::vector<std::string> names;
  for (const onnx::AttributeProto& attribute : node.attribute()) names.push_back(attribute.name());
  std::sort(names.begin(), names.end());
  const auto count = [](int n, const char* what) {
    return absl::StrCat(n, " ", what, n == 1 ? "" : "s");
  };
  int outputs = node.output_size();
  if (training && node.op_type() == "MaxPool") outputs = std::max(outputs, 2);
  return absl::StrCat(count(node.input_size(), "input"), ", ", count(outputs, "output"),
                      ", attributes {", absl::StrJoin(names, ", "), "}");
}

void RegisterAmpcVersionSchemas() {
  for (const char* op : kOps) onnx::RegisterSchema(AmpcVersionSchema(*Standard(op)));
}

absl::StatusOr<FunctionText> AmpcVersionBody(const onnx::NodeProto& node) {
  if (!IsAmpcVersion(node)) {
    return absl::NotFoundError(absl::StrCat(node.op_type(), " is no ai.ampc version"));
  }
  const OpSchema& standard = *Standard(node.op_type());
  FunctionText body;
  std::vector<std::string> args, results, attributes;
  for (int i = 0; i < node.input_size(); ++i) {
    const OpSchema::FormalParameter& p = standard.inputs().at(i);
    body.inputs.push_back(p.GetName());
    if (p.GetTypeStr() != kFloatVar) {
      args.push_back(p.GetName());
      continue;
    }
    args.push_back(p.GetName() + "_fp32");
    absl::StrAppend(&body.nodes, args.back(), " = Cast <to = 1> (", p.GetName(), ")\n");
  }
  std::string casts_back;
  for (int i = 0; i < node.output_size(); ++i) {
    const OpSchema::FormalParameter& p = standard.outputs().at(i);
    body.outputs.push_back(p.GetName());
    const bool cast = p.GetTypeStr() == kFloatVar;
    results.push_back(cast ? p.GetName() + "_fp32" : p.GetName());
    if (cast)
      absl::StrAppend(&casts_back, p.GetName(), " = Cast <to = 16> (", results.back(), ")\n");
  }
  for (const onnx::AttributeProto& attribute : node.attribute()) {
    body.attributes.push_back(attribute.name());
    attributes.push_back(
        absl::StrCat(attribute.name(), ": ", TypeText(attribute.type()), " = @", attribute.name()));
  }
  absl::StrAppend(
      &body.nodes, absl::StrJoin(results, ", "), " = ", node.op_type(), " ",
      attributes.empty() ? "" : absl::StrCat("<", absl::StrJoin(attributes, ", "), "> "), "(",
      absl::StrJoin(args, ", "), ")\n", casts_back);
  return body;
}

absl::Status AddAmpcVersionFunctions(onnx::ModelProto& model) {
  // op -> the first node using it, and that node's name
  std::map<std::string, std::pair<const onnx::NodeProto*, std::string>> first;
  absl::Status status;
  ForEachNode(model.graph(), [&](const onnx::NodeProto& node, const std::string& name) {
    if (!IsAmpcVersion(node) || !status.ok()) return;
    auto [it, inserted] = first.try_emplace(node.op_type(), &node, name);
    const std::string signature = AmpcVersionSignature(node, false);
    const std::string wanted = AmpcVersionSignature(*it->second.first, false);
    if (inserted || signature == wanted) return;
    status = absl::InvalidArgumentError(
        absl::StrCat("node '", name, "' (ai.ampc.", node.op_type(), ") has ", signature,
                     " but node '", it->second.second, "' has ", wanted,
                     "; one model-local function serves every node of an op"));
  });
  if (!status.ok() || first.empty()) return status;
  int opset = 0;
  bool imports_ampc = false;
  for (const onnx::OperatorSetIdProto& import : model.opset_import()) {
    if (import.domain().empty() || import.domain() == "ai.onnx") {
      opset = static_cast<int>(import.version());
    }
    imports_ampc = imports_ampc || import.domain() == kAmpcDomain;
  }
  if (opset < 13) {
    return absl::InvalidArgumentError(
        absl::StrCat("ai.ampc.", first.begin()->first, " (node '", first.begin()->second.second,
                     "') needs default-domain opset 13 or later (bfloat16 Cast), not ", opset));
  }
  if (!imports_ampc) {
    onnx::OperatorSetIdProto& import = *model.add_opset_import();
    import.set_domain(kAmpcDomain);
    import.set_version(kAmpcOpsetVersion);
  }
  if (model.ir_version() < 8) model.set_ir_version(8);
  for (const auto& [op, entry] : first) {
    absl::StatusOr<FunctionText> body = AmpcVersionBody(*entry.first);
    if (!body.ok()) return body.status();
    absl::StatusOr<onnx::FunctionProto> function = ParseAmpcFunction(op, *body, opset);
    if (!function.ok()) return function.status();
    // Rebuilt where the model has it (the nodes may have gained outputs), else appended.
    onnx::FunctionProto* slot = nullptr;
    for (onnx::FunctionProto& f : *model.mutable_functions()) {
      if (f.domain() == kAmpcDomain && f.name() == op) slot = &f;
    }
    *(slot != nullptr ? slot : model.add_functions()) = *std::move(function);
  }
  return absl::OkStatus();
}

}  // namespace ampc
