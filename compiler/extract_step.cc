#include "compiler/extract_step.h"

#include <map>
#include <memory>
#include <set>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "compiler/exit_codes.h"
#include "compiler/file_io.h"
#include "compiler/model_io.h"
#include "kernels/cpu/cpu_kernels.h"
#include "passes/graph/status_macros.h"
#include "passes/opset/training_ops.h"
#include "passes/verify.h"
#include "passes/verify_input.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/core/tensor_proto.h"
#include "runtime/session.h"

ABSL_FLAG(bool, with_state, false,
          "ampc extract-step: give every state input its current value as an initializer.");
ABSL_DECLARE_FLAG(std::string, output);

namespace ampc {
namespace {

// Names `graph` (and its subgraphs) read that it does not define itself: what it takes from an
// enclosing scope, in order of first use.
void OuterReads(const onnx::GraphProto& graph, std::set<std::string> defined,
                std::vector<std::string>& reads, std::set<std::string>& seen) {
  for (const auto& v : graph.input()) defined.insert(v.name());
  for (const auto& t : graph.initializer()) defined.insert(t.name());
  for (const auto& node : graph.node()) {
    for (const std::string& name : node.input()) {
      if (!name.empty() && !defined.contains(name) && seen.insert(name).second) {
        reads.push_back(name);
      }
    }
    for (const auto& attribute : node.attribute()) {
      if (attribute.has_g()) OuterReads(attribute.g(), defined, reads, seen);
      for (const auto& g : attribute.graphs()) OuterReads(g, defined, reads, seen);
    }
    for (const std::string& name : node.output()) defined.insert(name);
  }
}

onnx::ValueInfoProto InputOf(const onnx::TensorProto& tensor) {
  onnx::ValueInfoProto input;
  input.set_name(tensor.name());
  auto* type = input.mutable_type()->mutable_tensor_type();
  type->set_elem_type(tensor.data_type());
  auto* shape = type->mutable_shape();
  for (int64_t d : tensor.dims()) shape->add_dim()->set_dim_value(d);
  return input;
}

// The initialization graph's outputs, computed on ampc's CPU runtime.
absl::StatusOr<std::vector<onnx::TensorProto>> InitialState(const onnx::ModelProto& model) {
  const onnx::GraphProto& initialization = model.training_info(0).initialization();
  if (initialization.output_size() == 0) return std::vector<onnx::TensorProto>{};
  onnx::ModelProto init;
  init.set_ir_version(model.ir_version());
  *init.mutable_opset_import() = model.opset_import();
  *init.mutable_functions() = model.functions();
  *init.mutable_graph() = initialization;
  CpuBackend backend(1);
  absl::StatusOr<std::unique_ptr<Session>> session =
      Session::Create(std::move(init), DefaultRegistry(), backend);
  if (!session.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the initialization graph: ", session.status().message()));
  }
  absl::StatusOr<std::vector<Tensor>> values = (*session)->Run({});
  if (!values.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("running the initialization graph: ", values.status().message()));
  }
  std::vector<onnx::TensorProto> state;
  for (int i = 0; i < initialization.output_size(); ++i) {
    state.push_back(TensorToProto((*values)[i], initialization.output(i).name()));
  }
  return state;
}

}  // namespace

