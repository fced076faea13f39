#include "passes/graph/onnx_status.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace ampc {
namespace {

// ONNX's assertions start with the source file of the library's own build ("/…/inliner.cc:418: "),
// which says nothing to a user.
absl::string_view WithoutSourceLocation(absl::string_view text) {
  if (!absl::StartsWith(text, "/")) return text;
  const size_t end = text.find(": ");
  if (end == absl::string_view::npos) return text;
  const absl::string_view location = text.substr(0, end);
  const size_t colon = location.rfind(':');
  if (colon == absl::string_view::npos || colon + 1 == location.size()) return text;
  for (char c : location.substr(colon + 1)) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return text;
  }
  return text.substr(end + 2);
}

}  // namespace

std::string OneLine(std::string_view text) {
  std::string joined;
  // absl::string_view is not std::string_view in this Abseil build.
  for (absl::string_view line :
       absl::StrSplit(WithoutSourceLocation(absl::string_view(text.data(), text.size())),
                      absl::ByAnyChar("\r\n"))) {
    absl::string_view trimmed = absl::StripAsciiWhitespace(line);
    if (trimmed.empty()) continue;
    if (!joined.empty()) joined += "; ";
    joined.append(trimmed.data(), trimmed.size());
  }
  return joined;
}

}  // namespace ampc
