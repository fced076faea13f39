#include "compiler/train_config.h"

#include <re2/re2.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "compiler/exit_codes.h"
#include "compiler/json_file.h"
#include "passes/training/param_groups.h"
#include "runtime/learning_rate.h"

ABSL_FLAG(std::string, train_config, "",
          "--train: JSON file of parameter groups, the LR schedule and the scaler's settings.");

namespace ampc {
namespace {

using Optimizer = TrainingOptions::Optimizer;

absl::Status Error(const std::string& where, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", message));
}

// Every key of `object` must be one of `keys`.
absl::Status CheckKeys(const Json& object, const std::string& where,
                       const std::vector<std::string>& keys) {
  for (const auto& [key, value] : object.items()) {
    if (std::count(keys.begin(), keys.end(), key) > 0) continue;
    return Error(absl::StrCat(where, where.back() == ' ' ? "" : ".", key),
                 absl::StrCat("unknown key (expected ", absl::StrJoin(keys, ", "), ")"));
  }
  return absl::OkStatus();
}

// An interval of numbers, for checks and messages: "a number > 0", "a number in [0, 1)".
struct Range {
  double low, high;
  bool low_open, high_open;
  bool Contains(double x) const {
    return (low_open ? x > low : x >= low) && (high_open ? x < high : x <= high);
  }
  // Bounds with the digits that tell them apart from their neighbours (FLT_MIN is 1.17549435e-38).
  std::string Text() const {
    const auto number = [](double x) { return absl::StrFormat("%.9g", x); };
    if (std::isinf(high)) return absl::StrCat("a number ", low_open ? "> " : ">= ", number(low));
    return absl::StrCat("a number in ", low_open ? "(" : "[", number(low), ", ", number(high),
                        high_open ? ")" : "]");
  }
};
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr Range kPositive = {0, kInf, true, false};
constexpr Range kNonNegative = {0, kInf, false, false};
constexpr Range kFraction = {0, 1, false, true};  // [0, 1)
// A loss scale: a normal float (1/scale must be finite for unscaling).
constexpr Range kScale = {std::numeric_limits<float>::min(), kInf, false, false};

absl::Status ReadFloat(const Json& value, const std::string& where, const Range& range,
                       float& out) {
  const bool ok = value.is_number() && std::isfinite(value.get<double>()) &&
                  std::isfinite(static_cast<float>(value.get<double>())) &&
                  range.Contains(value.get<double>());
  if (!ok) {
    return Error(where, absl::StrCat("expected ", range.Text(), ", got ", DescribeJson(value)));
  }
  out = static_cast<float>(value.get<double>());
  return absl::OkStatus();
}

absl::Status ReadInt(const Json& value, const std::string& where, int64_t least, int64_t& out) {
  const bool ok =
      value.is_number_integer() &&
      !(value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) &&
      value.get<int64_t>() >= least;
  if (!ok) {
    return Error(where,
                 absl::StrCat("expected an integer >= ", least, ", got ", DescribeJson(value)));
  }
  out = value.get<int64_t>();
  return absl::OkStatus();
}

absl::Status ReadBool(const Json& value, const std::string& where, bool& out) {
  if (!value.is_boolean()) {
    return Error(where, absl::StrCat("expected true or false, got ", DescribeJson(value)));
  }
  out = value.get<bool>();
  return absl::OkStatus();
}

const std::vector<std::pair<std::string, Optimizer>>& OptimizerNames() {
  static const auto* names =
      new std::vector<std::pair<std::string, Optimizer>>{{"sgd", Optimizer::kSgd},
                                                         {"momentum", Optimizer::kMomentum},
                                                         {"adam", Optimizer::kAdam},
                                                         {"adamw", Optimizer::kAdamW}};
  return *names;
}

absl::Status ReadOptimizer(const Json& value, const std::string& where, Optimizer& out) {
  for (const auto& [name, optimizer] : OptimizerNames()) {
    if (value.is_string() && value.get<std::string>() == name) {
      out = optimizer;
      return absl::OkStatus();
    }
  }
  return Error(where, absl::StrCat("expected \"sgd\", \"momentum\", \"adam\" or \"adamw\", got ",
                                   DescribeJson(value)));
}

std::string OptimizerName(Optimizer optimizer) {
  for (const auto& [name, known] : OptimizerNames()) {
    if (known == optimizer) return name;
  }
  return "?";
}

// Which optimizers take a group key ("" for every optimizer).
std::string OptimizersTaking(const std::string& key) {
  if (key == "momentum" || key == "dampening" || key == "nesterov") return "momentum";
  if (key == "betas" || key == "eps") return "adam and adamw";
  return "";
}

absl::Status ReadBetas(const Json& value, const std::string& where, TrainingOptions::Group& g) {
  if (!value.is_array() || value.size() != 2) {
    return Error(where, absl::StrCat("expected [beta1, beta2], got ", DescribeJson(value)));
  }
  if (absl::Status s = ReadFloat(value[0], where + "[0]", kFraction, g.beta1); !s.ok()) return s;
  return ReadFloat(value[1], where + "[1]", kFraction, g.beta2);
}

// groups[i]: what the file leaves out comes from `defaults` (the command line).
absl::StatusOr<TrainingOptions::Group> ReadGroup(const Json& json, const std::string& where,
                                                 const TrainingOptions::Group& defaults) {
  if (!json.is_object()) {
    return Error(where, absl::StrCat("expected an object {\"params\": \"REGEX\", ...}, got ",
                                     DescribeJson(json)));
  }
  if (absl::Status s = CheckKeys(json, where,
                                 {"params", "optimizer", "lr_scale", "weight_decay", "momentum",
                                  "dampening", "nesterov", "betas", "eps", "comment"});
      !s.ok()) {
    return s;
  }
  TrainingOptions::Group group = defaults;
  group.where = where;
  if (!json.contains("params") || !json["params"].is_string() ||
      json["params"].get<std::string>().empty()) {
    return Error(where + ".params",
                 absl::StrCat("expected a regex (RE2, full match on parameter names), got ",
                              json.contains("params") ? DescribeJson(json["params"]) : "nothing"));
  }
  group.params = json["params"].get<std::string>();
  RE2 regex(group.params, RE2::Quiet);
  if (!regex.ok())
    return Error(where + ".params", absl::StrCat("'", group.params, "': ", regex.error()));
  if (json.contains("optimizer")) {
    if (absl::Status s = ReadOptimizer(json["optimizer"], where + ".optimizer", group.optimizer);
        !s.ok()) {
      return s;
    }
  }
  const bool adam = group.optimizer == Optimizer::kAdam || group.optimizer == Optimizer::kAdamW;
  for (const auto& [key, value] : json.items()) {
    const std::string takers = OptimizersTaking(key);
    const bool applies =
        takers.empty() || (takers == "momentum" ? group.optimizer == Optimizer::kMomentum : adam);
    if (!applies) {
      return Error(where + "." + key, absl::StrCat("applies to ", takers, ", not to ",
                                                   OptimizerName(group.optimizer)));
    }
    const std::string at = where + "." + key;
    absl::Status s = absl::OkStatus();
    if (key == "lr_scale") s = ReadFloat(value, at, kPositive, group.lr_scale);
    if (key == "weight_decay") s = ReadFloat(value, at, kNonNegative, group.weight_decay);
    if (key == "momentum") s = ReadFloat(value, at, kNonNegative, group.momentum);
    if (key == "dampening") s = ReadFloat(value, at, {0, 1, false, false}, group.dampening);
    if (key == "nesterov") s = ReadBool(value, at, group.nesterov);
    if (key == "betas") s = ReadBetas(value, at, group);
    if (key == "eps") s = ReadFloat(value, at, kNonNegative, group.epsilon);
    if (!s.ok()) return s;
  }
  if (group.optimizer == Optimizer::kMomentum && group.nesterov &&
      (group.momentum <= 0 || group.dampening != 0)) {
    return Error(where + ".nesterov", "Nesterov momentum needs momentum > 0 and dampening 0");
  }
  return group;
}

absl::Status ReadGroups(const Json& json, const std::string& where, TrainingOptions& options) {
  if (!json.is_array()) {
    return Error(where, absl::StrCat("expected an array of groups, got ", DescribeJson(json)));
  }
  const TrainingOptions::Group defaults = DefaultGroup(options);
  for (size_t i = 0; i < json.size(); ++i) {
    absl::StatusOr<TrainingOptions::Group> group =
        ReadGroup(json[i], absl::StrCat(where, "[", i, "]"), defaults);
    if (!group.ok()) return group.status();
    options.groups.push_back(*std::move(group));
  }
  return absl::OkStatus();
}

absl::Status ReadScaler(const Json& json, const std::string& where, TrainingOptions& options) {
  if (!json.is_object()) {
    return Error(where, absl::StrCat("expected an object, got ", DescribeJson(json)));
  }
  if (absl::Status s =
          CheckKeys(json, where,
                    {"init_scale", "growth_factor", "backoff_factor", "growth_interval",
                     "hysteresis", "min_scale", "max_scale", "max_consecutive_skips"});
      !s.ok()) {
    return s;
  }
  if (json.contains("init_scale") && options.loss_scale == TrainingOptions::LossScale::kStatic) {
    return Error(where + ".init_scale", "--loss-scale=static:V sets the scale too; give one");
  }
  for (const auto& [key, value] : json.items()) {
    const std::string at = where + "." + key;
    absl::Status s = absl::OkStatus();
    if (key == "init_scale") s = ReadFloat(value, at, kScale, options.init_scale);
    if (key == "growth_factor") {
      s = ReadFloat(value, at, {1, kInf, true, false}, options.growth_factor);
    }
    if (key == "backoff_factor") {
      s = ReadFloat(value, at, {0, 1, true, true}, options.backoff_factor);
    }
    if (key == "growth_interval") s = ReadInt(value, at, 1, options.growth_interval);
    if (key == "hysteresis") s = ReadInt(value, at, 1, options.hysteresis);
    if (key == "min_scale") s = ReadFloat(value, at, kNonNegative, options.min_scale);
    if (key == "max_scale") s = ReadFloat(value, at, kNonNegative, options.max_scale);
    if (key == "max_consecutive_skips") s = ReadInt(value, at, 1, options.max_consecutive_skips);
    if (!s.ok()) return s;
  }
  if (options.max_scale > 0 && options.min_scale > options.max_scale) {
    return Error(where + ".min_scale",
                 absl::StrCat(options.min_scale, " is above max_scale (", options.max_scale, ")"));
  }
  if (options.max_scale > 0 && options.init_scale > options.max_scale) {
    return Error(where + ".init_scale",
                 absl::StrCat(options.init_scale, " is above max_scale (", options.max_scale, ")"));
  }
  if (options.init_scale < options.min_scale) {
    return Error(where + ".init_scale",
                 absl::StrCat(options.init_scale, " is below min_scale (", options.min_scale, ")"));
  }
  return absl::OkStatus();
}

absl::Status ReadSchedule(const Json& json, const std::string& where, TrainingOptions& options) {
  absl::StatusOr<LrSchedule> schedule = LrScheduleFromJson(json, where);
  if (!schedule.ok()) return schedule.status();
  if (static_cast<float>(schedule->min_lr) > options.lr) {  // both float, as the step computes
    return Error(
        where + ".min_lr",
        absl::StrCat(schedule->min_lr, " is above the base learning rate --lr ", options.lr));
  }
  options.lr_schedule = LrScheduleJson(*schedule);
  return absl::OkStatus();
}

absl::Status ReadConfig(const std::string& path, TrainingOptions& options) {
  absl::StatusOr<Json> doc = ReadJsonFile(path, "--train-config");
  if (!doc.ok()) return doc.status();
  const std::string where = path + ": ";
  if (!doc->is_object()) {
    return Error(path, absl::StrCat("expected an object {\"groups\": [...], \"schedule\": {...}, "
                                    "\"scaler\": {...}}, got ",
                                    DescribeJson(*doc)));
  }
  if (absl::Status s = CheckKeys(*doc, where, {"groups", "schedule", "scaler", "comment"}); !s.ok())
    return s;
  if (doc->contains("comment") && !(*doc)["comment"].is_string()) {
    return Error(where + "comment",
                 absl::StrCat("expected a string, got ", DescribeJson((*doc)["comment"])));
  }
  if (doc->contains("groups")) {
    if (absl::Status s = ReadGroups((*doc)["groups"], where + "groups", options); !s.ok()) return s;
  }
  if (doc->contains("schedule")) {
    if (absl::Status s = ReadSchedule((*doc)["schedule"], where + "schedule", options); !s.ok())
      return s;
  }
  if (doc->contains("scaler")) {
    if (absl::Status s = ReadScaler((*doc)["scaler"], where + "scaler", options); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

std::string TrainConfigPath() { return absl::GetFlag(FLAGS_train_config); }

absl::Status ApplyTrainConfig(const std::string& path, TrainingOptions& options) {
  TrainingOptions changed = options;  // applied only when the whole file is valid
  if (absl::Status s = ReadConfig(path, changed); !s.ok()) return UsageError(s.message());
  options = std::move(changed);
  return absl::OkStatus();
}

}  // namespace ampc
