// `ampc explain`: the per-node decisions and the summary, for people.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "compiler/diagnostics.h"
#include "compiler/report.h"
#include "compiler/report_totals.h"

namespace ampc {
namespace {

constexpr size_t kMaxNameWidth = 48;
constexpr size_t kMaxOpWidth = 28;

// Moves `pos` back to the start of a UTF-8 character.
size_t CharStart(const std::string& s, size_t pos) {
  while (pos > 0 && pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) --pos;
  return pos;
}

// Keeps both ends of a long name (they tell nodes apart: "/encoder/layer.11/attn/MatMul_1").
std::string Shorten(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  const size_t head = CharStart(s, (width - 3) / 3);
  const size_t tail = CharStart(s, s.size() - (width - 3 - head));
  return absl::StrCat(s.substr(0, head), "...", s.substr(tail));
}

struct Row {
  std::string name, op, dtype, casts, rule;
};

std::vector<Row> Rows(const ReportTotals& totals) {
  std::vector<Row> rows;
  for (const PlannedNode& row : totals.rows) {
    const NodePlan& p = *row.plan;
    // Names come from the model: a newline or ESC in one could forge a line on the terminal.
    rows.push_back({Shorten(EscapeForDiagnostic(p.name), kMaxNameWidth),
                    Shorten(EscapeForDiagnostic(row.op), kMaxOpWidth), DtypeName(p.dtype),
                    absl::StrCat(p.casts_added), EscapeForDiagnostic(p.rule)});
  }
  return rows;
}

std::string Table(const std::vector<Row>& rows) {
  Row header{"node", "op", "dtype", "casts", "rule"};
  size_t name = header.name.size(), op = header.op.size(), dtype = header.dtype.size();
  for (const Row& row : rows) {
    name = std::max(name, row.name.size());
    op = std::max(op, row.op.size());
    dtype = std::max(dtype, row.dtype.size());
  }
  std::string out;
  auto line = [&](const Row& row) {
    absl::StrAppend(&out, absl::StrFormat("%-*s  %-*s  %-*s  %5s  %s\n", name, row.name, op, row.op,
                                          dtype, row.dtype, row.casts, row.rule));
  };
  line(header);
  for (const Row& row : rows) line(row);
  return out;
}

std::string HumanFlops(double flops) {
  constexpr const char* kUnits[] = {"FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"};
  int unit = 0;
  while (flops >= 999.5 && unit < 5) {
    flops /= 1000;
    ++unit;
  }
  return unit == 0 ? absl::StrFormat("%.0f FLOP", flops)
                   : absl::StrFormat("%.2f %s", flops, kUnits[unit]);
}

constexpr char kFlopOps[] = "MatMul/Gemm/Conv/ConvTranspose/Einsum";

std::string FlopsText(const PrecisionPlan& plan, const ReportTotals& totals) {
  if (!totals.flops.has_value()) return "n/a (no model to read shapes from)";
  const FlopsEstimate& f = *totals.flops;
  if (f.estimated == 0 && f.unknown == 0) return absl::StrCat("n/a (no ", kFlopOps, " nodes)");
  if (f.estimated == 0) {
    return absl::StrCat("n/a (no static shapes for the ", f.unknown, " ", kFlopOps, " nodes)");
  }
  if (f.total <= 0) return "n/a (the sized nodes compute nothing: empty tensors)";
  std::string text =
      absl::StrFormat("%.1f%% in %s (%s of %s, estimated over %d %s node%s", 100 * f.low / f.total,
                      DtypeName(plan.low_dtype), HumanFlops(f.low), HumanFlops(f.total),
                      f.estimated, kFlopOps, f.estimated == 1 ? "" : "s");
  if (f.unknown > 0) absl::StrAppend(&text, "; ", f.unknown, " more without static shapes");
  return text + ")";
}

std::string CastsText(const CompileSummary& summary, const ReportTotals& totals) {
  std::string text = absl::StrCat("+", totals.casts_added, " -", totals.casts_removed, " (",
                                  summary.casts_before, " -> ", summary.casts_after, ")");
  if (totals.casts_at_graph_outputs > 0) {
    absl::StrAppend(&text, "; ", totals.casts_at_graph_outputs,
                    " of them cast graph outputs back to their declared dtype");
  }
  return text;
}

std::string Heading(const CompileSummary& summary) {
  const PrecisionPlan* plan = summary.plan;
  if (plan == nullptr) {
    return absl::StrCat(EscapeForDiagnostic(summary.input), ": autocast did not run (",
                        EscapeForDiagnostic(summary.no_autocast_because),
                        "): no per-node decisions\n");
  }
  return absl::StrCat(EscapeForDiagnostic(summary.input), ": low dtype ",
                      DtypeName(plan->low_dtype),
                      plan->low_io ? "; --low-io: float graph I/O in the low dtype"
                                   : "; graph I/O keeps its declared types",
                      plan->clamp ? "; --clamp" : "", "\n\n");
}

// Below opset 22, the nodes that run as their ai.ampc versions are standard ops once upgraded.
std::string AmpcVersionsHint(const ReportTotals& totals) {
  const int64_t count =
      std::count_if(totals.rows.begin(), totals.rows.end(),
                    [](const PlannedNode& row) { return row.plan->ampc_version; });
  if (count == 0) return "";
  return absl::StrCat(count,
                      count == 1 ? " node runs as its ai.ampc version (its schema gains"
                                 : " nodes run as their ai.ampc versions (their schemas gain",
                      " bfloat16 at opset 22); --target-opset 22 runs ",
                      count == 1 ? "it as a standard op" : "them as standard ops");
}

std::string SummaryText(const CompileSummary& summary, const ReportTotals& totals) {
  const PrecisionPlan* plan = summary.plan;
  std::vector<std::string> counts;
  for (const DtypeCount& c : totals.by_dtype) counts.push_back(absl::StrCat(c.nodes, " ", c.dtype));
  std::string out = "\nsummary\n";
  auto item = [&](absl::string_view label, const std::string& text) {
    absl::StrAppend(&out, absl::StrFormat("  %-10s %s\n", label, text));
  };
  if (plan != nullptr) {
    item("nodes", absl::StrCat(totals.nodes, ": ", absl::StrJoin(counts, ", ")));
  }
  item("casts", CastsText(summary, totals));
  if (plan != nullptr) {
    item("constants", absl::StrCat(plan->constants_converted, " converted"));
    item("FLOPs", FlopsText(*plan, totals));
  }
  item("weights",
       absl::StrCat(HumanBytes(summary.weight_bytes_before), " -> ",
                    HumanBytes(summary.weight_bytes_after), " (", summary.weight_bytes_before,
                    " -> ", summary.weight_bytes_after, " bytes)"));
  if (const std::string changes = VersionChanges(summary); !changes.empty()) {
    item("versions", changes);
  }
  if (const std::string hint = AmpcVersionsHint(totals); !hint.empty()) item("hint", hint);
  item("warnings", totals.warnings.empty() ? "none" : absl::StrCat(totals.warnings.size()));
  for (const std::string& warning : totals.warnings) {
    absl::StrAppend(&out, "    - ", EscapeForDiagnostic(warning), "\n");
  }
  return out;
}

}  // namespace

std::string ExplainTable(const CompileSummary& summary) {
  const ReportTotals totals = ComputeTotals(summary);
  std::string out = Heading(summary);
  if (summary.plan != nullptr) out += Table(Rows(totals));
  return out + SummaryText(summary, totals);
}

}  // namespace ampc
