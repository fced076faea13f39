// The numbers every view of a compile shows (the stderr line, `ampc explain`, --report JSON),
// computed in one place so the views agree.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/flops_estimate.h"
#include "compiler/report.h"

namespace ampc {

struct DtypeCount {
  std::string dtype;  // "fp16", "bf16", "fp32", "kept", ...
  int64_t nodes = 0;
};

// One planned node, in plan order.
struct PlannedNode {
  const NodePlan* plan;
  std::string op;  // as the policy keys it: "Softmax", or "domain.OpType" outside the default
};

struct ReportTotals {
  std::vector<PlannedNode> rows;     // every planned node (the Casts ampc added are not planned)
  int64_t nodes = 0;                 // rows.size()
  std::vector<DtypeCount> by_dtype;  // the low dtype, fp32, any other, then "kept"
  // before + added - removed == after, always.
  int64_t casts_added = 0;
  int64_t casts_removed = 0;
  int64_t casts_at_graph_outputs = 0;  // added casts no node asked for (outputs cast back)
  std::optional<FlopsEstimate> flops;  // nullopt without a plan or without the model
  std::vector<std::string> warnings;  // the passes' diagnostics, clamped and flushed-to-zero counts
};

ReportTotals ComputeTotals(const CompileSummary& summary);

// "812 B", "4.2 kB", "1.3 MB" (powers of 1000).
std::string HumanBytes(int64_t bytes);

}  // namespace ampc
