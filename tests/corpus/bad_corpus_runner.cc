// Runs the real `ampc` on every case of tests/corpus/bad/manifest.tsv (tools/gen-bad-corpus) and
// checks what a user sees: the exit code; on failure exactly one `ampc: error:` line that names the
// file and matches the case's regex, and nothing written; on success a valid output model. Every
// stderr line starts with `ampc: ` (an odd name cannot split a diagnostic), the input is left
// as it was, and each run is bounded: 4 GiB of address space, an 8 MiB stack, 120 s.
//
// Usage: bad_corpus_runner AMPC CORPUS_DIR [CASE...]
#include <onnx/checker.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "compiler/model_io.h"
#include "passes/graph/onnx_status.h"
#include "tests/support/subprocess.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::string file, command, regex, why;
  int exit_code = 0;
};

std::vector<Case> ReadManifest(const std::string& path) {
  std::vector<Case> cases;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    if (f.size() != 5) {
      std::cerr << path << ": malformed line: " << line << "\n";
      std::exit(2);
    }
    cases.push_back({f[0], f[1], f[3], f[4], std::stoi(f[2])});
  }
  return cases;
}

std::vector<std::string> Args(const Case& c, const std::string& ampc, const std::string& input,
                              const fs::path& out) {
  std::vector<std::string> args = {
      "/bin/sh", "-c",
      testing::AddressSpaceLimit(4194304) + "ulimit -s 8192 && exec timeout 120 \"$@\"", "sh",
      ampc};
  if (c.command == "compile") {
    for (const std::string& a : {input, std::string("-o"), (out / "out.onnx").string()}) {
      args.push_back(a);
    }
  } else if (c.command == "run") {
    for (const std::string& a : {std::string("run"), input, std::string("--device=cpu"),
                                 std::string("--output-dir"), (out / "outputs").string()}) {
      args.push_back(a);
    }
  } else {
    args.push_back(c.command);  // explain, print
    args.push_back(input);
  }
  return args;
}

// What is wrong with one case's run, or "" when nothing is.
std::string Check(const Case& c, const testing::ProcessResult& r, const std::string& input,
                  const fs::path& out) {
  std::vector<std::string> problems;
  if (r.exit_code != c.exit_code) {
    problems.push_back(absl::StrCat("exit code ", r.exit_code, ", expected ", c.exit_code));
  }
  std::vector<std::string> lines = absl::StrSplit(r.err, '\n', absl::SkipEmpty());
  if (!r.err.empty() && r.err.back() != '\n') problems.push_back("stderr does not end in \\n");
  std::vector<std::string> errors;
  for (const std::string& line : lines) {
    if (!absl::StartsWith(line, "ampc: ")) problems.push_back("a stderr line without 'ampc: '");
    if (absl::StartsWith(line, "ampc: error: ")) errors.push_back(line);
  }
  const std::regex pattern(c.regex);
  bool matched = false;
  for (const std::string& line : c.exit_code == 0 ? lines : errors) {
    matched = matched || std::regex_search(line, pattern);
  }
  if (c.regex.empty() && c.exit_code == 0) matched = true;  // no stderr line is required
  if (!matched) problems.push_back(absl::StrCat("no stderr line matches /", c.regex, "/"));
  if (c.exit_code != 0) {
    if (errors.size() != 1) problems.push_back(absl::StrCat(errors.size(), " error lines"));
    if (errors.size() == 1 && !absl::StrContains(errors[0], input + ": ")) {
      problems.push_back("the error line does not name the file");
    }
    if (!fs::is_empty(out))
      problems.push_back("a failed run wrote " +
                         fs::begin(fs::directory_iterator(out))->path().string());
  } else if (c.command == "compile") {
    absl::StatusOr<LoadedModel> loaded = LoadModel((out / "out.onnx").string());
    absl::Status checked = loaded.status();
    if (checked.ok()) {
      checked = CatchOnnx("checker", [&] { onnx::checker::check_model(loaded->model); });
    }
    if (!checked.ok()) problems.push_back(absl::StrCat("the output: ", checked.message()));
  }
  return absl::StrJoin(problems, "; ");
}

}  // namespace
}  // namespace ampc

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc < 3) {
    std::cerr << "usage: bad_corpus_runner AMPC CORPUS_DIR [CASE...]\n";
    return 2;
  }
  const std::string ampc = argv[1], dir = argv[2];
  std::vector<std::string> only(argv + 3, argv + argc);
  char pattern[] = "/tmp/ampc-bad-corpus-XXXXXX";
  const fs::path scratch = mkdtemp(pattern);
  int failed = 0, ran = 0;
  for (const ampc::Case& c : ampc::ReadManifest(dir + "/manifest.tsv")) {
    if (!only.empty() && std::find(only.begin(), only.end(), c.file) == only.end()) continue;
    const std::string input = dir + "/" + c.file;
    const std::string before = ampc::testing::ReadFileOrEmpty(input);
    const fs::path out = scratch / c.file;
    fs::create_directory(out);
    ampc::testing::ProcessResult r =
        ampc::testing::RunProcess(ampc::Args(c, ampc, input, out), scratch.string());
    std::string problem = ampc::Check(c, r, input, out);
    if (ampc::testing::ReadFileOrEmpty(input) != before) problem += "; the input changed";
    ++ran;
    if (problem.empty()) {
      std::cout << "ok   " << c.file << " (" << c.command << ")\n";
      continue;
    }
    ++failed;
    std::cout << "FAIL " << c.file << " (" << c.command << ", " << c.why << "): " << problem
              << "\n     stderr: " << r.err << "\n";
  }
  fs::remove_all(scratch);
  std::cout << ran << " cases, " << failed << " failed\n";
  return failed == 0 && ran > 0 ? 0 : 1;
}
