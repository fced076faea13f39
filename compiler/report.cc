// placeholder: being written
#include "compiler/report.h"

#include "absl/strings/str_format.h"

namespace ampc {
int64_t WeightBytes(const onnx::ModelProto& model) { return 0; }
int64_t CountCasts(const onnx::ModelProto& model) { return 0; }
std::string SummaryLine(const CompileSummary& s) {
  return absl::StrFormat("ampc: %s -> %s: %.2f s", s.input, s.output, s.seconds);
}
std::string ExplainTable(const CompileSummary& summary) { return ""; }
std::string ReportJson(const CompileSummary& summary) { return "{}"; }
}  // namespace ampc
