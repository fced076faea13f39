#include "passes/training/folded_constants.h"

#include <re2/re2.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ampc {
namespace {

// The names of a Python list of strings, "['a', 'b']"; empty when `text` is no such list.
std::vector<std::string> ListedNames(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (!absl::ConsumePrefix(&text, "[") || !absl::ConsumeSuffix(&text, "]")) return {};
  std::vector<std::string> names;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    const bool quoted = item.size() >= 2 && (item.front() == '\'' || item.front() == '"') &&
                        item.back() == item.front();
    if (!quoted) return {};
    names.emplace_back(item.substr(1, item.size() - 2));
  }
  return names;
}

// Whether `info` records a fold from exporter constants only.
bool FoldedFromConstants(const onnx::ValueInfoProto& info) {
  static const RE2* const kConstant = new RE2("val_[0-9]+");
  for (const onnx::StringStringEntryProto& entry : info.metadata_props()) {
    if (!absl::EndsWith(entry.key(), "folded_from")) continue;
    const std::vector<std::string> sources = ListedNames(entry.value());
    if (sources.empty()) return false;
    for (const std::string& source : sources) {
      if (!RE2::FullMatch(source, *kConstant)) return false;
    }
    return true;
  }
  return false;
}

}  // namespace

absl::flat_hash_set<std::string> FoldedConstants(const onnx::GraphProto& graph) {
  absl::flat_hash_set<std::string> initializers;
  for (const onnx::TensorProto& initializer : graph.initializer()) {
    initializers.insert(initializer.name());
  }
  absl::flat_hash_set<std::string> folded;
  for (const onnx::ValueInfoProto& info : graph.value_info()) {
    if (initializers.contains(info.name()) && FoldedFromConstants(info)) folded.insert(info.name());
  }
  return folded;
}

}  // namespace ampc
