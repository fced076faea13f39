#include "compiler/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ampc {
namespace {

struct TypeInfo {
  const char* name;
  LrSchedule::Type type;
  std::vector<std::string> keys;  // besides "type"
};

const std::vector<TypeInfo>& Types() {
  static const auto* types = new std::vector<TypeInfo>{
      {"constant", LrSchedule::Type::kConstant, {}},
      {"linear_warmup", LrSchedule::Type::kLinearWarmup, {"warmup_steps"}},
      {"cosine", LrSchedule::Type::kCosine, {"warmup_steps", "total_steps", "min_lr"}},
  };
  return *types;
}

absl::Status Error(const std::string& where, absl::string_view key, absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat(where, key.empty() ? "" : ".", key, ": ", message));
}

// An integer >= `least` at json[key], or `fallback` when the key is absent and `fallback` >= 0.
absl::StatusOr<int64_t> Steps(const Json& json, const std::string& where, const char* key,
                              int64_t least, int64_t fallback) {
  if (!json.contains(key)) {
    if (fallback >= 0) return fallback;
    return Error(where, "", absl::StrCat("\"", key, "\" is missing (an integer >= ", least, ")"));
  }
  const Json& value = json[key];
  if (!value.is_number_integer() ||
      (value.is_number_unsigned() && value.get<uint64_t>() > INT64_MAX) ||
      value.get<int64_t>() < least) {
    return Error(where, key,
                 absl::StrCat("expected an integer >= ", least, ", got ", DescribeJson(value)));
  }
  return value.get<int64_t>();
}

}  // namespace

absl::StatusOr<LrSchedule> LrScheduleFromJson(const Json& json, const std::string& where) {
  std::vector<std::string> names;
  for (const TypeInfo& info : Types()) names.push_back(absl::StrCat("\"", info.name, "\""));
  const std::string expected = absl::StrJoin(names, ", ");
  if (!json.is_object()) {
    return Error(where, "",
                 absl::StrCat("expected an object {\"type\": ", expected, ", ...}, got ",
                              DescribeJson(json)));
  }
  if (!json.contains("type") || !json["type"].is_string()) {
    return Error(where, "type",
                 absl::StrCat("expected one of ", expected, ", got ",
                              json.contains("type") ? DescribeJson(json["type"]) : "nothing"));
  }
  const std::string type = json["type"].get<std::string>();
  auto info = std::find_if(Types().begin(), Types().end(),
                           [&](const TypeInfo& t) { return type == t.name; });
  if (info == Types().end()) {
    return Error(where, "type", absl::StrCat("expected one of ", expected, ", got \"", type, "\""));
  }
  for (const auto& [key, value] : json.items()) {
    if (key == "type" || std::count(info->keys.begin(), info->keys.end(), key) > 0) continue;
    return Error(
        where, key,
        absl::StrCat("unknown key for type \"", type, "\" (it takes ",
                     info->keys.empty() ? "no other key" : absl::StrJoin(info->keys, ", "), ")"));
  }
  LrSchedule schedule;
  schedule.type = info->type;
  if (schedule.type == LrSchedule::Type::kLinearWarmup) {
    absl::StatusOr<int64_t> warmup = Steps(json, where, "warmup_steps", 1, -1);
    if (!warmup.ok()) return warmup.status();
    schedule.warmup_steps = *warmup;
  } else if (schedule.type == LrSchedule::Type::kCosine) {
    absl::StatusOr<int64_t> total = Steps(json, where, "total_steps", 1, -1);
    if (!total.ok()) return total.status();
    absl::StatusOr<int64_t> warmup = Steps(json, where, "warmup_steps", 0, 0);
    if (!warmup.ok()) return warmup.status();
    if (*warmup >= *total) {
      return Error(where, "warmup_steps",
                   absl::StrCat(*warmup, " must be less than total_steps (", *total, ")"));
    }
    schedule.total_steps = *total;
    schedule.warmup_steps = *warmup;
    if (json.contains("min_lr")) {
      const Json& min_lr = json["min_lr"];
      if (!min_lr.is_number() || !std::isfinite(min_lr.get<double>()) || min_lr.get<double>() < 0) {
        return Error(where, "min_lr",
                     absl::StrCat("expected a number >= 0, got ", DescribeJson(min_lr)));
      }
      schedule.min_lr = min_lr.get<double>();
    }
  }
  return schedule;
}

std::string LrScheduleJson(const LrSchedule& schedule) {
  Json json = Json::object();
  for (const TypeInfo& info : Types()) {
    if (info.type == schedule.type) json["type"] = info.name;
  }
  if (schedule.type != LrSchedule::Type::kConstant) json["warmup_steps"] = schedule.warmup_steps;
  if (schedule.type == LrSchedule::Type::kCosine) {
    json["total_steps"] = schedule.total_steps;
    json["min_lr"] = schedule.min_lr;
  }
  return json.dump();
}

}  // namespace ampc
