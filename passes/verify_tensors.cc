#include "passes/verify_tensors.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/graph/deferred_data.h"
#include "passes/graph/float_scan.h"
#include "passes/graph/graph_index.h"
#include "passes/graph/status_macros.h"
#include "passes/graph/tensor_data.h"

namespace ampc {
namespace {

using onnx::TensorProto;

constexpr int32_t kNewestDataType = onnx::TensorProto_DataType_DataType_MAX;

std::string DimsText(const TensorProto& t) {
  return absl::StrCat("[", absl::StrJoin(t.dims(), ","), "]");
}

absl::Status CheckData(const TensorProto& t, const std::string& where) {
  const int32_t type = t.data_type();
  if (type == TensorProto::UNDEFINED || type < 0 || type > kNewestDataType) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": data type ", type,
                     type == 0 ? " (UNDEFINED)" : " is unknown to ONNX " AMPC_ONNX_VERSION));
  }
  for (int64_t dim : t.dims()) {
    if (dim < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": dims ", DimsText(t), " has a negative dim"));
    }
  }
  if (t.data_location() == TensorProto::EXTERNAL) return absl::OkStatus();  // not loaded here
  uint64_t elements = 1;
  for (int64_t dim : t.dims()) {
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(dim), &elements) ||
        elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": dims ", DimsText(t), " overflow (over 2^63 elements)"));
    }
  }
  if (type == TensorProto::STRING) {
    if (static_cast<uint64_t>(t.string_data_size()) == elements) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(where, ": dims ", DimsText(t), " call for ",
                                                   elements, " strings, it holds ",
                                                   t.string_data_size()));
  }
  const std::optional<uint64_t> needed = DataBytes(t);
  const uint64_t held = HeldBytes(t);
  if (needed.has_value() && held == *needed) return absl::OkStatus();
  if (!needed.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": dims ", DimsText(t), " need more than 2^64 bytes of data"));
  }
  return absl::InvalidArgumentError(absl::StrCat(where, ": dims ", DimsText(t), " need ", *needed,
                                                 " bytes of data, it holds ", held, " bytes"));
}

class TensorWalk {
 public:
  explicit TensorWalk(std::vector<std::string>& warnings) : warnings_(warnings) {}
  ~TensorWalk() {
    if (unreported_ > 0) {
      warnings_.push_back(absl::StrCat(unreported_, " more tensors hold NaN or infinite values"));
    }
  }

  absl::Status Graph(const onnx::GraphProto& graph, const std::string& scope) {
    for (const TensorProto& t : graph.initializer()) {
      if (absl::Status s = Tensor(t, absl::StrCat(scope, "initializer '", t.name(), "'"));
          !s.ok()) {
        return s;
      }
    }
    return Nodes(graph.node(), scope);
  }

  absl::Status Nodes(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes,
                     const std::string& scope) {
    for (int i = 0; i < nodes.size(); ++i) {
      const onnx::NodeProto& node = nodes[i];
      for (const onnx::AttributeProto& a : node.attribute()) {
        const std::string where =
            absl::StrCat(scope, DescribeNode(node, i), " attribute '", a.name(), "'");
        if (a.has_t()) {
          AMPC_RETURN_IF_ERROR(Tensor(a.t(), where));
        }
        for (const TensorProto& t : a.tensors()) {
          AMPC_RETURN_IF_ERROR(Tensor(t, where));
        }
        const std::string inner = absl::StrCat(scope, DescribeNode(node, i), ": ");
        if (a.has_g()) {
          AMPC_RETURN_IF_ERROR(Graph(a.g(), inner));
        }
        for (const onnx::GraphProto& g : a.graphs()) {
          AMPC_RETURN_IF_ERROR(Graph(g, inner));
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Tensor(const TensorProto& t, const std::string& where) {
    AMPC_RETURN_IF_ERROR(CheckData(t, where));
    const FloatScan count = ScanFloats(t);
    if (count.nan == 0 && count.inf == 0) return absl::OkStatus();
    if (reported_ == kMaxNonFiniteWarnings) {
      ++unreported_;
      return absl::OkStatus();
    }
    ++reported_;
    std::string what;
    if (count.nan > 0) absl::StrAppend(&what, count.nan, " NaN");
    if (count.nan > 0 && count.inf > 0) absl::StrAppend(&what, " and ");
    if (count.inf > 0) absl::StrAppend(&what, count.inf, " infinite");
    warnings_.push_back(absl::StrCat(where, " holds ", what,
                                     count.nan + count.inf == 1 ? " value" : " values",
                                     " (legal ONNX; kept as they are)"));
    return absl::OkStatus();
  }

  std::vector<std::string>& warnings_;
  int reported_ = 0;
  int64_t unreported_ = 0;
};

// Scans the main graph's deferred initializers last in their files first (float_scan.h keeps
// each result for the walk and for autocast). The conversion later reads them roughly in file
// order, so where the weights are larger than memory it finds the last-scanned ones still in the
// page cache instead of reading everything from disk a second time.
// Nothing is read ahead when an initializer is malformed: the walk reports it before any read.
void ScanDeferredLastFirst(const onnx::GraphProto& graph) {
  std::vector<const TensorProto*> deferred;
  for (const TensorProto& t : graph.initializer()) {
    if (!CheckData(t, "").ok()) return;
    if (IsDeferred(t)) deferred.push_back(&t);
  }
  std::sort(deferred.begin(), deferred.end(), [](const TensorProto* a, const TensorProto* b) {
    const DeferredSpan sa = SpanOf(*a), sb = SpanOf(*b);
    return std::tie(sa.file, sa.offset) > std::tie(sb.file, sb.offset);
  });
  for (const TensorProto* t : deferred) ScanFloats(*t);
}

}  // namespace

absl::Status VerifyTensors(const onnx::ModelProto& model, std::vector<std::string>& warnings) {
  ScanDeferredLastFirst(model.graph());
  TensorWalk walk(warnings);
  AMPC_RETURN_IF_ERROR(walk.Graph(model.graph(), ""));
  for (const onnx::FunctionProto& f : model.functions()) {
    const std::string scope = absl::StrCat("function '", f.domain(), ".", f.name(), "': ");
    AMPC_RETURN_IF_ERROR(walk.Nodes(f.node(), scope));
  }
  for (int i = 0; i < model.training_info_size(); ++i) {
    const onnx::TrainingInfoProto& info = model.training_info(i);
    const std::string scope = absl::StrCat("training_info[", i, "]: ");
    AMPC_RETURN_IF_ERROR(walk.Graph(info.initialization(), scope));
    AMPC_RETURN_IF_ERROR(walk.Graph(info.algorithm(), scope));
  }
  return absl::OkStatus();
}

}  // namespace ampc
