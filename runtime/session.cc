#include "runtime/session.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <exception>
#include <map>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/graph/attribute_values.h"
#include "passes/graph/function_calls.h"
#include "passes/graph/status_macros.h"
#include "passes/opset/training_ops.h"
#include "runtime/conv_fusion.h"
#include "runtime/inline_functions.h"

namespace ampc {
namespace {

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

std::map<std::string, int> OpsetsOf(const onnx::ModelProto& m) {
  std::map<std::string, int> opsets;
  for (const onnx::OperatorSetIdProto& opset : m.opset_import()) {
    opsets[opset.domain() == "ai.onnx" ? "" : opset.domain()] = static_cast<int>(opset.version());
  }
  return opsets;
}

// Every required attribute present and every known one of its schema's type: ONNX's inference
// functions assume both (Scan's read a missing num_scan_inputs through a null pointer; found by
// fuzz/session_fuzzer.cc).
absl::Status CheckAttributes(const onnx::NodeProto& node, const onnx::OpSchema& schema) {
  for (const auto& [name, formal] : schema.attributes()) {
    const onnx::AttributeProto* found = nullptr;
    for (const onnx::AttributeProto& attribute : node.attribute()) {
      if (attribute.name() == name) found = &attribute;
    }
    if (found == nullptr) {
      if (!formal.required) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid model: ", NodeLabel(node), ": required attribute '", name, "' is missing"));
    }
    if (found->type() != formal.type) {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid model: ", NodeLabel(node), ": attribute '", name, "' is ",
          onnx::AttributeProto::AttributeType_Name(found->type()), ", its schema says ",
          onnx::AttributeProto::AttributeType_Name(formal.type)));
    }
  }
  return absl::OkStatus();
}

// Each node's input and output counts within its schema's range, and no required input omitted,
// in every graph: kernels index inputs on that promise. (ONNX's checker checks this too, but it
// also refuses graph inputs and outputs declared without a shape, which runnable models have.)
absl::Status CheckArity(const onnx::GraphProto& graph, const std::map<std::string, int>& opsets) {
  for (const onnx::NodeProto& node : graph.node()) {
    const std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
    auto opset = opsets.find(domain);
    const onnx::OpSchema* schema =
        opset == opsets.end()
            ? nullptr
            : onnx::OpSchemaRegistry::Schema(node.op_type(), opset->second, domain);
    if (schema != nullptr) {
      const int inputs = node.input_size(), outputs = node.output_size();
      if (inputs < schema->min_input() || inputs > schema->max_input() ||
          outputs < schema->min_output() || outputs > schema->max_output()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "invalid model: ", NodeLabel(node), " has ", inputs, " inputs and ", outputs,
            " outputs; its schema allows ", schema->min_input(), "-", schema->max_input(), " and ",
            schema->min_output(), "-", schema->max_output()));
      }
      const auto& formals = schema->inputs();
      for (int i = 0; i < inputs && i < static_cast<int>(formals.size()); ++i) {
        if (node.input(i).empty() &&
            formals[i].GetOption() == onnx::OpSchema::FormalParameterOption::Single) {
          return absl::InvalidArgumentError(absl::StrCat("invalid model: ", NodeLabel(node),
                                                         ": required input ", i, " ('",
                                                         formals[i].GetName(), "') is empty"));
        }
      }
      AMPC_RETURN_IF_ERROR(CheckAttributes(node, *schema));
    }
    for (const onnx::AttributeProto& attribute : node.attribute()) {
      if (attribute.has_g()) AMPC_RETURN_IF_ERROR(CheckArity(attribute.g(), opsets));
      for (const auto& g : attribute.graphs()) AMPC_RETURN_IF_ERROR(CheckArity(g, opsets));
    }
  }
  return absl::OkStatus();
}

// Infers every value's type from the nodes (the main graph's value_info and declared output types
// are set aside first, so a declaration cannot make a kernel write past a buffer sized by it),
// then checks the declarations against the inferred types. Node-level type-constraint violations
// that ONNX's strict mode rejects (an int64 Constant at opset 6, say) are run as written.
absl::Status CheckAndInferTypes(onnx::ModelProto& m) {
  absl::flat_hash_map<std::string, int32_t> declared;
  AMPC_RETURN_IF_ERROR(CheckArity(m.graph(), OpsetsOf(m)));  // inlined bodies included
  if (absl::Status s = CheckAttributeValues(m); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("invalid model: ", s.message()));
  }
  try {
    onnx::GraphProto& graph = *m.mutable_graph();
    google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> kept;
    for (const auto& value : graph.value_info()) {
      if (value.type().has_tensor_type()) {
        declared[value.name()] = value.type().tensor_type().elem_type();
      } else {
        *kept.Add() = value;
      }
    }
    graph.mutable_value_info()->Swap(&kept);
    for (auto& output : *graph.mutable_output()) {
      if (!output.type().has_tensor_type()) continue;  // sequences, optionals: kept as declared
      declared[output.name()] = output.type().tensor_type().elem_type();
      output.mutable_type()->mutable_tensor_type()->set_elem_type(0);
      output.mutable_type()->mutable_tensor_type()->clear_shape();
    }
    onnx::ShapeInferenceOptions options{/*check_type=*/false, /*error_mode=*/0,
                                        /*enable_data_propagation=*/false};
    onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("invalid model: ", FirstLine(e.what())));
  }
  TypeMap inferred;
  CollectTypes(m.graph(), inferred);
  // Where nothing could be inferred (an op without a schema in this ONNX), the declaration stands.
  for (auto& output : *m.mutable_graph()->mutable_output()) {
    if (!output.type().has_tensor_type()) continue;
    auto it = inferred.find(output.name());
    auto declaration = declared.find(output.name());
    const int32_t type = it != inferred.end()            ? static_cast<int32_t>(it->second)
                         : declaration != declared.end() ? declaration->second
                                                         : 0;
    output.mutable_type()->mutable_tensor_type()->set_elem_type(type);
  }
  for (const auto& [name, type] : declared) {
    if (type == 0 || inferred.contains(name)) continue;
    onnx::ValueInfoProto* value = m.mutable_graph()->add_value_info();
    value->set_name(name);
    value->mutable_type()->mutable_tensor_type()->set_elem_type(type);
  }
  for (const auto& [name, type] : declared) {
    auto it = inferred.find(name);
    if (type == 0 || it == inferred.end() || static_cast<int32_t>(it->second) == type) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid model: value '", name, "' is declared ", DTypeName(static_cast<DType>(type)),
        " but its node computes ", DTypeName(it->second)));
  }
  return absl::OkStatus();
}

}  // namespace

