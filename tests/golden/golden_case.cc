#include "tests/golden/golden_case.h"

#include <set>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ampc::golden {
namespace {

constexpr absl::string_view kMarker = "=== ";
constexpr absl::string_view kNot = "NOT:";
constexpr absl::string_view kNext = "NEXT:";

absl::Status AddSection(GoldenCase& golden, absl::string_view header, const std::string& body,
                        int first_line) {
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
  } else if (header == "check") {
    golden.checks = body;
    golden.check_line = first_line;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown section '", header, "'"));
  }
  return absl::OkStatus();
}

// One line of a `=== check` section.
struct Check {
  enum Kind { kIn, kNext, kNot };  // FileCheck's CHECK, CHECK-NEXT, CHECK-NOT
  int line = 0;                    // in the .test file
  Kind kind = kIn;
  std::string text;
};

std::vector<Check> ParseChecks(const std::string& checks, int first_line) {
  std::vector<Check> parsed;
  int line = first_line;
  for (absl::string_view text : absl::StrSplit(checks, '\n')) {
    Check check{line++, Check::kIn, ""};
    text = absl::StripAsciiWhitespace(text);
    if (text.empty() || absl::StartsWith(text, "#")) continue;
    if (absl::ConsumePrefix(&text, kNot)) {
      check.kind = Check::kNot;
    } else if (absl::ConsumePrefix(&text, kNext)) {
      check.kind = Check::kNext;
    }
    check.text = std::string(absl::StripLeadingAsciiWhitespace(text));
    parsed.push_back(std::move(check));
  }
  return parsed;
}

absl::Status ValidateChecks(const GoldenCase& golden) {
  bool positive = false;
  Check::Kind previous = Check::kIn;
  for (const Check& check : ParseChecks(golden.checks, golden.check_line)) {
    auto error = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat("line ", check.line, ": ", what));
    };
    if (check.text.empty()) return error("a check needs text");
    if (check.kind == Check::kNext && !positive) return error("NEXT needs a check before it");
    if (check.kind == Check::kNext && previous == Check::kNot) {
      return error("a NOT right before a NEXT checks nothing");
    }
    positive = positive || check.kind != Check::kNot;
    previous = check.kind;
  }
  if (!positive) {
    return absl::InvalidArgumentError("'=== check' needs a line that must appear");
  }
  return absl::OkStatus();
}

std::string NumberedOutput(const std::vector<absl::string_view>& lines) {
  std::string text = absl::StrCat("output (", lines.size(), " lines):\n");
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::StrAppend(&text, absl::Dec(i + 1, absl::kSpacePad4), ": ", lines[i], "\n");
  }
  return text;
}

// Where a search ran: output lines [from, to) in 0-based indices, after the match of the
// check at `after` (0: none, the search started at the output's first line).
std::string Span(size_t from, size_t to, int after) {
  std::string text =
      from < to ? absl::StrCat("output lines ", from + 1, "-", to) : std::string("no output lines");
  if (after == 0) return absl::StrCat(text, ", from the start of the output");
  return absl::StrCat(text, ", after output line ", from, " matched the check at line ", after);
}

// The first NOT check whose text appears in lines [from, to), as a failure; "" when none does.
std::string FindForbidden(const std::vector<Check>& nots,
                          const std::vector<absl::string_view>& lines, size_t from, size_t to,
                          int after) {
  for (const Check& check : nots) {
    for (size_t i = from; i < to; ++i) {
      if (!absl::StrContains(lines[i], check.text)) continue;
      return absl::StrCat("NOT check at line ", check.line, " found at output line ", i + 1, ": ",
                          check.text, "\n  it may not appear in ", Span(from, to, after), "\n");
    }
  }
  return "";
}

}  // namespace

absl::StatusOr<GoldenCase> ParseGoldenCase(const std::string& text) {
  GoldenCase golden;
  std::istringstream in(text);
  std::string line, header, body;
  std::set<std::string> seen;
  int line_number = 0, body_line = 0;
  bool in_section = false;
  auto add = [&]() -> absl::Status {
    if (!seen.insert(header).second) {
      return absl::InvalidArgumentError(absl::StrCat("section '", header, "' appears twice"));
    }
    return AddSection(golden, header, body, body_line);
  };
  while (std::getline(in, line)) {
    ++line_number;
    if (absl::StartsWith(line, kMarker)) {
      if (in_section) {
        if (absl::Status s = add(); !s.ok()) return s;
      }
      header = line.substr(kMarker.size());
      body.clear();
      body_line = line_number + 1;
      in_section = true;
    } else if (in_section) {
      body += line + "\n";
    } else {
      golden.preamble += line + "\n";
    }
  }
  if (in_section) {
    if (absl::Status s = add(); !s.ok()) return s;
  }
  if (golden.input.empty()) return absl::InvalidArgumentError("no '=== input' section");
  if (seen.count("output") && seen.count("check")) {
    return absl::InvalidArgumentError("a case has '=== output' or '=== check', not both");
  }
  if (seen.count("check")) {
    if (absl::Status s = ValidateChecks(golden); !s.ok()) return s;
  }
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
  if (!golden.checks.empty()) {
    absl::StrAppend(&text, kMarker, "check\n", golden.checks);
  } else if (!golden.output.empty()) {
    absl::StrAppend(&text, kMarker, "output\n", golden.output);
  }
  return text;
}

namespace {

// Where `check` matches at or after line `from` (only at `from` for NEXT), or lines.size().
size_t FindMatch(const Check& check, const std::vector<absl::string_view>& lines, size_t from) {
  size_t at = from;
  while (at < lines.size() && !absl::StrContains(lines[at], check.text)) {
    if (check.kind == Check::kNext) return lines.size();
    ++at;
  }
  return at;
}

std::string Missed(const Check& check, const std::vector<absl::string_view>& lines, size_t from,
                   int after) {
  if (check.kind != Check::kNext) {
    return absl::StrCat("check at line ", check.line, " not found: ", check.text, "\n  searched ",
                        Span(from, lines.size(), after), "\n");
  }
  return absl::StrCat("NEXT check at line ", check.line, " not found: ", check.text,
                      "\n  it must match output line ", from + 1, ", right after output line ",
                      from, " matched the check at line ", after, "\n");
}

}  // namespace

std::string MatchChecks(const std::string& checks, int first_line, const std::string& output) {
  std::vector<absl::string_view> lines = absl::StrSplit(output, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // the final newline
  size_t from = 0;  // the first output line the next check may match
  int after = 0;    // the check that matched the line before `from`
  std::vector<Check> nots;
  std::string failure;
  for (const Check& check : ParseChecks(checks, first_line)) {
    if (check.kind == Check::kNot) {
      nots.push_back(check);
      continue;
    }
    const size_t at = FindMatch(check, lines, from);
    if (at == lines.size()) {
      failure = Missed(check, lines, from, after);
      break;
    }
    failure = FindForbidden(nots, lines, from, at, after);
    if (!failure.empty()) break;
    nots.clear();
    from = at + 1;
    after = check.line;
  }
  if (failure.empty()) failure = FindForbidden(nots, lines, from, lines.size(), after);
  if (failure.empty()) return "";
  return failure + NumberedOutput(lines);
}

}  // namespace ampc::golden
