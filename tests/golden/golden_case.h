// One golden test file: tests/golden/<pass>/<rule>.test.
//
//   # what the rule says (comment lines before the first section)
//   === args
//   %in -o %out --passes=infer-types
//   === input
//   <model in ONNX text syntax>
//   === names
//   <optional: node names, one per line, given in order to the main graph's nodes (ONNX 1.12's
//    text syntax cannot name nodes)>
//   === exit 0
//   === stderr
//   <lines that must each appear in ampc's stderr; %in stands for the input path>
// In args, %in and %out are the model files and %golden the folder of the .test file.
// Then at most one of:
//   === output
//   <the canonical text of %out (or ampc's stdout when args have no %out), all of it>
//   === check
//   <lines that must appear in that text in order, as LLVM FileCheck's CHECK does>
// A case with neither expects an empty output; a case with both is refused. `check` is for a case
// that pins one rule in a long output. Each line is stripped of leading and trailing blanks;
// blank lines and lines starting with # are skipped. A plain line must be a substring of one
// output line after the line the previous check matched (FileCheck's CHECK); `NEXT: text` must
// be a substring of the very next output line (CHECK-NEXT); `NOT: text` says that no output line
// between the neighbouring matches (or the start or end of the output) contains it (CHECK-NOT).
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace ampc::golden {

struct GoldenCase {
  std::string preamble;  // comment lines before the first section
  std::string args = "%in -o %out";
  std::string input;
  std::string names;
  int exit_code = 0;
  std::string stderr_lines;
  std::string output;
  std::string checks;  // the body of `=== check`, as written
  int check_line = 0;  // the line of the .test file where that body starts
};

absl::StatusOr<GoldenCase> ParseGoldenCase(const std::string& text);
std::string FormatGoldenCase(const GoldenCase& golden);

// Matches `checks` (the body of a `=== check` section whose first line is line `first_line` of
// the .test file) against `output`. Returns "" when every check holds, else which check failed,
// where the search ran, and the output with line numbers.
std::string MatchChecks(const std::string& checks, int first_line, const std::string& output);

}  // namespace ampc::golden
