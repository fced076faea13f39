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
//   === output
//   <the canonical text of %out (or ampc's stdout when args have no %out)>
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
};

absl::StatusOr<GoldenCase> ParseGoldenCase(const std::string& text);
std::string FormatGoldenCase(const GoldenCase& golden);

}  // namespace ampc::golden
