#include "compiler/report_totals.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ampc {
namespace {

// Every node of every graph of the model: the plan's node pointers are only read when the node
// is still there (a later pass may have removed it).
absl::flat_hash_set<const onnx::NodeProto*> NodesOf(const onnx::ModelProto& model) {
  absl::flat_hash_set<const onnx::NodeProto*> nodes;
  std::vector<const onnx::GraphProto*> graphs = {&model.graph()};
  while (!graphs.empty()) {
    const onnx::GraphProto* graph = graphs.back();
    graphs.pop_back();
    for (const onnx::NodeProto& node : graph->node()) {
      nodes.insert(&node);
      for (const onnx::AttributeProto& a : node.attribute()) {
        if (a.has_g()) graphs.push_back(&a.g());
        for (const onnx::GraphProto& sub : a.graphs()) graphs.push_back(&sub);
      }
    }
  }
  return nodes;
}

std::string OpKey(const onnx::NodeProto& node) {
  if (node.domain().empty() || node.domain() == "ai.onnx") return node.op_type();
  return absl::StrCat(node.domain(), ".", node.op_type());
}

// Rows in plan order, and the live nodes for the FLOPs estimate. Without the model, no node
// pointer is read: ops are named by type alone and FLOPs are not estimated.
void CollectRows(const CompileSummary& summary, ReportTotals& totals) {
  const PrecisionPlan& plan = *summary.plan;
  absl::flat_hash_set<const onnx::NodeProto*> live;
  if (summary.model != nullptr) live = NodesOf(*summary.model);
  std::vector<FlopsNode> flops_nodes;
  for (const onnx::NodeProto* node : plan.order) {
    auto it = plan.nodes.find(node);
    if (it == plan.nodes.end()) continue;
    const bool readable = live.contains(node);
    totals.rows.push_back({&it->second, readable ? OpKey(*node) : it->second.op_type});
    if (readable) flops_nodes.push_back({node, it->second.dtype == plan.low_dtype});
  }
  totals.nodes = static_cast<int64_t>(totals.rows.size());
  if (summary.model != nullptr) totals.flops = EstimateFlops(*summary.model, flops_nodes);
}

void CountByDtype(const PrecisionPlan& plan, ReportTotals& totals) {
  totals.by_dtype = {{DtypeName(plan.low_dtype), 0}, {"fp32", 0}};
  int64_t kept = 0;
  for (const PlannedNode& row : totals.rows) {
    if (row.plan->dtype == 0) {
      ++kept;
      continue;
    }
    const std::string name = DtypeName(row.plan->dtype);
    auto count = std::find_if(totals.by_dtype.begin(), totals.by_dtype.end(),
                              [&](const DtypeCount& c) { return c.dtype == name; });
    if (count == totals.by_dtype.end()) {
      totals.by_dtype.push_back({name, 1});
    } else {
      ++count->nodes;
    }
  }
  totals.by_dtype.push_back({"kept", kept});
}

void CountCastsAdded(const CompileSummary& summary, ReportTotals& totals) {
  int64_t per_node = 0;
  for (const auto& [node, plan] : summary.plan->nodes) per_node += plan.casts_added;
  totals.casts_added = summary.plan->casts_added;
  totals.casts_at_graph_outputs = std::max<int64_t>(0, totals.casts_added - per_node);
}

void CollectWarnings(const PrecisionPlan& plan, ReportTotals& totals) {
  if (plan.values_clamped > 0) {
    totals.warnings.push_back(
        absl::StrCat(plan.values_clamped, " constant values clamped to +-65504 (--clamp)"));
  }
  if (plan.values_flushed_to_zero > 0) {
    totals.warnings.push_back(absl::StrCat(plan.values_flushed_to_zero,
                                           " non-zero constant values flushed to zero in ",
                                           DtypeName(plan.low_dtype)));
  }
}

}  // namespace

ReportTotals ComputeTotals(const CompileSummary& summary) {
  ReportTotals totals;
  for (const Diagnostic& diagnostic : summary.diagnostics) {
    totals.warnings.push_back(diagnostic.message);
  }
  if (summary.plan != nullptr) {
    CollectRows(summary, totals);
    CountByDtype(*summary.plan, totals);
    CountCastsAdded(summary, totals);
    CollectWarnings(*summary.plan, totals);
  }
  // Casts the plan does not account for (another pass added them) count as added, so the
  // numbers always add up: before + added - removed == after.
  const int64_t removed = summary.casts_before + totals.casts_added - summary.casts_after;
  if (removed >= 0) {
    totals.casts_removed = removed;
  } else {
    totals.casts_added -= removed;
  }
  return totals;
}

std::string HumanBytes(int64_t bytes) {
  if (bytes < 1000) return absl::StrCat(bytes, " B");
  constexpr const char* kUnits[] = {"kB", "MB", "GB", "TB", "PB"};
  double value = static_cast<double>(bytes) / 1000;
  int unit = 0;
  while (value >= 999.95 && unit < 4) {
    value /= 1000;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

}  // namespace ampc
