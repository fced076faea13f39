#include "runtime/inline_functions.h"

#include <onnx/defs/schema.h>
#include <onnx/inliner/inliner.h>

#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "passes/float_support.h"
#include "passes/graph/onnx_status.h"

namespace ampc {
namespace {

using FunctionId = onnx::inliner::FunctionId;

const onnx::OpSchema* SchemaOf(const onnx::NodeProto& node, const OpsetVersions& opsets) {
  const std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
  auto opset = opsets.find(domain);
  if (opset == opsets.end()) return nullptr;
  return onnx::OpSchemaRegistry::Schema(node.op_type(), opset->second, domain);
}

// A body ONNX's inliner can put in the node's place: a model-local function of that name, or
// the schema's function (fixed or built for the node's input types) at the model's opset.
bool HasBody(const onnx::NodeProto& node, const onnx::ModelProto& model,
             const OpsetVersions& opsets) {
  for (const onnx::FunctionProto& f : model.functions()) {
    if (f.domain() == node.domain() && f.name() == node.op_type()) return true;
  }
  const onnx::OpSchema* schema = SchemaOf(node, opsets);
  if (schema == nullptr) return false;
  // Bodies are registered at the opset that defined them and serve later opsets too.
  const int version = opsets.at(node.domain() == "ai.onnx" ? "" : node.domain());
  return (schema->HasFunction() && schema->GetFunction(version) != nullptr) ||
         schema->HasContextDependentFunction();
}

// ONNX 1.23.2's inliner binds only the attributes a node states: a body reading a defaulted one
// (Swish's alpha) gets a Constant without a value. So the defaults are stated first.
void StateDefaultAttributes(onnx::NodeProto& node, const onnx::OpSchema& schema) {
  std::set<std::string> stated;
  for (const onnx::AttributeProto& a : node.attribute()) stated.insert(a.name());
  std::map<std::string, const onnx::AttributeProto*> defaults;
  for (const auto& [name, attribute] : schema.attributes()) {
    if (attribute.default_value.type() != onnx::AttributeProto::UNDEFINED &&
        !stated.contains(name)) {
      defaults.emplace(name, &attribute.default_value);
    }
  }
  for (const auto& [name, value] : defaults) {
    onnx::AttributeProto* added = node.add_attribute();
    *added = *value;
    added->set_name(name);
  }
}

// The inliner looks up the types of a context-dependent call's inputs among value_info, graph
// inputs and outputs, not initializers, and asks for omitted optional inputs ("") too: each
// initializer gets a value_info, and "" one without a type (RemoveEmptyName drops it after).
void DeclareInitializerTypes(onnx::GraphProto& graph) {
  graph.add_value_info();  // the name ""
  std::set<std::string> declared;
  for (const auto* list : {&graph.input(), &graph.value_info(), &graph.output()}) {
    for (const onnx::ValueInfoProto& v : *list) declared.insert(v.name());
  }
  for (const onnx::TensorProto& t : graph.initializer()) {
    if (declared.contains(t.name())) continue;
    onnx::ValueInfoProto* v = graph.add_value_info();
    v->set_name(t.name());
    onnx::TypeProto_Tensor* type = v->mutable_type()->mutable_tensor_type();
    type->set_elem_type(t.data_type());
    for (int64_t dim : t.dims()) type->mutable_shape()->add_dim()->set_dim_value(dim);
  }
}

void RemoveEmptyName(onnx::GraphProto& graph) {
  auto* infos = graph.mutable_value_info();
  for (int i = infos->size() - 1; i >= 0; --i) {
    if ((*infos)[i].name().empty()) infos->DeleteSubrange(i, 1);
  }
}

// The calls in the main graph with no kernel on `backend` but a body; their defaulted
// attributes are stated.
std::set<FunctionId> CallsToInline(onnx::ModelProto& model, const KernelRegistry& registry,
                                   const std::string& backend) {
  const OpsetVersions opsets = OpsetsOf(model);
  std::set<FunctionId> calls;
  for (onnx::NodeProto& node : *model.mutable_graph()->mutable_node()) {
    const std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
    auto opset = opsets.find(domain);
    const int version = opset == opsets.end() ? 0 : opset->second;
    if (registry.Has(domain, node.op_type(), backend, version) || !HasBody(node, model, opsets)) {
      continue;
    }
    calls.emplace(node.domain(), node.op_type());
    if (const onnx::OpSchema* schema = SchemaOf(node, opsets))
      StateDefaultAttributes(node, *schema);
  }
  return calls;
}

}  // namespace

absl::Status InlineFunctionsWithoutKernels(onnx::ModelProto& model, const KernelRegistry& registry,
                                           const std::string& backend) {
  // A body may call further ops without kernels (functions calling functions): a few rounds.
  constexpr int kRounds = 8;
  for (int round = 0; round < kRounds; ++round) {
    std::set<FunctionId> calls = CallsToInline(model, registry, backend);
    if (calls.empty()) return absl::OkStatus();
    const std::string op = absl::StrCat(
        calls.begin()->first.empty() ? "" : calls.begin()->first + ".", calls.begin()->second);
    DeclareInitializerTypes(*model.mutable_graph());
    absl::Status status =
        CatchOnnx(absl::StrCat("cannot run ", op, " (no kernel on the ", backend,
                               " backend) as its function body"),
                  [&] {
                    auto set = onnx::inliner::FunctionIdSet::Create({calls.begin(), calls.end()});
                    onnx::inliner::InlineSelectedFunctions(model, *set, nullptr);
                  });
    RemoveEmptyName(*model.mutable_graph());
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace ampc
