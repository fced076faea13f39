// Runs golden tests: builds the input model from ONNX text, runs the real `ampc` binary on it, and
// compares exit code, stderr lines and the canonical text of the result with the expectations
// (all of it for `=== output`, the lines of `=== check` in order; see golden_case.h).
//   golden_runner --ampc=PATH [--update] FILE.test...
// --update rewrites exit, stderr and output from what ampc does now; check lines are written by
// hand, so it keeps them and fails when they no longer hold.
#include <onnx/defs/parser.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "compiler/model_io.h"
#include "compiler/printer.h"
#include "tests/golden/golden_case.h"
#include "tests/support/subprocess.h"

namespace ampc::golden {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) { return testing::ReadFileOrEmpty(path.string()); }

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

struct Outcome {
  int exit_code = -1;
  std::string stderr_text;
  std::string output;
  std::string leftovers;  // files a failed run left behind
};

// %in and %out stand for the model files, %golden for the folder of the .test file.
absl::StatusOr<Outcome> Run(const std::string& ampc, const GoldenCase& golden,
                            const std::string& golden_dir, const fs::path& dir) {
  onnx::ModelProto model;
  onnx::Common::Status parsed = onnx::OnnxParser::Parse(model, golden.input.c_str());
  if (!parsed.IsOK()) return absl::InvalidArgumentError("input: " + parsed.ErrorMessage());
  int position = 0;
  for (absl::string_view name : absl::StrSplit(golden.names, '\n', absl::SkipEmpty())) {
    if (position >= model.graph().node_size()) return absl::InvalidArgumentError("too many names");
    model.mutable_graph()->mutable_node(position++)->set_name(std::string(name));
  }
  const std::string in = (dir / "in.onnx").string(), out = (dir / "out.onnx").string();
  WriteFile(in, model.SerializeAsString());
  std::vector<std::string> argv = {ampc};
  for (absl::string_view arg : absl::StrSplit(golden.args, ' ', absl::SkipWhitespace())) {
    argv.push_back(absl::StrReplaceAll(arg, {{"%in", in}, {"%out", out}, {"%golden", golden_dir}}));
  }
  const testing::ProcessResult process = testing::RunProcess(argv, dir.string());
  Outcome outcome;
  outcome.exit_code = process.exit_code;
  outcome.stderr_text = absl::StrReplaceAll(process.err, {{in, "%in"}, {out, "%out"}});
  const bool writes = absl::StrContains(golden.args, "%out");
  if (writes && outcome.exit_code == 0) {
    absl::StatusOr<LoadedModel> result = LoadModel(out);
    if (!result.ok()) return result.status();
    outcome.output = PrintModel(result->model);
  } else {
    outcome.output = absl::StrReplaceAll(process.out, {{in, "%in"}, {out, "%out"}});
  }
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (outcome.exit_code != 0 && name != "in.onnx") {
      outcome.leftovers += name + " ";
    }
  }
  return outcome;
}

std::string Diff(const std::string& expected, const std::string& actual, const fs::path& dir) {
  WriteFile(dir / "expected", expected);
  WriteFile(dir / "actual", actual);
  const std::string command =
      absl::StrCat("diff -u --label expected --label actual ", (dir / "expected").string(), " ",
                   (dir / "actual").string(), " > ", (dir / "diff").string());
  (void)std::system(command.c_str());
  return ReadFile(dir / "diff");
}

// Returns the failures, empty when the case passes.
std::string Compare(const GoldenCase& golden, const Outcome& outcome, const fs::path& dir) {
  std::string failures;
  if (outcome.exit_code != golden.exit_code) {
    absl::StrAppend(&failures, "exit code ", outcome.exit_code, ", expected ", golden.exit_code,
                    "\n");
  }
  for (absl::string_view line : absl::StrSplit(golden.stderr_lines, '\n', absl::SkipEmpty())) {
    if (!absl::StrContains(outcome.stderr_text, line)) {
      absl::StrAppend(&failures, "stderr lacks: ", line, "\n");
    }
  }
  if (!outcome.leftovers.empty()) {
    absl::StrAppend(&failures, "a failed run left files behind: ", outcome.leftovers, "\n");
  }
  if (!golden.checks.empty()) {
    const std::string missed = MatchChecks(golden.checks, golden.check_line, outcome.output);
    if (!missed.empty()) absl::StrAppend(&failures, "checks fail: ", missed);
  } else if (outcome.output != golden.output) {
    absl::StrAppend(&failures, "output differs:\n", Diff(golden.output, outcome.output, dir));
  }
  if (!failures.empty()) absl::StrAppend(&failures, "stderr was:\n", outcome.stderr_text);
  return failures;
}

// Timing in the summary line changes run to run; only diagnostics become expectations.
std::string ExpectedStderr(const Outcome& outcome) {
  std::string lines;
  for (absl::string_view line : absl::StrSplit(outcome.stderr_text, '\n', absl::SkipEmpty())) {
    if (outcome.exit_code != 0 || absl::StrContains(line, "warning:")) {
      absl::StrAppend(&lines, line, "\n");
    }
  }
  return lines;
}

bool RunFile(const std::string& ampc, const fs::path& file, bool update) {
  absl::StatusOr<GoldenCase> golden = ParseGoldenCase(ReadFile(file));
  if (!golden.ok()) {
    std::cerr << file.string() << ": " << golden.status().message() << "\n";
    return false;
  }
  char pattern[] = "/tmp/ampc-golden-XXXXXX";
  const fs::path dir = mkdtemp(pattern);
  absl::StatusOr<Outcome> outcome = Run(ampc, *golden, file.parent_path().string(), dir);
  bool ok = outcome.ok();
  if (!ok) std::cerr << file.string() << ": " << outcome.status().message() << "\n";
  if (ok && update) {
    golden->exit_code = outcome->exit_code;
    golden->stderr_lines = ExpectedStderr(*outcome);
    if (golden->checks.empty()) golden->output = outcome->output;
    WriteFile(file, FormatGoldenCase(*golden));
    std::cout << "updated " << file.string() << "\n";
    if (!golden->checks.empty()) {
      const std::string missed = MatchChecks(golden->checks, golden->check_line, outcome->output);
      ok = missed.empty();
      if (!ok) std::cout << "FAIL " << file.string() << ": checks fail: " << missed;
    }
  } else if (ok) {
    const std::string failures = Compare(*golden, *outcome, dir);
    ok = failures.empty();
    std::cout << (ok ? "PASS " : "FAIL ") << file.string() << "\n" << failures;
  }
  fs::remove_all(dir);
  return ok;
}

}  // namespace
}  // namespace ampc::golden

int main(int argc, char** argv) {
  std::string ampc;
  bool update = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (absl::StartsWith(arg, "--ampc=")) {
      ampc = arg.substr(7);
    } else if (arg == "--update") {
      update = true;
    } else {
      files.push_back(arg);
    }
  }
  if (ampc.empty() || files.empty()) {
    std::cerr << "usage: golden_runner --ampc=PATH [--update] FILE.test...\n";
    return 2;
  }
  bool ok = true;
  for (const std::string& file : files) ok = ampc::golden::RunFile(ampc, file, update) && ok;
  return ok ? 0 : 1;
}
