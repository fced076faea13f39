// The canonical text printer; the format is specified in docs/text-format.md.
#include "compiler/printer.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "compiler/tensor_text.h"
#include "compiler/text_tokens.h"

namespace ampc {
namespace {

using onnx::AttributeProto;
using onnx::TensorProto;

constexpr size_t kMaxInlineSignature = 72;  // longer input/output lists print one per line

std::string Pad(int indent) { return std::string(2 * indent, ' '); }

template <typename List, typename Format>
std::string Join(const List& items, Format format, std::string_view sep = ", ") {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += sep;
    out += format(item);
    first = false;
  }
  return out;
}

std::string Dims(const google::protobuf::RepeatedField<int64_t>& dims) {
  if (dims.empty()) return "";
  return "[" + Join(dims, [](int64_t d) { return std::to_string(d); }) + "]";
}

std::string Shape(const onnx::TensorShapeProto& shape) {
  return "[" +
         Join(shape.dim(),
              [](const onnx::TensorShapeProto::Dimension& d) {
                if (d.has_dim_value()) return std::to_string(d.dim_value());
                return d.has_dim_param() ? Name(d.dim_param()) : std::string("?");
              }) +
         "]";
}

// `float[N, 4]`; `float` is a scalar (rank 0), `float[]` a tensor of unknown rank.
std::string TensorType(int32_t elem_type, bool has_shape, const onnx::TensorShapeProto& shape) {
  if (!has_shape) return ElemTypeName(elem_type) + "[]";
  return ElemTypeName(elem_type) + (shape.dim().empty() ? "" : Shape(shape));
}

std::string Type(const onnx::TypeProto& type) {
  switch (type.value_case()) {
    case onnx::TypeProto::kTensorType: {
      const auto& t = type.tensor_type();
      return TensorType(t.elem_type(), t.has_shape(), t.shape());
    }
    case onnx::TypeProto::kSequenceType:
      return "seq(" + Type(type.sequence_type().elem_type()) + ")";
    case onnx::TypeProto::kMapType:
      return "map(" + ElemTypeName(type.map_type().key_type()) + ", " +
             Type(type.map_type().value_type()) + ")";
    case onnx::TypeProto::kOptionalType:
      return "optional(" + Type(type.optional_type().elem_type()) + ")";
    case onnx::TypeProto::kSparseTensorType: {
      const auto& t = type.sparse_tensor_type();
      return "sparse_tensor(" + TensorType(t.elem_type(), t.has_shape(), t.shape()) + ")";
    }
    case onnx::TypeProto::kOpaqueType:
      return "opaque(" + Quote(type.opaque_type().domain()) + ", " +
             Quote(type.opaque_type().name()) + ")";
    default:
      return "any";
  }
}

std::string ValueInfo(const onnx::ValueInfoProto& v) {
  return v.has_type() ? Type(v.type()) + " " + Name(v.name()) : Name(v.name());
}

// A node's input or output list: an empty name prints as nothing, except in first and last
// place (ONNX's parser reads `Op(, X)` as an error and ignores a trailing comma).
std::string NameList(const google::protobuf::RepeatedPtrField<std::string>& names) {
  std::string out;
  for (int i = 0; i < names.size(); ++i) {
    if (i > 0) out += ", ";
    const bool inside = i > 0 && i + 1 < names.size();
    out += (inside && names[i].empty()) ? "" : Name(names[i]);
  }
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string StringPairs(const google::protobuf::RepeatedPtrField<onnx::StringStringEntryProto>& ps,
                        std::string (*format)(std::string_view)) {
  return "[" +
         Join(ps,
              [format](const onnx::StringStringEntryProto& p) {
                return format(p.key()) + " : " + format(p.value());
              }) +
         "]";
}

std::string Opsets(const google::protobuf::RepeatedPtrField<onnx::OperatorSetIdProto>& opsets) {
  return "[" +
         Join(opsets,
              [](const onnx::OperatorSetIdProto& o) {
                return Quote(o.domain()) + " : " + std::to_string(o.version());
              }) +
         "]";
}

std::string OpName(const onnx::NodeProto& node) {
  std::string domain;
  if (!node.domain().empty()) {
    bool dotted = true;
    for (size_t start = 0, end; start <= node.domain().size(); start = end + 1) {
      end = std::min(node.domain().find('.', start), node.domain().size());
      dotted = dotted && IsIdentifier(node.domain().substr(start, end - start));
    }
    domain = (dotted ? node.domain() : Quote(node.domain())) + ".";
  }
  return domain + Name(node.op_type());
}

using Fields = std::vector<std::pair<std::string, std::string>>;

// `<`, one `key: value` per line, `>`: the header of models and functions.
std::string Header(const Fields& fields) {
  std::string out = "<\n";
  for (size_t i = 0; i < fields.size(); ++i) {
    out +=
        "  " + fields[i].first + ": " + fields[i].second + (i + 1 < fields.size() ? ",\n" : "\n");
  }
  return out + ">\n";
}

// Adds `key: text` to a header when the field is present.
void AddField(Fields& fields, const char* key, bool present, std::string text) {
  if (present) fields.emplace_back(key, std::move(text));
}

std::string ModelHeader(const onnx::ModelProto& m) {
  Fields fields = {{"ir_version", std::to_string(m.ir_version())}};
  AddField(fields, "opset_import", !m.opset_import().empty(), Opsets(m.opset_import()));
  AddField(fields, "producer_name", !m.producer_name().empty(), Quote(m.producer_name()));
  AddField(fields, "producer_version", !m.producer_version().empty(), Quote(m.producer_version()));
  AddField(fields, "domain", !m.domain().empty(), Quote(m.domain()));
  AddField(fields, "model_version", m.model_version() != 0, std::to_string(m.model_version()));
  AddField(fields, "doc_string", !m.doc_string().empty(), Quote(m.doc_string()));
  AddField(fields, "metadata_props", !m.metadata_props().empty(),
           StringPairs(m.metadata_props(), Quote));
  return Header(fields);
}

// An attribute whose type field is unset shows the value of the first field that is set.
AttributeProto::AttributeType ValueKind(const AttributeProto& a) {
  if (a.type() != AttributeProto::UNDEFINED) return a.type();
  const std::pair<bool, AttributeProto::AttributeType> set_fields[] = {
      {a.has_f(), AttributeProto::FLOAT},
      {a.has_i(), AttributeProto::INT},
      {a.has_s(), AttributeProto::STRING},
      {a.has_t(), AttributeProto::TENSOR},
      {a.has_g(), AttributeProto::GRAPH},
      {a.has_sparse_tensor(), AttributeProto::SPARSE_TENSOR},
      {a.has_tp(), AttributeProto::TYPE_PROTO},
      {!a.floats().empty(), AttributeProto::FLOATS},
      {!a.ints().empty(), AttributeProto::INTS},
      {!a.strings().empty(), AttributeProto::STRINGS},
      {!a.tensors().empty(), AttributeProto::TENSORS},
      {!a.graphs().empty(), AttributeProto::GRAPHS},
      {!a.sparse_tensors().empty(), AttributeProto::SPARSE_TENSORS},
      {!a.type_protos().empty(), AttributeProto::TYPE_PROTOS}};
  for (const auto& [set, kind] : set_fields) {
    if (set) return kind;
  }
  return AttributeProto::UNDEFINED;
}

// Whether the value alone tells the parser the attribute's kind; if not, the text says `: kind`.
bool KindIsImplicit(const AttributeProto& a) {
  if (!a.ref_attr_name().empty()) return false;
  switch (a.type()) {
    case AttributeProto::FLOAT:
    case AttributeProto::INT:
    case AttributeProto::STRING:
    case AttributeProto::TENSOR:
    case AttributeProto::GRAPH:
      return true;
    case AttributeProto::FLOATS:
      return !a.floats().empty();
    case AttributeProto::INTS:
      return !a.ints().empty();
    case AttributeProto::STRINGS:
      return !a.strings().empty();
    default:
      return false;
  }
}

bool HasSubgraph(const onnx::NodeProto& node) {
  for (const auto& a : node.attribute()) {
    const auto kind = ValueKind(a);
    if (a.ref_attr_name().empty() &&
        (kind == AttributeProto::GRAPH || kind == AttributeProto::GRAPHS)) {
      return true;
    }
  }
  return false;
}

template <typename Items, typename Format>
std::string Bracketed(const Items& items, Format format) {
  return "[" + Join(items, format) + "]";
}

class Printer {
 public:
  explicit Printer(const PrintOptions& options) : options_(options) {}

  std::string Model(const onnx::ModelProto& model) const {
    std::string out = ModelHeader(model) + Graph(model.graph(), 0) + "\n";
    for (const auto& info : model.training_info()) out += TrainingInfo(info);
    for (const auto& function : model.functions()) out += Function(function);
    return out;
  }

 private:
  // `float[2] w = {1.0, 2.0}`; the name (and its `=`) is left out when empty and not required.
  std::string Tensor(const TensorProto& t, bool name_required) const {
    std::string out = ElemTypeName(t.data_type()) + Dims(t.dims());
    if (name_required || !t.name().empty()) out += " " + Name(t.name()) + " =";
    return out + " " + TensorValueText(t, options_.max_inline_elements);
  }

  std::string SparseTensor(const onnx::SparseTensorProto& t) const {
    return "sparse_tensor" + Dims(t.dims()) + " {values = " + Tensor(t.values(), false) +
           ", indices = " + Tensor(t.indices(), false) + "}";
  }

  std::string AttributeValue(const AttributeProto& a, int indent) const {
    auto tensor = [this](const TensorProto& t) { return Tensor(t, false); };
    auto sparse = [this](const onnx::SparseTensorProto& t) { return SparseTensor(t); };
    switch (ValueKind(a)) {
      case AttributeProto::FLOAT:
        return FormatFloat(a.f());
      case AttributeProto::INT:
        return std::to_string(a.i());
      case AttributeProto::STRING:
        return Quote(a.s());
      case AttributeProto::TENSOR:
        return tensor(a.t());
      case AttributeProto::GRAPH:
        return Graph(a.g(), indent);
      case AttributeProto::SPARSE_TENSOR:
        return sparse(a.sparse_tensor());
      case AttributeProto::TYPE_PROTO:
        return Type(a.tp());
      case AttributeProto::FLOATS:
        return Bracketed(a.floats(), [](float f) { return FormatFloat(f); });
      case AttributeProto::INTS:
        return Bracketed(a.ints(), [](int64_t i) { return std::to_string(i); });
      case AttributeProto::STRINGS:
        return Bracketed(a.strings(), Quote);
      case AttributeProto::TENSORS:
        return Bracketed(a.tensors(), tensor);
      case AttributeProto::SPARSE_TENSORS:
        return Bracketed(a.sparse_tensors(), sparse);
      case AttributeProto::TYPE_PROTOS:
        return Bracketed(a.type_protos(), Type);
      case AttributeProto::GRAPHS:
        return GraphList(a.graphs(), indent);
      default:
        return "";
    }
  }

  // `name = value`, `name: kind = value`, `name: kind = @reference`.
  std::string Attribute(const AttributeProto& a, int indent) const {
    std::string out = Name(a.name());
    if (!KindIsImplicit(a)) {
      std::string kind = AttributeProto::AttributeType_Name(a.type());
      std::transform(kind.begin(), kind.end(), kind.begin(), ::tolower);
      out += ": " + kind;
    }
    if (!a.ref_attr_name().empty()) return out + " = @" + Name(a.ref_attr_name());
    return ValueKind(a) == AttributeProto::UNDEFINED ? out
                                                     : out + " = " + AttributeValue(a, indent);
  }

  std::string GraphList(const google::protobuf::RepeatedPtrField<onnx::GraphProto>& graphs,
                        int indent) const {
    if (graphs.empty()) return "[]";
    std::string out = "[";
    for (int i = 0; i < graphs.size(); ++i) {
      out += "\n" + Pad(indent + 1) + Graph(graphs[i], indent + 1);
      if (i + 1 < graphs.size()) out += ",";
    }
    return out + "\n" + Pad(indent) + "]";
  }

  // `[name] Y = domain.Op <attributes> (X)`; with subgraphs, one attribute per line.
  std::string Node(const onnx::NodeProto& node, int indent) const {
    std::string out = Pad(indent);
    if (!node.name().empty()) out += "[" + Name(node.name()) + "] ";
    const std::string outputs = NameList(node.output());
    out += outputs + (outputs.empty() ? "= " : " = ") + OpName(node);
    if (!node.attribute().empty()) {
      const bool multiline = HasSubgraph(node);
      const std::string line_start = multiline ? "\n" + Pad(indent + 1) : "";
      out += " <" + line_start;
      for (int i = 0; i < node.attribute().size(); ++i) {
        if (i > 0) out += "," + (multiline ? line_start : " ");
        out += Attribute(node.attribute(i), indent + 1);
      }
      out += (multiline ? "\n" + Pad(indent) : "") + "> ";
    }
    return out + "(" + NameList(node.input()) + ")\n";
  }

  static std::string Signature(
      const google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& values, int indent) {
    const std::string inline_form = Join(values, ValueInfo);
    if (inline_form.size() <= kMaxInlineSignature) return "(" + inline_form + ")";
    return "(\n" + Pad(indent + 1) + Join(values, ValueInfo, ",\n" + Pad(indent + 1)) + "\n" +
           Pad(indent) + ")";
  }

  // Starts at the current position; nodes one level deeper than `indent`.
  std::string Graph(const onnx::GraphProto& graph, int indent) const {
    std::string out = Name(graph.name()) + " " + Signature(graph.input(), indent) + " => " +
                      Signature(graph.output(), indent);
    std::string locals;
    auto add_local = [&](const std::string& text) {
      locals += (locals.empty() ? "\n" : ",\n") + Pad(indent + 1) + text;
    };
    for (const auto& t : graph.initializer()) add_local(Tensor(t, true));
    for (const auto& t : graph.sparse_initializer()) add_local(SparseTensor(t));
    for (const auto& v : graph.value_info()) add_local(ValueInfo(v));
    if (!locals.empty()) out += " <" + locals + "\n" + Pad(indent) + ">";
    out += " {\n";
    for (const auto& node : graph.node()) out += Node(node, indent + 1);
    for (const auto& annotation : graph.quantization_annotation()) {
      out += Pad(indent + 1) + "quantization_annotation " + Name(annotation.tensor_name()) + " " +
             StringPairs(annotation.quant_parameter_tensor_names(), Name) + "\n";
    }
    return out + Pad(indent) + "}";
  }

  std::string TrainingInfo(const onnx::TrainingInfoProto& info) const {
    std::string out = "\ntraining_info {\n";
    if (info.has_initialization()) {
      out += "  initialization: " + Graph(info.initialization(), 1) + "\n";
    }
    if (!info.initialization_binding().empty()) {
      out += "  initialization_binding: " + StringPairs(info.initialization_binding(), Name) + "\n";
    }
    if (info.has_algorithm()) out += "  algorithm: " + Graph(info.algorithm(), 1) + "\n";
    if (!info.update_binding().empty()) {
      out += "  update_binding: " + StringPairs(info.update_binding(), Name) + "\n";
    }
    return out + "}\n";
  }

  std::string Function(const onnx::FunctionProto& f) const {
    Fields header = {{"domain", Quote(f.domain())}};
    AddField(header, "opset_import", !f.opset_import().empty(), Opsets(f.opset_import()));
    AddField(header, "doc_string", !f.doc_string().empty(), Quote(f.doc_string()));
    std::string out = "\n" + Header(header) + Name(f.name());
    if (!f.attribute().empty()) out += " <" + Join(f.attribute(), Name) + ">";
    out += " (" + Join(f.input(), Name) + ") => (" + Join(f.output(), Name) + ") {\n";
    for (const auto& node : f.node()) out += Node(node, 1);
    return out + "}\n";
  }

  const PrintOptions& options_;
};

}  // namespace

std::string PrintModel(const onnx::ModelProto& model, const PrintOptions& options) {
  return Printer(options).Model(model);
}

}  // namespace ampc