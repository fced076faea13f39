// What a compile did, for people (`ampc explain`, the stderr summary line) and tools (--report).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "passes/pass.h"
#include "passes/precision_plan.h"

namespace ampc {

// A model's IR version and the opset it imports per domain ("" is the default domain).
struct ModelVersions {
  int64_t ir = 0;
  std::map<std::string, int64_t> opsets;
};
ModelVersions VersionsOf(const onnx::ModelProto& model);

struct CompileSummary {
  std::string input, output;            // paths as given; output empty for explain
  int64_t weight_bytes_before = 0;      // bytes of all initializers, input model
  int64_t weight_bytes_after = 0;       // same, output model
  int64_t casts_before = 0;             // Cast nodes in the input model (all graphs)
  int64_t casts_after = 0;              // Cast nodes in the output model
  double seconds = 0;                   // whole compile, load to save
  const PrecisionPlan* plan = nullptr;  // null when autocast did not run
  // The compiled model the plan's nodes belong to: shapes for the FLOPs estimate ("n/a" if null).
  const onnx::ModelProto* model = nullptr;
  std::string no_autocast_because;  // why plan is null: "--dtype=fp32" or "--passes"
  // What the passes reported (sorting, NaN weights, ops not in the policy, ...), in order.
  std::vector<Diagnostic> diagnostics;
  ModelVersions versions_before, versions_after;  // what the compile raised or added, if anything
};

// Bytes of all initializers of every graph (sparse ones included); Cast nodes of every graph.
int64_t WeightBytes(const onnx::ModelProto& model);
int64_t CountCasts(const onnx::ModelProto& model);

// "IR 8 -> 10, opset 17 -> 22, ai.ampc 1 added" (the versions the compile changed), or "".
std::string VersionChanges(const CompileSummary& summary);
// One line for stderr: nodes per dtype, casts added/removed, weight bytes before -> after,
// the version changes, warnings, time.
std::string SummaryLine(const CompileSummary& summary);
// For people: the per-node table (node, op, dtype, casts added, the rule that decided) and the
// summary (nodes per dtype, casts, share of FLOPs in the low dtype, weights, warnings).
std::string ExplainTable(const CompileSummary& summary);
// --report FILE.json: per node and the summary, machine-readable (schema in docs/autocast.md).
std::string ReportJson(const CompileSummary& summary);

}  // namespace ampc
