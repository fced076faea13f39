#include "compiler/report.h"

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "compiler/report_totals.h"
#include "passes/graph/tensor_data.h"

namespace ampc {
namespace {

using Json = nlohmann::ordered_json;

int64_t TensorBytes(const onnx::TensorProto& tensor) {
  if (tensor.data_type() == onnx::TensorProto::STRING) {
    int64_t bytes = 0;
    for (const std::string& s : tensor.string_data()) bytes += static_cast<int64_t>(s.size());
    return bytes;
  }
  const std::optional<uint64_t> bytes = DataBytes(tensor);
  if (!bytes.has_value()) return static_cast<int64_t>(tensor.raw_data().size());
  return static_cast<int64_t>(std::min<uint64_t>(*bytes, std::numeric_limits<int64_t>::max()));
}

// Calls `visit` on `graph` and on every graph nested in its nodes' attributes.
template <typename Visit>
void ForEachGraph(const onnx::GraphProto& graph, const Visit& visit) {
  visit(graph);
  for (const onnx::NodeProto& node : graph.node()) {
    for (const onnx::AttributeProto& attribute : node.attribute()) {
      if (attribute.has_g()) ForEachGraph(attribute.g(), visit);
      for (const onnx::GraphProto& sub : attribute.graphs()) ForEachGraph(sub, visit);
    }
  }
}

std::string DtypeCounts(const ReportTotals& totals) {
  std::vector<std::string> parts;
  for (const DtypeCount& count : totals.by_dtype) {
    parts.push_back(absl::StrCat(count.nodes, " ", count.dtype));
  }
  return absl::StrJoin(parts, ", ");
}

Json NodesJson(const ReportTotals& totals) {
  Json nodes = Json::array();
  for (const PlannedNode& row : totals.rows) {
    const NodePlan& p = *row.plan;
    nodes.push_back(Json{{"name", p.name},
                         {"op", row.op},
                         {"dtype", DtypeName(p.dtype)},
                         {"category", std::string(CategoryName(p.category))},
                         {"rule", p.rule},
                         {"casts_added", p.casts_added}});
  }
  return nodes;
}

// FLOP counts are whole numbers; as integers while they fit.
Json FlopCount(double flops) {
  if (flops < 1.8e19) return static_cast<uint64_t>(flops);
  return flops;
}

Json FlopsJson(const ReportTotals& totals) {
  if (!totals.flops.has_value()) return nullptr;
  const FlopsEstimate& f = *totals.flops;
  return Json{{"low", FlopCount(f.low)},
              {"total", FlopCount(f.total)},
              {"low_share", f.total > 0 ? Json(f.low / f.total) : Json(nullptr)},
              {"nodes_estimated", f.estimated},
              {"nodes_without_static_shapes", f.unknown}};
}

Json VersionsJson(const ModelVersions& versions) {
  Json opsets = Json::object();
  for (const auto& [domain, version] : versions.opsets) opsets[domain] = version;
  return Json{{"ir_version", versions.ir}, {"opsets", opsets}};
}

Json OrNull(const std::string& text) { return text.empty() ? Json(nullptr) : Json(text); }

// Each diagnostic with its fields: node and value are null where it names none.
Json DiagnosticsJson(const std::vector<Diagnostic>& diagnostics) {
  Json list = Json::array();
  for (const Diagnostic& d : diagnostics) {
    list.push_back({{"severity", "warning"},
                    {"pass", d.pass},
                    {"node", OrNull(d.node)},
                    {"value", OrNull(d.value)},
                    {"message", d.message}});
  }
  return list;
}

Json SummaryJson(const CompileSummary& summary, const ReportTotals& totals) {
  Json by_dtype = Json::object();
  for (const DtypeCount& count : totals.by_dtype) by_dtype[count.dtype] = count.nodes;
  const PrecisionPlan* plan = summary.plan;
  return Json{{"nodes", totals.nodes},
              {"nodes_by_dtype", by_dtype},
              {"casts",
               {{"before", summary.casts_before},
                {"after", summary.casts_after},
                {"added", totals.casts_added},
                {"removed", totals.casts_removed},
                {"added_at_graph_outputs", totals.casts_at_graph_outputs}}},
              {"constants_converted", plan == nullptr ? 0 : plan->constants_converted},
              {"values_clamped", plan == nullptr ? 0 : plan->values_clamped},
              {"values_flushed_to_zero", plan == nullptr ? 0 : plan->values_flushed_to_zero},
              {"weight_bytes",
               {{"before", summary.weight_bytes_before}, {"after", summary.weight_bytes_after}}},
              {"versions",
               {{"before", VersionsJson(summary.versions_before)},
                {"after", VersionsJson(summary.versions_after)}}},
              {"flops", FlopsJson(totals)},
              {"seconds", summary.seconds}};
}

}  // namespace

int64_t WeightBytes(const onnx::ModelProto& model) {
  int64_t bytes = 0;
  ForEachGraph(model.graph(), [&](const onnx::GraphProto& graph) {
    for (const onnx::TensorProto& init : graph.initializer()) bytes += TensorBytes(init);
    for (const onnx::SparseTensorProto& sparse : graph.sparse_initializer()) {
      bytes += TensorBytes(sparse.values()) + TensorBytes(sparse.indices());
    }
  });
  return bytes;
}

int64_t CountCasts(const onnx::ModelProto& model) {
  int64_t casts = 0;
  ForEachGraph(model.graph(), [&](const onnx::GraphProto& graph) {
    for (const onnx::NodeProto& node : graph.node()) {
      casts += node.op_type() == "Cast" && (node.domain().empty() || node.domain() == "ai.onnx");
    }
  });
  return casts;
}

ModelVersions VersionsOf(const onnx::ModelProto& model) {
  ModelVersions versions{model.ir_version(), {}};
  for (const onnx::OperatorSetIdProto& opset : model.opset_import()) {
    versions.opsets[opset.domain() == "ai.onnx" ? "" : opset.domain()] = opset.version();
  }
  return versions;
}

std::string VersionChanges(const CompileSummary& summary) {
  const ModelVersions& before = summary.versions_before;
  const ModelVersions& after = summary.versions_after;
  std::vector<std::string> changes;
  if (before.ir != after.ir) changes.push_back(absl::StrCat("IR ", before.ir, " -> ", after.ir));
  for (const auto& [domain, version] : after.opsets) {
    const std::string name = domain.empty() ? "opset" : domain;
    auto was = before.opsets.find(domain);
    if (was == before.opsets.end()) {
      changes.push_back(absl::StrCat(name, " ", version, " added"));
    } else if (was->second != version) {
      changes.push_back(absl::StrCat(name, " ", was->second, " -> ", version));
    }
  }
  return absl::StrJoin(changes, ", ");
}

std::string SummaryLine(const CompileSummary& summary) {
  CompileSummary counts_only = summary;
  counts_only.model = nullptr;  // the line shows no FLOPs: the model's nodes need no walk
  const ReportTotals totals = ComputeTotals(counts_only);
  std::string line = absl::StrCat("ampc: ", summary.input);
  if (!summary.output.empty()) absl::StrAppend(&line, " -> ", summary.output);
  if (summary.plan == nullptr) {
    absl::StrAppend(&line, ": autocast did not run; casts ", summary.casts_before, " -> ",
                    summary.casts_after);
  } else {
    absl::StrAppend(&line, ": ", totals.nodes, " nodes: ", DtypeCounts(totals), "; casts +",
                    totals.casts_added, " -", totals.casts_removed, " (", summary.casts_before,
                    " -> ", summary.casts_after, ")");
  }
  absl::StrAppend(&line, "; weights ", HumanBytes(summary.weight_bytes_before), " -> ",
                  HumanBytes(summary.weight_bytes_after));
  if (const std::string changes = VersionChanges(summary); !changes.empty()) {
    absl::StrAppend(&line, "; ", changes);
  }
  if (!totals.warnings.empty()) {
    absl::StrAppend(&line, "; ", totals.warnings.size(),
                    totals.warnings.size() == 1 ? " warning" : " warnings");
  }
  absl::StrAppend(&line, absl::StrFormat("; %.2f s", summary.seconds));
  return line;
}

std::string ReportJson(const CompileSummary& summary) {
  const ReportTotals totals = ComputeTotals(summary);
  const PrecisionPlan* plan = summary.plan;
  Json report{{"version", 1},
              {"input", summary.input},
              {"output", summary.output.empty() ? Json(nullptr) : Json(summary.output)},
              {"dtype", plan == nullptr ? Json(nullptr) : Json(DtypeName(plan->low_dtype))},
              {"low_io", plan == nullptr ? Json(nullptr) : Json(plan->low_io)},
              {"clamp", plan == nullptr ? Json(nullptr) : Json(plan->clamp)},
              {"nodes", NodesJson(totals)},
              {"summary", SummaryJson(summary, totals)},
              {"warnings", totals.warnings},
              {"diagnostics", DiagnosticsJson(summary.diagnostics)}};
  // Names are bytes in ONNX; invalid UTF-8 is replaced rather than failing the report.
  return report.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace ampc
