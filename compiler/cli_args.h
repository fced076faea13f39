// Command-line scanning: positionals and flags, with values parsed and typed by absl flags.
// (absl's own ParseCommandLine exits with status 1 on an unknown flag; ampc's usage errors exit 2.)
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ampc {

struct CommandLine {
  std::vector<std::string> positionals;
  // Values of repeatable flags (--input), one per occurrence, by flag name.
  std::map<std::string, std::vector<std::string>> repeated;
  std::vector<std::string> given;  // the flags set, by absl name (print_after; -o is output)
  bool help = false;
  bool version = false;
};

// Accepts `--flag=value`, `--flag value`, `-o value`, `--boolflag`, `--noboolflag` and `--`
// (everything after it is positional). Flags must be absl flags linked into the program; `-o` is
// `--output`. Errors are UsageError()s.
absl::StatusOr<CommandLine> ScanCommandLine(int argc, char** argv);

// Whether the last ScanCommandLine set the flag `name` (absl spelling: print_after), whatever
// the value: `--lr 0.01` is given even though 0.01 is the default.
bool FlagGiven(absl::string_view name);

}  // namespace ampc
