#include "compiler/policy_file.h"

#include <fcntl.h>
#include <onnx/common/version.h>
#include <onnx/defs/schema.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/file_io.h"

namespace ampc {
namespace {

using Json = nlohmann::json;

constexpr char kCategories[] = "LOWER, FP32, FOLLOW or KEEP";

absl::Status Error(const std::string& path, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
}

absl::StatusOr<std::string> ReadPolicyText(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    return Error(path, absl::StrCat("cannot open the --policy file: ", ErrnoText(errno)));
  }
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n == 0) return text;
    if (n > 0) {
      text.append(buffer, static_cast<size_t>(n));
    } else if (errno != EINTR) {
      return Error(path, absl::StrCat("cannot read the --policy file: ", ErrnoText(errno)));
    }
  }
}

// "byte 27 (line 3, column 5)" for the parser's 1-based byte position.
std::string Position(const std::string& text, size_t byte) {
  if (byte > text.size()) return absl::StrCat("the end of the file (byte ", byte, ")");
  const size_t before = byte == 0 ? 0 : byte - 1;
  const size_t line_start = before == 0 ? 0 : text.rfind('\n', before - 1) + 1;
  const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(before), '\n');
  return absl::StrCat("byte ", byte, " (line ", line, ", column ", before - line_start + 1, ")");
}

// The parser's words without its "[json.exception...] parse error at line 3, column 5: " prefix.
std::string ParserDetail(const std::string& what) {
  const size_t column = what.find("column ");
  const size_t colon = what.find(": ", column == std::string::npos ? 0 : column);
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

// nlohmann keeps the last of repeated keys silently; a policy names each op once, so a repeat is
// reported. Returns the JSON, or the error naming the position or the repeated key.
absl::StatusOr<Json> ParsePolicy(const std::string& path, const std::string& text) {
  std::vector<std::set<std::string>> seen;  // keys of each open object
  std::vector<std::string> keys;            // the key being read in each open object
  std::string repeated;
  auto check = [&](int, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) {
      seen.emplace_back();
      keys.emplace_back();
    } else if (event == Json::parse_event_t::object_end && !seen.empty()) {
      seen.pop_back();
      keys.pop_back();
    } else if (event == Json::parse_event_t::key && !seen.empty()) {
      const std::string key = parsed.get<std::string>();
      keys.back() = key;
      if (!seen.back().insert(key).second && repeated.empty()) {
        std::vector<std::string> outer(keys.begin(), keys.end() - 1);
        for (std::string& k : outer) k = absl::StrCat("\"", k, "\"");
        repeated = absl::StrCat(outer.empty() ? "" : absl::StrCat(absl::StrJoin(outer, "."), ": "),
                                "\"", key, "\" appears twice");
      }
    }
    return true;
  };
  try {
    Json doc = Json::parse(text, check);
    if (!repeated.empty()) return Error(path, repeated);
    return doc;
  } catch (const Json::parse_error& e) {
    return Error(path, absl::StrCat("invalid JSON at ", Position(text, e.byte), ": ",
                                    ParserDetail(e.what())));
  }
}

// A value in an error message: itself when short and simple, else its JSON type.
std::string Describe(const Json& value) {
  const std::string text = value.is_primitive() ? value.dump() : "";
  if (!text.empty() && text.size() <= 40) return absl::StrCat(value.type_name(), " ", text);
  return value.type_name();
}

absl::Status CheckTopLevel(const std::string& path, const Json& doc) {
  if (!doc.is_object()) {
    return Error(path, absl::StrCat("expected an object {\"version\": 1, \"ops\": {...}}, got ",
                                    Describe(doc)));
  }
  for (const auto& [key, value] : doc.items()) {
    if (key != "version" && key != "ops" && key != "comment") {
      return Error(path, absl::StrCat("unknown key \"", key,
                                      "\" (a policy file has \"version\", \"ops\" and an "
                                      "optional \"comment\")"));
    }
  }
  if (!doc.contains("version")) return Error(path, "missing \"version\": 1");
  const Json& version = doc["version"];
  if (!version.is_number_integer() || version.get<int64_t>() != 1) {
    return Error(path, absl::StrCat("\"version\": expected 1 (the only version this ampc reads), "
                                    "got ",
                                    Describe(version)));
  }
  if (doc.contains("comment") && !doc["comment"].is_string()) {
    return Error(path,
                 absl::StrCat("\"comment\": expected a string, got ", Describe(doc["comment"])));
  }
  if (!doc.contains("ops")) return Error(path, "missing \"ops\": {\"OpType\": \"CATEGORY\", ...}");
  if (!doc["ops"].is_object()) {
    return Error(path, absl::StrCat("\"ops\": expected an object {\"OpType\": \"CATEGORY\", ...}, "
                                    "got ",
                                    Describe(doc["ops"])));
  }
  return absl::OkStatus();
}

// "OpType" for the default domain, "domain.OpType" otherwise; in a domain the ONNX library
// knows, the op must exist (a typo would otherwise change nothing, silently).
absl::Status CheckOpKey(const std::string& path, const std::string& key) {
  const std::string where = absl::StrCat("\"ops\": \"", key, "\": ");
  const size_t dot = key.rfind('.');
  const std::string domain = dot == std::string::npos ? "" : key.substr(0, dot);
  const std::string op = key.substr(dot == std::string::npos ? 0 : dot + 1);
  if (op.empty() || (dot != std::string::npos && domain.empty())) {
    return Error(path, absl::StrCat(where, "expected \"OpType\" or \"domain.OpType\""));
  }
  if (domain == "ai.onnx") {
    return Error(path, absl::StrCat(where,
                                    "ops of the default domain are written by op type "
                                    "alone: \"",
                                    op, "\""));
  }
  const auto& domains = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  if (domains.contains(domain) && onnx::OpSchemaRegistry::Schema(op, domain) == nullptr) {
    return Error(path, absl::StrCat(where, "no op ", op, " in ",
                                    domain.empty() ? "the default domain" : domain, " of ONNX ",
                                    onnx::LAST_RELEASE_VERSION,
                                    domain.empty() ? " (ops of other domains are written "
                                                     "\"domain.OpType\")"
                                                   : ""));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<std::string, Category>>> ReadEntries(const std::string& path,
                                                                          const Json& ops) {
  std::vector<std::pair<std::string, Category>> entries;
  for (const auto& [key, value] : ops.items()) {
    if (absl::Status s = CheckOpKey(path, key); !s.ok()) return s;
    const std::string where = absl::StrCat("\"ops\": \"", key, "\": ");
    if (!value.is_string()) {
      return Error(path, absl::StrCat(where, "expected a category string (", kCategories, "), got ",
                                      Describe(value)));
    }
    absl::StatusOr<Category> category = ParseCategory(value.get<std::string>());
    if (!category.ok()) return Error(path, absl::StrCat(where, category.status().message()));
    entries.emplace_back(key, *category);
  }
  return entries;
}

}  // namespace

absl::Status ApplyPolicyFile(const std::string& path, AutocastPolicy& policy) {
  absl::StatusOr<std::string> text = ReadPolicyText(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<Json> doc = ParsePolicy(path, *text);
  if (!doc.ok()) return doc.status();
  if (absl::Status s = CheckTopLevel(path, *doc); !s.ok()) return s;
  auto entries = ReadEntries(path, (*doc)["ops"]);
  if (!entries.ok()) return entries.status();
  // Applied only once the whole file is valid: a bad file changes nothing.
  const std::string source = absl::StrCat("--policy ", path);
  for (const auto& [key, category] : *entries) policy.Set(key, category, source);
  return absl::OkStatus();
}

}  // namespace ampc
