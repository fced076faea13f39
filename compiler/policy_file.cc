#include "compiler/policy_file.h"

#include <onnx/defs/schema.h>

#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "compiler/json_file.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

constexpr char kCategories[] = "LOWER, FP32, FOLLOW or KEEP";

absl::Status Error(const std::string& path, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
}

absl::Status CheckTopLevel(const std::string& path, const Json& doc) {
  if (!doc.is_object()) {
    return Error(path, absl::StrCat("expected an object {\"version\": 1, \"ops\": {...}}, got ",
                                    DescribeJson(doc)));
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
                                    DescribeJson(version)));
  }
  if (doc.contains("comment") && !doc["comment"].is_string()) {
    return Error(
        path, absl::StrCat("\"comment\": expected a string, got ", DescribeJson(doc["comment"])));
  }
  if (!doc.contains("ops")) return Error(path, "missing \"ops\": {\"OpType\": \"CATEGORY\", ...}");
  if (!doc["ops"].is_object()) {
    return Error(path, absl::StrCat("\"ops\": expected an object {\"OpType\": \"CATEGORY\", ...}, "
                                    "got ",
                                    DescribeJson(doc["ops"])));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckOpKey(const std::string& key) {
  const size_t dot = key.rfind('.');
  const std::string domain = dot == std::string::npos ? "" : key.substr(0, dot);
  const std::string op = key.substr(dot == std::string::npos ? 0 : dot + 1);
  if (op.empty() || (dot != std::string::npos && domain.empty())) {
    return absl::InvalidArgumentError(absl::StrCat("expected \"OpType\" or \"domain.OpType\""));
  }
  if (domain == "ai.onnx") {
    return absl::InvalidArgumentError(
        absl::StrCat("ops of the default domain are written by op type "
                     "alone: \"",
                     op, "\""));
  }
  const auto& domains = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  if (domains.contains(domain) && onnx::OpSchemaRegistry::Schema(op, domain) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("no op ", op, " in ", domain.empty() ? "the default domain" : domain,
                     " of ONNX " AMPC_ONNX_VERSION,
                     domain.empty() ? " (ops of other domains are written "
                                      "\"domain.OpType\")"
                                    : ""));
  }
  return absl::OkStatus();
}

namespace {

absl::StatusOr<std::vector<std::pair<std::string, Category>>> ReadEntries(const std::string& path,
                                                                          const Json& ops) {
  std::vector<std::pair<std::string, Category>> entries;
  for (const auto& [key, value] : ops.items()) {
    if (absl::Status s = CheckOpKey(key); !s.ok()) {
      return Error(path, absl::StrCat("\"ops\": \"", key, "\": ", s.message()));
    }
    const std::string where = absl::StrCat("\"ops\": \"", key, "\": ");
    if (!value.is_string()) {
      return Error(path, absl::StrCat(where, "expected a category string (", kCategories, "), got ",
                                      DescribeJson(value)));
    }
    absl::StatusOr<Category> category = ParseCategory(value.get<std::string>());
    if (!category.ok()) return Error(path, absl::StrCat(where, category.status().message()));
    entries.emplace_back(key, *category);
  }
  return entries;
}

}  // namespace

absl::Status ApplyPolicyFile(const std::string& path, AutocastPolicy& policy) {
  absl::StatusOr<Json> doc = ReadJsonFile(path, "--policy");
  if (!doc.ok()) return doc.status();
  AMPC_RETURN_IF_ERROR(CheckTopLevel(path, *doc));
  auto entries = ReadEntries(path, (*doc)["ops"]);
  if (!entries.ok()) return entries.status();
  // Applied only once the whole file is valid: a bad file changes nothing.
  const std::string source = absl::StrCat("--policy ", path);
  for (const auto& [key, category] : *entries) policy.Set(key, category, source);
  return absl::OkStatus();
}

}  // namespace ampc
