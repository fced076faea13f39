#include "compiler/diagnostics.h"

#include <cstdint>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ampc {
namespace {

// The length of the valid UTF-8 sequence at the start of `text`, or 0.
size_t Utf8Length(std::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  size_t length = lead < 0x80                    ? 1
                  : lead >= 0xc2 && lead <= 0xdf ? 2
                  : lead >= 0xe0 && lead <= 0xef ? 3
                  : lead >= 0xf0 && lead <= 0xf4 ? 4
                                                 : 0;
  if (length == 0 || length > text.size()) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xc0) != 0x80) return 0;
  }
  return length;
}

// U+202A..U+202E and U+2066..U+2069, whose UTF-8 is E2 80 AA..AE and E2 81 A6..A9.
bool IsBidiControl(std::string_view c) {
  if (c.size() != 3 || static_cast<unsigned char>(c[0]) != 0xe2) return false;
  const unsigned char b1 = c[1], b2 = c[2];
  return (b1 == 0x80 && b2 >= 0xaa && b2 <= 0xae) || (b1 == 0x81 && b2 >= 0xa6 && b2 <= 0xa9);
}

}  // namespace

std::string EscapeForDiagnostic(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const unsigned char c = text[0];
    const size_t length = Utf8Length(text);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (length == 0 || c < 0x20 || c == 0x7f) {
      out += absl::StrFormat("\\x%02x", c);
    } else if (IsBidiControl(text.substr(0, length))) {
      const uint32_t code = ((c & 0x0f) << 12) | ((text[1] & 0x3f) << 6) | (text[2] & 0x3f);
      out += absl::StrFormat("\\u%04x", code);
    } else {
      out.append(text.substr(0, length));
    }
    text.remove_prefix(length == 0 ? 1 : length);
  }
  return out;
}

void PrintDiagnostic(std::string_view line) {
  std::cerr << "ampc: " << EscapeForDiagnostic(line) << "\n";
}

std::string DiagnosticLine(std::string_view file, const Diagnostic& diagnostic) {
  return absl::StrCat(std::string(file), ": warning: ", diagnostic.message);
}

}  // namespace ampc
