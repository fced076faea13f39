// Einsum's gradient: the gradient of operand i is an Einsum of dy with the other operands, back to
// operand i's labels. Labels only operand i has (summed within it) are broadcast back by Expand;
// "..." dims that operand i broadcast are summed where its run-time shape is 1.
#include <onnx/defs/attr_proto_util.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "passes/autodiff/gradient_rules.h"

namespace ampc {
namespace {

using onnx::MakeAttribute;

constexpr char kEllipsis = '.';  // a term's "..." is kept as one '.' while planning

struct EinsumTerms {
  std::vector<std::string> inputs;
  std::string output;
};

// The terms with "..." as one '.', spaces dropped, and the implicit output made explicit ("..."
// and then the letters used once, in ASCII order).
EinsumTerms ParseEquation(std::string equation) {
  equation.erase(std::remove(equation.begin(), equation.end(), ' '), equation.end());
  for (size_t at; (at = equation.find("...")) != std::string::npos;) equation.replace(at, 3, ".");
  EinsumTerms terms;
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  terms.inputs = absl::StrSplit(lhs, ',');
  if (arrow != std::string::npos) {
    terms.output = equation.substr(arrow + 2);
  } else {
    std::string once;
    for (char label : lhs) {
      if (label != ',' && label != kEllipsis && std::count(lhs.begin(), lhs.end(), label) == 1) {
        once.push_back(label);
      }
    }
    std::sort(once.begin(), once.end());
    terms.output = (lhs.find(kEllipsis) != std::string::npos ? "." : "") + once;
  }
  return terms;
}

std::string Spelled(const std::string& term) { return absl::StrReplaceAll(term, {{".", "..."}}); }

// The gradient of operand `slot`, whose term is `own`.
absl::Status OperandGrad(GradientContext& c, const EinsumTerms& terms, int slot) {
  GradientBuilder& b = c.b();
  const std::string& own = terms.inputs[slot];
  const bool ellipsis = own.find(kEllipsis) != std::string::npos;
  for (char label : own) {
    if (std::count(own.begin(), own.end(), label) > 1) {
      return c.Error(absl::StrCat("Einsum term '", Spelled(own), "' repeats label '",
                                  std::string(1, label), "' (a diagonal): it has no gradient"));
    }
  }
  if (ellipsis && terms.output.find(kEllipsis) == std::string::npos) {
    return c.Error("Einsum sums its \"...\" dims (the output has none): it has no gradient");
  }
  // Letters of `own` that dy or another operand has: the Einsum can produce them.
  std::string others = terms.output;
  for (int j = 0; j < static_cast<int>(terms.inputs.size()); ++j) {
    if (j != slot) others += terms.inputs[j];
  }
  std::string kept, missing;
  for (char label : own) {
    if (label == kEllipsis) continue;
    (others.find(label) != std::string::npos ? kept : missing).push_back(label);
  }
  std::vector<std::string> input_terms = {Spelled(terms.output)};
  std::vector<std::string> inputs = {c.dy()};
  for (int j = 0; j < static_cast<int>(terms.inputs.size()); ++j) {
    if (j == slot) continue;
    input_terms.push_back(Spelled(terms.inputs[j]));
    inputs.push_back(c.input(j));
  }
  const std::string produced = (ellipsis ? "." : "") + kept;  // the Einsum's output term
  const std::string equation =
      absl::StrCat(absl::StrJoin(input_terms, ","), "->", Spelled(produced));
  std::string grad = b.Op("Einsum", inputs, {MakeAttribute("equation", equation)});
  absl::StatusOr<std::vector<Dim>> dims = c.DimsOf(c.input(slot));
  absl::StatusOr<std::vector<Dim>> y_dims = c.DimsOf(c.output(0));
  if (!dims.ok() || !y_dims.ok()) return !dims.ok() ? dims.status() : y_dims.status();
  const auto letters = [](const std::string& term) {
    return static_cast<int64_t>(term.size()) - (term.find(kEllipsis) != std::string::npos);
  };
  const int64_t ellipsis_rank = static_cast<int64_t>(dims->size()) - letters(own);
  const int64_t dy_ellipsis_rank = static_cast<int64_t>(y_dims->size()) - letters(terms.output);
  if (ellipsis && dy_ellipsis_rank > 0) {
    // The Einsum's "..." has dy's (broadcast) dims: operand i keeps the last ellipsis_rank of
    // them, summed where its own run-time size is 1; the others are summed away.
    const int64_t from = dy_ellipsis_rank - ellipsis_rank;
    std::vector<int64_t> lead;
    for (int64_t k = 0; k < from; ++k) lead.push_back(k);
    std::string axes = b.Ints(lead);
    if (ellipsis_rank > 0) {
      const int64_t begin = static_cast<int64_t>(own.find(kEllipsis));
      const std::string own_ellipsis =
          b.Op("Slice",
               {b.Op("Shape", {c.input(slot)}), b.Ints({begin}), b.Ints({begin + ellipsis_rank})});
      const std::string ones = b.Op("NonZero", {b.Op("Equal", {own_ellipsis, b.Ints({1})})});
      const std::string shifted =
          b.Op("Add", {b.Op("Reshape", {ones, b.Ints({-1})}), b.Ints({from})});
      axes = b.Op("Concat", {axes, shifted}, {MakeAttribute("axis", 0L)});
    }
    grad = b.Op("ReduceSum", {grad, axes},
                {MakeAttribute("keepdims", 1L), MakeAttribute("noop_with_empty_axes", 1L)});
    if (from > 0) {
      const std::string shape =
          b.Op("Slice", {b.Op("Shape", {grad}), b.Ints({from}), b.Ints({INT64_MAX})});
      grad = b.Op("Reshape", {grad, shape});
    }
  }
  // grad's axes: the ellipsis dims, then `kept`; then `missing` as size-1 axes.
  if (!missing.empty()) {
    std::vector<int64_t> axes;
    for (size_t k = 0; k < missing.size(); ++k) {
      axes.push_back(ellipsis_rank + static_cast<int64_t>(kept.size() + k));
    }
    grad = b.Op("Unsqueeze", {grad, b.Ints(axes)});
  }
  std::vector<int64_t> perm;
  const std::string order = kept + missing;
  for (char label : own) {
    if (label == kEllipsis) {
      for (int64_t k = 0; k < ellipsis_rank; ++k) perm.push_back(k);
    } else {
      perm.push_back(ellipsis_rank + static_cast<int64_t>(order.find(label)));
    }
  }
  if (!std::is_sorted(perm.begin(), perm.end())) {
    grad = b.Op("Transpose", {grad}, {MakeAttribute("perm", perm)});
  }
  if (!missing.empty()) grad = b.Op("Expand", {grad, b.ShapeOf(c.input(slot))});
  c.SetGrad(slot, grad);
  return absl::OkStatus();
}

absl::Status EinsumGrad(GradientContext& c) {
  const EinsumTerms terms = ParseEquation(c.String("equation", ""));
  if (static_cast<int>(terms.inputs.size()) != c.num_inputs()) {
    return c.Error("the Einsum equation's terms do not match its inputs");
  }
  for (int slot = 0; slot < c.num_inputs(); ++slot) {
    if (!c.NeedsGrad(slot)) continue;
    if (absl::Status s = OperandGrad(c, terms, slot); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

void AddEinsumGradientRules(GradientRuleTable& table) {
  table.emplace_back("Einsum", GradientRule{EinsumGrad, {}});
}

}  // namespace ampc
