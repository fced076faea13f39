#include "passes/autodiff/autodiff.h"

#include <re2/re2.h>

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "passes/autodiff/function_bodies.h"
#include "passes/autodiff/gradient_builder.h"
#include "passes/autodiff/gradient_rules.h"
#include "passes/graph/status_macros.h"
#include "passes/graph/tensor_data.h"
#include "passes/opset/standard_op_versions.h"

namespace ampc {
namespace {

// Whether `value` may carry a gradient: a float tensor, or of unknown type.
bool MayBeFloat(const GraphIndex& index, const std::string& value) {
  if (value.empty()) return false;
  const onnx::TypeProto* type = index.Type(value);
  if (type == nullptr) return true;
  return type->has_tensor_type() && (type->tensor_type().elem_type() == 0 ||
                                     IsFloatElementType(type->tensor_type().elem_type()));
}

// Default-domain ops and their ai.ampc versions (the same op in BF16) share the gradient rules.
bool HasStandardRule(const onnx::NodeProto& node) {
  return node.domain().empty() || node.domain() == "ai.onnx" || IsAmpcVersion(node);
}

// Whether input `slot` of `node` carries a gradient (ops without a rule: every float input, so
// that the missing rule is reported).
bool Differentiable(const GraphIndex& index, const onnx::NodeProto& node, int slot) {
  if (!MayBeFloat(index, node.input(slot))) return false;
  if (!HasStandardRule(node)) return true;
  const GradientRule* rule = FindGradientRule(node.op_type());
  if (rule == nullptr) return true;
  return std::find(rule->constant_inputs.begin(), rule->constant_inputs.end(), slot) ==
         rule->constant_inputs.end();
}

// Values that reach one of `seeds` through differentiable inputs, the seeds included.
absl::flat_hash_set<std::string> ReachSeeds(const GraphIndex& index,
                                            const std::vector<std::string>& seeds) {
  absl::flat_hash_set<std::string> reach(seeds.begin(), seeds.end());
  const auto& nodes = index.graph().node();
  for (int i = nodes.size() - 1; i >= 0; --i) {
    const onnx::NodeProto& node = nodes.Get(i);
    bool on_path = false;
    for (const std::string& output : node.output()) on_path = on_path || reach.contains(output);
    if (!on_path) continue;
    for (int slot = 0; slot < node.input_size(); ++slot) {
      if (Differentiable(index, node, slot)) reach.insert(node.input(slot));
    }
  }
  return reach;
}

std::string SumOf(GradientBuilder& builder, const std::vector<std::string>& parts) {
  if (parts.size() == 1) return parts[0];
  return builder.Op(parts.size() == 2 ? "Add" : "Sum", parts);
}

// Declares `grad`, the gradient of forward value `value`, with `value`'s type: runtimes then
// know it without the schemas of the ai.ampc ops that produce some gradients.
void DeclareType(onnx::GraphProto& graph, const GraphIndex& forward, const std::string& value,
                 const std::string& grad, const std::string& seed,
                 absl::flat_hash_set<std::string>& typed) {
  const onnx::TypeProto* type = forward.Type(value);
  if (type == nullptr || grad == seed || !typed.insert(grad).second) return;
  onnx::ValueInfoProto& info = *graph.add_value_info();
  info.set_name(grad);
  *info.mutable_type() = *type;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> TrainableParameters(const GraphIndex& forward,
                                                             const std::string& loss,
                                                             const std::string& freeze_regex) {
  if (forward.Source(loss) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("the loss '", loss, "' is no value of the graph"));
  }
  RE2 freeze(freeze_regex.empty() ? "$^" : freeze_regex, RE2::Quiet);
  if (!freeze.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--freeze='", freeze_regex, "': ", freeze.error()));
  }
  const absl::flat_hash_set<std::string> reach = ReachSeeds(forward, {loss});
  std::vector<std::string> parameters;
  for (const onnx::TensorProto& initializer : forward.graph().initializer()) {
    if (!IsFloatElementType(initializer.data_type()) || !reach.contains(initializer.name()))
      continue;
    if (!freeze_regex.empty() && RE2::FullMatch(initializer.name(), freeze)) continue;
    parameters.push_back(initializer.name());
  }
  return parameters;
}

namespace {

// One backward sweep: over `forward`'s nodes, copied into `graph` from node `first` on, from the
// gradients `seeds` gives values to the gradients of `wanted` ("" for one no seed reaches).
struct Sweep {
  onnx::GraphProto& graph;
  const GraphIndex& forward;
  int first;
  NameAllocator& names;
  int opset;
  const std::string& loss;                  // for diagnostics
  const std::string& seed;                  // the loss's gradient: declared by the caller
  absl::flat_hash_set<std::string>& typed;  // gradients given a value_info
};

absl::StatusOr<std::vector<std::string>> Backward(
    const Sweep& sweep, const std::vector<std::pair<std::string, std::string>>& seeds,
    const std::vector<std::string>& wanted);

// The gradients of `node`'s inputs (those `needs_grad` marks) through its function body, whose
// nodes are appended to `sweep.graph` as a recomputation.
absl::StatusOr<std::vector<std::string>> BodyGradients(const Sweep& sweep, GradientBuilder& builder,
                                                       const onnx::NodeProto& node,
                                                       const std::vector<std::string>& output_grads,
                                                       const std::vector<bool>& needs_grad,
                                                       ExpandedBody& body) {
  onnx::GraphProto& graph = sweep.graph;
  const int first = graph.node_size();
  for (const onnx::NodeProto& n : body.model.graph().node()) *graph.add_node() = n;
  for (const onnx::ValueInfoProto& info : body.model.graph().value_info()) {
    *graph.add_value_info() = info;
  }
  AMPC_ASSIGN_OR_RETURN(std::unique_ptr<GraphIndex> index, GraphIndex::Build(body.model.graph()));
  std::vector<std::pair<std::string, std::string>> seeds;
  for (size_t k = 0; k < output_grads.size(); ++k) {
    if (!output_grads[k].empty() && !body.outputs[k].empty()) {
      seeds.emplace_back(body.outputs[k], output_grads[k]);
    }
  }
  std::vector<std::string> wanted;
  for (int slot = 0; slot < node.input_size(); ++slot) {
    if (needs_grad[slot]) wanted.push_back(node.input(slot));
  }
  Sweep inner{graph, *index, first, sweep.names, sweep.opset, sweep.loss, sweep.seed, sweep.typed};
  AMPC_ASSIGN_OR_RETURN(std::vector<std::string> grads, Backward(inner, seeds, wanted));
  std::vector<std::string> result(node.input_size());
  for (int slot = 0, k = 0; slot < node.input_size(); ++slot) {
    if (!needs_grad[slot]) continue;
    // An input the body does not differentiate through (a cache, a mask) gets zeros.
    result[slot] = grads[k].empty() ? builder.ZerosLike(node.input(slot)) : grads[k];
    ++k;
  }
  return result;
}

absl::StatusOr<std::vector<std::string>> Backward(
    const Sweep& sweep, const std::vector<std::pair<std::string, std::string>>& seeds,
    const std::vector<std::string>& wanted) {
  const GraphIndex& forward = sweep.forward;
  onnx::GraphProto& graph = sweep.graph;
  const auto& nodes = forward.graph().node();
  if (graph.node_size() < sweep.first + nodes.size()) {
    return absl::InternalError("autodiff: the graph does not start with the forward nodes");
  }
  std::vector<std::string> seed_values;
  for (const auto& [value, grad] : seeds) seed_values.push_back(value);
  const absl::flat_hash_set<std::string> reach = ReachSeeds(forward, seed_values);
  // Each value that depends on a wanted value, with the first such (for diagnostics).
  absl::flat_hash_map<std::string, std::string> depends;
  for (const std::string& value : wanted) depends.emplace(value, value);
  std::vector<std::string> origin(nodes.size());  // "" for a node no wanted value reaches
  for (int i = 0; i < nodes.size(); ++i) {
    const onnx::NodeProto& node = nodes.Get(i);
    for (int slot = 0; slot < node.input_size() && origin[i].empty(); ++slot) {
      auto it = depends.find(node.input(slot));
      if (it != depends.end() && Differentiable(forward, node, slot)) origin[i] = it->second;
    }
    if (origin[i].empty()) continue;
    for (const std::string& output : node.output()) {
      if (MayBeFloat(forward, output)) depends.emplace(output, origin[i]);
    }
  }

  GradientBuilder builder(graph, sweep.names, forward);
  absl::flat_hash_set<std::string>& typed = sweep.typed;
  absl::flat_hash_map<std::string, std::vector<std::string>> partials;
  for (const auto& [value, grad] : seeds) partials[value].push_back(grad);
  for (int i = nodes.size() - 1; i >= 0; --i) {
    const onnx::NodeProto& node = nodes.Get(i);
    if (origin[i].empty()) continue;
    std::vector<std::string> output_grads;
    bool any = false;
    builder.SetPrefix(node.name().empty() ? absl::StrCat("#", i) : node.name());
    for (const std::string& output : node.output()) {
      auto it = partials.find(output);
      const bool has = it != partials.end() && depends.contains(output) && reach.contains(output);
      output_grads.push_back(has ? SumOf(builder, it->second) : "");
      any = any || has;
    }
    if (!any) continue;
    const std::string description = forward.Describe(node);
    std::vector<bool> needs_grad(node.input_size());
    for (int slot = 0; slot < node.input_size(); ++slot) {
      needs_grad[slot] = depends.contains(node.input(slot)) && reach.contains(node.input(slot)) &&
                         Differentiable(forward, node, slot);
    }
    const GradientRule* rule = HasStandardRule(node) ? FindGradientRule(node.op_type()) : nullptr;
    std::vector<std::string> input_grads;
    if (rule != nullptr) {
      GradientContext context(*graph.mutable_node(sweep.first + i), description, builder,
                              std::move(output_grads), needs_grad);
      if (absl::Status s = rule->emit(context); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("autodiff: ", s.message()));
      }
      input_grads = context.input_grads();
    } else {
      const bool standard = node.domain().empty() || node.domain() == "ai.onnx";
      absl::StatusOr<ExpandedBody> body =
          standard ? ExpandFunctionBody(node, forward, sweep.opset, sweep.names)
                   : absl::NotFoundError("");
      if (!body.ok() && !absl::IsNotFound(body.status())) {
        return absl::InvalidArgumentError(
            absl::StrCat("autodiff: ", description,
                         " has no gradient rule and is differentiated through its function "
                         "body, but ",
                         body.status().message()));
      }
      if (!body.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "autodiff: ", description, " has no gradient rule; it is on the path from '", origin[i],
            "' to the loss '", sweep.loss, "'"));
      }
      AMPC_ASSIGN_OR_RETURN(input_grads,
                            BodyGradients(sweep, builder, node, output_grads, needs_grad, *body));
    }
    for (int slot = 0; slot < node.input_size(); ++slot) {
      const std::string& grad = input_grads[slot];
      if (needs_grad[slot] && grad.empty()) {
        return absl::InternalError(absl::StrCat("autodiff: ", description,
                                                ": the rule gave no gradient for input ", slot));
      }
      if (!needs_grad[slot]) continue;
      partials[node.input(slot)].push_back(grad);
      DeclareType(graph, forward, node.input(slot), grad, sweep.seed, typed);
    }
  }

  std::vector<std::string> gradients;
  for (const std::string& value : wanted) {
    auto it = partials.find(value);
    if (it == partials.end()) {
      gradients.push_back("");
      continue;
    }
    builder.SetPrefix(value);
    gradients.push_back(SumOf(builder, it->second));
    DeclareType(graph, forward, value, gradients.back(), sweep.seed, typed);
  }
  return gradients;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> AppendGradients(onnx::GraphProto& graph,
                                                         const GraphIndex& forward,
                                                         const GradientRequest& request,
                                                         NameAllocator& names) {
  absl::flat_hash_set<std::string> typed;
  const Sweep sweep{graph, forward, 0, names, request.opset, request.loss, request.seed, typed};
  AMPC_ASSIGN_OR_RETURN(std::vector<std::string> gradients,
                        Backward(sweep, {{request.loss, request.seed}}, request.parameters));
  for (size_t i = 0; i < gradients.size(); ++i) {
    if (gradients[i].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("autodiff: the loss '", request.loss, "' does not depend on '",
                       request.parameters[i], "' through any input with a gradient"));
    }
  }
  return gradients;
}

}  // namespace ampc
