#include "passes/verify_input.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>

#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "passes/graph/attribute_values.h"
#include "passes/graph/function_calls.h"
#include "passes/graph/graph_index.h"
#include "passes/graph/onnx_status.h"
#include "passes/graph/status_macros.h"
#include "passes/graph/topo_sort.h"
#include "passes/opset/training_ops.h"
#include "passes/verify_tensors.h"

namespace ampc {

onnx::checker::CheckerContext CheckerFor(const onnx::ModelProto& model) {
  onnx::checker::CheckerContext checker;
  checker.set_ir_version(static_cast<int>(model.ir_version()));
  std::unordered_map<std::string, int> opsets;
  for (const onnx::OperatorSetIdProto& opset : model.opset_import()) {
    opsets[opset.domain()] = static_cast<int>(opset.version());
  }
  checker.set_opset_imports(std::move(opsets));
  return checker;
}

namespace {

constexpr int64_t kOldestIrVersion = 3;  // the first IR version with opset_import

absl::Status Invalid(const std::string& file, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": ", message));
}

absl::Status Invalid(const ModelContext& context, absl::string_view message) {
  return Invalid(context.file, message);
}

absl::Status CheckIrVersion(const onnx::ModelProto& model, const std::string& file) {
  const int64_t ir = model.ir_version();
  if (ir == 0) return Invalid(file, "ir_version is missing; not a valid ONNX model");
  if (ir < kOldestIrVersion || ir > onnx::IR_VERSION) {
    return Invalid(file, absl::StrCat("unsupported ir_version ", ir,
                                      "; this ampc (ONNX " AMPC_ONNX_VERSION ") reads IR versions ",
                                      kOldestIrVersion, " to ", int{onnx::IR_VERSION}));
  }
  return absl::OkStatus();
}

std::string DomainName(const std::string& domain) {
  return domain.empty() ? "the default ONNX domain" : "domain '" + domain + "'";
}

absl::Status CheckOpsets(const onnx::ModelProto& model, const std::string& file) {
  const auto& known = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  if (model.opset_import_size() == 0) {
    return Invalid(file, "the model imports no opset (opset_import is empty)");
  }
  for (const onnx::OperatorSetIdProto& opset : model.opset_import()) {
    const std::string domain = opset.domain() == "ai.onnx" ? "" : opset.domain();
    if (opset.version() < 1) {
      return Invalid(file, absl::StrCat("imports opset ", opset.version(), " of ",
                                        DomainName(domain), "; versions start at 1"));
    }
    auto it = known.find(domain);
    if (it == known.end()) continue;  // a custom domain: its ops are checked where they are used
    const int newest = it->second.second;
    if (opset.version() > newest) {
      return Invalid(
          file, absl::StrCat("imports opset ", opset.version(), " of ", DomainName(domain),
                             ", but this ampc is built with ONNX " AMPC_ONNX_VERSION
                             ", which knows opsets up to ",
                             newest, "; re-export the model with opset ", newest, " or lower"));
    }
  }
  return absl::OkStatus();
}

// ONNX's checker names the op type but not which node it rejects; find the first one that fails.
std::string LocateCheckerFailure(const onnx::ModelProto& model) {
  const onnx::checker::CheckerContext checker = CheckerFor(model);
  const onnx::GraphProto& graph = model.graph();
  onnx::checker::LexicalScopeContext scope;
  for (const onnx::ValueInfoProto& input : graph.input()) scope.add(input.name());
  for (const onnx::TensorProto& initializer : graph.initializer()) scope.add(initializer.name());
  for (const onnx::NodeProto& node : graph.node()) {
    for (const std::string& output : node.output()) scope.add(output);
  }
  for (int i = 0; i < graph.node_size(); ++i) {
    absl::Status status =
        CatchOnnx("", [&] { onnx::checker::check_node(graph.node(i), checker, scope); });
    if (!status.ok()) return absl::StrCat(DescribeNode(graph.node(i), i), ": ");
  }
  for (const auto* values : {&graph.input(), &graph.output()}) {
    const char* kind = values == &graph.input() ? "graph input" : "graph output";
    for (int i = 0; i < values->size(); ++i) {
      const onnx::ValueInfoProto& value = (*values)[i];
      if (CatchOnnx("", [&] { onnx::checker::check_value_info(value, checker); }).ok()) continue;
      return value.name().empty() ? absl::StrCat(kind, " #", i, ": ")
                                  : absl::StrCat(kind, " '", value.name(), "': ");
    }
  }
  for (const onnx::FunctionProto& function : model.functions()) {
    onnx::checker::LexicalScopeContext function_scope;
    if (CatchOnnx("", [&] {
          onnx::checker::check_function(function, checker, function_scope);
        }).ok()) {
      continue;
    }
    return absl::StrCat("function '", function.domain(), ".", function.name(), "': ");
  }
  return "";
}

}  // namespace

