#include "compiler/cli_args.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "compiler/exit_codes.h"

namespace ampc {
namespace {

// Flags are spelled with dashes on the command line (--print-after) and underscores in code.
absl::CommandLineFlag* FindFlag(absl::string_view name) {
  std::string key(name);
  std::replace(key.begin(), key.end(), '-', '_');
  return absl::FindCommandLineFlag(key);
}

bool IsBool(const absl::CommandLineFlag& flag) { return flag.IsOfType<bool>(); }

// Flags given once per value (`--input a=x.pb --input b=y.npy`); other list flags take one
// comma-separated value (`--block-op=Softmax,Exp`), and a repeat replaces it.
bool IsRepeatable(const absl::CommandLineFlag& flag) {
  return flag.Name() == "input" && flag.IsOfType<std::vector<std::string>>();
}

absl::Status SetFlag(absl::CommandLineFlag& flag, absl::string_view value) {
  std::string error;
  if (flag.ParseFrom(value, &error)) return absl::OkStatus();
  return UsageError(absl::StrCat("invalid value '", value, "' for --", flag.Name(), ": ", error));
}

// Handles argv[i], a flag; may consume argv[i + 1] as its value.
absl::Status ScanFlag(int argc, char** argv, int& i, CommandLine& line) {
  absl::string_view arg = argv[i];
  const bool short_output = arg == "-o";
  absl::string_view body =
      short_output ? "output" : arg.substr(absl::StartsWith(arg, "--") ? 2 : 1);
  absl::string_view name = body.substr(0, body.find('='));
  const bool has_value = body.find('=') != absl::string_view::npos;
  if (name == "help" || name == "h") return (line.help = true, absl::OkStatus());
  if (name == "version") return (line.version = true, absl::OkStatus());
  absl::CommandLineFlag* flag = FindFlag(name);
  if (flag == nullptr && absl::StartsWith(name, "no") && !has_value) {
    absl::CommandLineFlag* negated = FindFlag(name.substr(2));
    if (negated != nullptr && IsBool(*negated)) {
      line.given.emplace_back(negated->Name());
      return SetFlag(*negated, "false");
    }
  }
  if (flag == nullptr) {
    return UsageError(absl::StrCat("unknown flag '", arg, "' (see ampc --help)"));
  }
  line.given.emplace_back(flag->Name());
  if (IsBool(*flag) && !has_value) return SetFlag(*flag, "true");
  if (!has_value && i + 1 >= argc) {
    return UsageError(absl::StrCat("flag '", arg, "' needs a value"));
  }
  absl::string_view value = has_value ? body.substr(name.size() + 1) : argv[++i];
  if (IsRepeatable(*flag)) {
    line.repeated[std::string(flag->Name())].emplace_back(value);
    return absl::OkStatus();
  }
  return SetFlag(*flag, value);
}

std::vector<std::string>& GivenFlags() {
  static auto* const kGiven = new std::vector<std::string>;
  return *kGiven;
}

}  // namespace

bool FlagGiven(absl::string_view name) {
  const std::vector<std::string>& given = GivenFlags();
  return std::find(given.begin(), given.end(), name) != given.end();
}

absl::StatusOr<CommandLine> ScanCommandLine(int argc, char** argv) {
  CommandLine line;
  bool only_positionals = false;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (only_positionals || arg == "-" || !absl::StartsWith(arg, "-")) {
      line.positionals.emplace_back(arg);
    } else if (arg == "--") {
      only_positionals = true;
    } else if (absl::Status s = ScanFlag(argc, argv, i, line); !s.ok()) {
      return s;
    }
  }
  GivenFlags() = line.given;
  return line;
}

}  // namespace ampc
