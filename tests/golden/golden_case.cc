#include "tests/golden/golden_case.h"

#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ampc::golden {
namespace {

constexpr absl::string_view kMarker = "=== ";

absl::Status AddSection(GoldenCase& golden, absl::string_view header, const std::string& body) {
  if (header == "args") {
    golden.args = std::string(absl::StripAsciiWhitespace(body));
  } else if (header == "input") {
    golden.input = body;
  } else if (header == "names") {
    golden.names = body;
  } else if (absl::ConsumePrefix(&header, "exit ")) {
    if (!absl::SimpleAtoi(header, &golden.exit_code)) {
      return absl::InvalidArgumentError(absl::StrCat("bad exit code '", header, "'"));
    }
  } else if (header == "stderr") {
    golden.stderr_lines = body;
  } else if (header == "output") {
    golden.output = body;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown section '", header, "'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GoldenCase> ParseGoldenCase(const std::string& text) {
  GoldenCase golden;
  std::istringstream in(text);
  std::string line, header, body;
  bool in_section = false;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, kMarker)) {
      if (in_section) {
        if (absl::Status s = AddSection(golden, header, body); !s.ok()) return s;
      }
      header = line.substr(kMarker.size());
      body.clear();
      in_section = true;
    } else if (in_section) {
      body += line + "\n";
    } else {
      golden.preamble += line + "\n";
    }
  }
  if (in_section) {
    if (absl::Status s = AddSection(golden, header, body); !s.ok()) return s;
  }
  if (golden.input.empty()) return absl::InvalidArgumentError("no '=== input' section");
  return golden;
}

std::string FormatGoldenCase(const GoldenCase& golden) {
  std::string text = golden.preamble;
  absl::StrAppend(&text, kMarker, "args\n", golden.args, "\n");
  absl::StrAppend(&text, kMarker, "input\n", golden.input);
  if (!golden.names.empty()) absl::StrAppend(&text, kMarker, "names\n", golden.names);
  absl::StrAppend(&text, kMarker, "exit ", golden.exit_code, "\n");
  if (!golden.stderr_lines.empty())
    absl::StrAppend(&text, kMarker, "stderr\n", golden.stderr_lines);
  if (!golden.output.empty()) absl::StrAppend(&text, kMarker, "output\n", golden.output);
  return text;
}

}  // namespace ampc::golden