absl::Status CheckTrainingInfo(const onnx::ModelProto& model) {
  if (model.training_info_size() == 0) return absl::OkStatus();
  if (model.training_info_size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("the model has ", model.training_info_size(),
                                                   " training_info entries; ampc reads one"));
  }
  const onnx::TrainingInfoProto& info = model.training_info(0);
  onnx::checker::CheckerContext checker = CheckerFor(model);
  checker.set_is_main_graph(false);
  // The initialization graph sees the model's initializers; the algorithm, those and what the
  // initialization graph outputs.
  onnx::checker::LexicalScopeContext scope;
  for (const onnx::TensorProto& initializer : model.graph().initializer()) {
    scope.add(initializer.name());
  }
  auto check = [&](const char* name, const onnx::GraphProto& graph) {
    return CatchOnnx(absl::StrCat("training_info[0].", name),
                     [&] { onnx::checker::check_graph(graph, checker, scope); });
  };
  AMPC_RETURN_IF_ERROR(check("initialization", info.initialization()));
  for (const onnx::ValueInfoProto& output : info.initialization().output()) {
    scope.add(output.name());
  }
  AMPC_RETURN_IF_ERROR(check("algorithm", info.algorithm()));
  absl::flat_hash_set<std::string> algorithm_outputs;
  for (const onnx::ValueInfoProto& output : info.algorithm().output()) {
    algorithm_outputs.insert(output.name());
  }
  for (const onnx::StringStringEntryProto& binding : info.update_binding()) {
    if (!scope.this_or_ancestor_graph_has(binding.key())) {
      return absl::InvalidArgumentError(
          absl::StrCat("training_info[0].update_binding: '", binding.key(),
                       "' is neither an initializer nor an initialization output"));
    }
    if (!algorithm_outputs.contains(binding.value())) {
      return absl::InvalidArgumentError(absl::StrCat("training_info[0].update_binding: '",
                                                     binding.value(), "' (for '", binding.key(),
                                                     "') is not an output of the algorithm"));
    }
  }
  return absl::OkStatus();
}

namespace {

absl::Status Prefixed(const ModelContext& context, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(context.file, ": ", status.message()));
}

}  // namespace

absl::Status CheckVersions(const onnx::ModelProto& model, const std::string& file) {
  AMPC_RETURN_IF_ERROR(CheckIrVersion(model, file));
  return CheckOpsets(model, file);
}

absl::Status CheckHasOutputs(const onnx::ModelProto& model, const std::string& file) {
  if (model.graph().output_size() > 0) return absl::OkStatus();
  return Invalid(file,
                 "the graph declares no outputs, so it computes nothing (name at least "
                 "one in graph.output)");
}

absl::StatusOr<PassResult> VerifyInput::Run(ModelContext& context) {
  AMPC_RETURN_IF_ERROR(CheckVersions(context.model, context.file));
  if (!context.model.has_graph()) return Invalid(context, "the model has no graph");
  AMPC_RETURN_IF_ERROR(CheckHasOutputs(context.model, context.file));
  std::vector<std::string> warnings;
  if (absl::Status s = VerifyTensors(context.model, warnings); !s.ok()) return Prefixed(context, s);
  for (std::string& warning : warnings) context.Warn(std::move(warning));
  if (absl::Status s = CheckFunctionExpansion(context.model); !s.ok()) {
    return Prefixed(context, s);
  }
  if (absl::Status s = CheckAttributeValues(context.model); !s.ok()) return Prefixed(context, s);
  // Dangling inputs and values produced twice; the index ignores node order.
  if (absl::Status s = GraphIndex::Check(context.model.graph()); !s.ok()) {
    return Prefixed(context, s);
  }
  absl::StatusOr<bool> sorted = TopologicalSort(*context.model.mutable_graph());
  if (!sorted.ok()) return Prefixed(context, sorted.status());
  if (*sorted) {
    context.Warn("nodes were not in topological order; sorted them");
  }
  const onnx::ModelProto& model = context.model;
  RegisterAmpcSchemas();  // ampc's own outputs carry ai.ampc nodes
  absl::Status checked = CatchOnnx("ONNX checker", [&] { onnx::checker::check_model(model); });
  if (!checked.ok()) {
    return Invalid(context, absl::StrCat(LocateCheckerFailure(model), checked.message()));
  }
  if (absl::Status s = CheckTrainingInfo(model); !s.ok()) return Prefixed(context, s);
  return *sorted;
}

}  // namespace ampc
