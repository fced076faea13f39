#include "passes/onnx_status.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace ampc {

std::string OneLine(std::string_view text) {
  std::string joined;
  // absl::string_view is not std::string_view in this Abseil build.
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(text.data(), text.size()), absl::ByAnyChar("\r\n"))) {
    absl::string_view trimmed = absl::StripAsciiWhitespace(line);
    if (trimmed.empty()) continue;
    if (!joined.empty()) joined += "; ";
    joined.append(trimmed.data(), trimmed.size());
  }
  return joined;
}

}  // namespace ampc