absl::StatusOr<onnx::ModelProto> ExtractTrainingStep(const onnx::ModelProto& model,
                                                     bool with_state) {
  if (model.training_info_size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "has ", model.training_info_size(),
        " training_info entries, not 1 (compile a training model with ampc MODEL -o OUT --train "
        "--loss LOSS)"));
  }
  const onnx::TrainingInfoProto& info = model.training_info(0);
  const onnx::GraphProto& algorithm = info.algorithm();
  std::map<std::string, const onnx::TensorProto*> parameters;
  for (const auto& t : model.graph().initializer()) parameters[t.name()] = &t;
  std::map<std::string, const onnx::ValueInfoProto*> state_items;
  for (const auto& v : info.initialization().output()) state_items[v.name()] = &v;

  // The state inputs: update_binding keys, then other values read from the enclosing scopes.
  std::vector<std::string> reads;
  std::set<std::string> seen;
  OuterReads(algorithm, {}, reads, seen);
  std::vector<std::string> state;
  std::set<std::string> in_state;
  for (const auto& binding : info.update_binding()) {
    if (in_state.insert(binding.key()).second) state.push_back(binding.key());
  }
  for (const auto& t : model.graph().initializer()) {
    if (seen.contains(t.name()) && in_state.insert(t.name()).second) state.push_back(t.name());
  }
  for (const auto& v : info.initialization().output()) {
    if (seen.contains(v.name()) && in_state.insert(v.name()).second) state.push_back(v.name());
  }
  for (const std::string& name : reads) {
    if (!in_state.contains(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the training step reads '", name,
                       "', which neither the graph's initializers nor the initialization define"));
    }
  }

  onnx::ModelProto step;
  step.set_ir_version(model.ir_version());
  step.set_producer_name("ampc extract-step");
  *step.mutable_opset_import() = model.opset_import();
  *step.mutable_functions() = model.functions();
  *step.mutable_metadata_props() = model.metadata_props();
  onnx::GraphProto& graph = *step.mutable_graph();
  graph = algorithm;
  std::vector<onnx::TensorProto> initial;
  if (with_state) {
    AMPC_ASSIGN_OR_RETURN(initial, InitialState(model));
  }
  std::map<std::string, const onnx::TensorProto*> initial_by_name;
  for (const auto& t : initial) initial_by_name[t.name()] = &t;
  for (const std::string& name : state) {
    if (auto it = parameters.find(name); it != parameters.end()) {
      *graph.add_input() = InputOf(*it->second);
      if (with_state) *graph.add_initializer() = *it->second;
    } else if (auto item = state_items.find(name); item != state_items.end()) {
      *graph.add_input() = *item->second;
      if (with_state) *graph.add_initializer() = *initial_by_name.at(name);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "update_binding key '", name,
          "' is neither an initializer of the graph nor an output of the initialization"));
    }
  }
  RegisterAmpcSchemas();
  onnx::ModelProto checked = step;
  ModelContext context(checked, "the extracted step");
  if (absl::StatusOr<PassResult> verified = Verify().Run(context); !verified.ok()) {
    return verified.status();
  }
  return step;
}

absl::Status ExtractStepCommand(const std::vector<std::string>& args) {
  if (args.size() != 2) return UsageError("usage: ampc extract-step MODEL -o STEP [--with-state]");
  const std::string& input = args[1];
  const std::string output = absl::GetFlag(FLAGS_output);
  if (output.empty()) return UsageError("ampc extract-step needs -o STEP (where to write it)");
  AMPC_RETURN_IF_ERROR(CheckSaveDestination(output));
  if (SameFile(input, output)) {
    return UsageError(
        absl::StrCat("-o ", output, " is the input file; ampc never overwrites its input"));
  }
  AMPC_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(input));
  AMPC_RETURN_IF_ERROR(CheckVersions(loaded.model, input));
  if (absl::Status s = CheckTrainingInfo(loaded.model); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(input, ": ", s.message()));
  }
  NoteInputs(input, loaded);
  AMPC_RETURN_IF_ERROR(CheckNotInput(output, "-o"));
  absl::StatusOr<onnx::ModelProto> step =
      ExtractTrainingStep(loaded.model, absl::GetFlag(FLAGS_with_state));
  if (!step.ok()) {
    return absl::Status(step.status().code(), absl::StrCat(input, ": ", step.status().message()));
  }
  SaveOptions options;
  options.input_used_external_data = loaded.used_external_data;
  options.keep = loaded.data_files;
  return SaveModel(*step, output, options);
}

}  // namespace ampc