Session::Session(onnx::ModelProto model, Backend& backend)
    : model_(std::move(model)), backend_(backend) {}

absl::StatusOr<std::unique_ptr<Session>> Session::Create(onnx::ModelProto model,
                                                         const KernelRegistry& registry,
                                                         Backend& backend) {
  RegisterAmpcSchemas();  // models compiled for training use ai.ampc ops
  std::unique_ptr<Session> session(new Session(std::move(model), backend));
  onnx::ModelProto& m = session->model_;
  // The checker (arity, attribute types, required inputs present) and types inferred from the
  // nodes, not taken from declarations, make the model safe to run: kernels index only inputs
  // the schema requires and size outputs by the type the node computes.
  // Ops without a kernel that have a body (Gelu-20, a model-local function) run as that body;
  // their nodes are checked and the expansion bounded first (inference would expand forever).
  AMPC_RETURN_IF_ERROR(CheckArity(m.graph(), OpsetsOf(m)));
  AMPC_RETURN_IF_ERROR(CheckFunctionExpansion(m));
  AMPC_RETURN_IF_ERROR(InlineFunctionsWithoutKernels(m, registry, backend.name()));
  if (absl::Status status = CheckAndInferTypes(m); !status.ok()) return status;
  TypeMap types;
  CollectTypes(m.graph(), types);
  FuseConvs(*m.mutable_graph(), types);
  ExecutorEnv env{registry, backend, OpsetsOf(m)};
  absl::StatusOr<std::unique_ptr<GraphExecutor>> executor =
      GraphExecutor::Create(m.graph(), env, TypeMap());
  if (!executor.ok()) return executor.status();
  session->executor_ = *std::move(executor);
  if (!session->executor_->free_variables().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "value '", session->executor_->free_variables()[0], "' is used but never defined"));
  }
  absl::flat_hash_set<std::string> initializers;
  for (const auto& init : m.graph().initializer()) initializers.insert(init.name());
  for (const auto& input : m.graph().input()) {
    session->inputs_.push_back(SpecOf(input));
    session->inputs_.back().has_default = initializers.contains(input.name());
  }
  for (const auto& output : m.graph().output()) session->outputs_.push_back(SpecOf(output));
  return session;
}

ValueSpec SpecOf(const onnx::ValueInfoProto& value) {
  ValueSpec spec{value.name(), DType::kUndefined, {}};
  if (!value.type().has_tensor_type()) return spec;
  const auto& tensor_type = value.type().tensor_type();
  spec.dtype = static_cast<DType>(tensor_type.elem_type());
  spec.rank_known = tensor_type.has_shape();
  for (const auto& dim : tensor_type.shape().dim()) {
    spec.dims.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
  }
  return spec;
}

absl::Status CheckInput(const ValueSpec& spec, const Tensor& tensor) {
  if (tensor.dtype() != spec.dtype) {
    return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "': expected ",
                                                   DTypeName(spec.dtype), ", got ",
                                                   DTypeName(tensor.dtype())));
  }
  bool fits = !spec.rank_known || spec.dims.size() == tensor.shape().size();
  for (size_t i = 0; fits && i < spec.dims.size(); ++i) {
    fits = spec.dims[i] < 0 || spec.dims[i] == tensor.shape()[i];
  }
  if (!fits) {
    std::string declared = absl::StrCat(
        "[",
        absl::StrJoin(spec.dims, ",",
                      [](std::string* out, int64_t d) {
                        absl::StrAppend(out, d < 0 ? std::string("?") : absl::StrCat(d));
                      }),
        "]");
    return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "': expected shape ",
                                                   declared, ", got ",
                                                   ShapeString(tensor.shape())));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> Session::Run(std::span<const Tensor> inputs) const {
  if (inputs.size() != inputs_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", inputs_.size(), " inputs, got ", inputs.size()));
  }
  std::vector<Tensor> feeds;
  feeds.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& tensor = inputs[i];
    if (tensor.empty()) {
      if (!inputs_[i].has_default) {
        return absl::InvalidArgumentError(absl::StrCat("input '", inputs_[i].name, "' is missing"));
      }
      feeds.emplace_back();
      continue;
    }
    if (absl::Status status = CheckInput(inputs_[i], tensor); !status.ok()) return status;
    // A host input goes to the device when (and if) a device kernel reads it: the executor's
    // placement. A tensor of another device is copied here.
    absl::StatusOr<Tensor> fed = InHostMemory(tensor) ? tensor : OnBackend(tensor, backend_);
    if (!fed.ok()) return fed.status();
    feeds.push_back(*std::move(fed));
  }
  return executor_->Run(feeds, {});
}

}  // namespace ampc
