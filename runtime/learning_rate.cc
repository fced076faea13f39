#include "runtime/learning_rate.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/graph/status_macros.h"
#include "passes/training/training_state.h"
#include "runtime/core/kernel_registry.h"

namespace ampc {
namespace {

using Json = nlohmann::json;

// A value in an error message: its type and itself when short and simple ("number 0.5"), else
// its type alone ("array"), as compiler/json_file.h's DescribeJson says it.
std::string Described(const Json& value) {
  if (value.is_null()) return "null";
  const std::string text = value.is_primitive() ? value.dump() : "";
  if (!text.empty() && text.size() <= 40) return absl::StrCat(value.type_name(), " ", text);
  return value.type_name();
}

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
                 absl::StrCat("expected an integer >= ", least, ", got ", Described(value)));
  }
  return value.get<int64_t>();
}

// The type of schedule `json` is: an object whose "type" names one of Types() and whose other
// keys are that type's.
absl::StatusOr<const TypeInfo*> TypeOf(const Json& json, const std::string& where) {
  std::vector<std::string> names;
  for (const TypeInfo& info : Types()) names.push_back(absl::StrCat("\"", info.name, "\""));
  const std::string expected = absl::StrJoin(names, ", ");
  if (!json.is_object()) {
    return Error(
        where, "",
        absl::StrCat("expected an object {\"type\": ", expected, ", ...}, got ", Described(json)));
  }
  if (!json.contains("type") || !json["type"].is_string()) {
    return Error(where, "type",
                 absl::StrCat("expected one of ", expected, ", got ",
                              json.contains("type") ? Described(json["type"]) : "nothing"));
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
  return &*info;
}

// The keys of a cosine schedule: total_steps, warmup_steps (0) below it, min_lr (0).
absl::Status ReadCosine(const Json& json, const std::string& where, LrSchedule& schedule) {
  AMPC_ASSIGN_OR_RETURN(const int64_t total, Steps(json, where, "total_steps", 1, -1));
  AMPC_ASSIGN_OR_RETURN(const int64_t warmup, Steps(json, where, "warmup_steps", 0, 0));
  if (warmup >= total) {
    return Error(where, "warmup_steps",
                 absl::StrCat(warmup, " must be less than total_steps (", total, ")"));
  }
  schedule.total_steps = total;
  schedule.warmup_steps = warmup;
  if (json.contains("min_lr")) {
    const Json& min_lr = json["min_lr"];
    if (!min_lr.is_number() || !std::isfinite(min_lr.get<double>()) || min_lr.get<double>() < 0) {
      return Error(where, "min_lr",
                   absl::StrCat("expected a number >= 0, got ", Described(min_lr)));
    }
    schedule.min_lr = min_lr.get<double>();
  }
  return absl::OkStatus();
}

// A float of rank 0, or of unknown rank (fed as a scalar).
bool IsFloatScalar(const onnx::ValueInfoProto& value) {
  const onnx::TypeProto::Tensor& type = value.type().tensor_type();
  return type.elem_type() == onnx::TensorProto::FLOAT &&
         (!type.has_shape() || type.shape().dim_size() == 0);
}

}  // namespace

absl::StatusOr<LrSchedule> LrScheduleFromJson(const Json& json, const std::string& where) {
  AMPC_ASSIGN_OR_RETURN(const TypeInfo* info, TypeOf(json, where));
  LrSchedule schedule;
  schedule.type = info->type;
  if (schedule.type == LrSchedule::Type::kLinearWarmup) {
    AMPC_ASSIGN_OR_RETURN(schedule.warmup_steps, Steps(json, where, "warmup_steps", 1, -1));
  } else if (schedule.type == LrSchedule::Type::kCosine) {
    AMPC_RETURN_IF_ERROR(ReadCosine(json, where, schedule));
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

absl::StatusOr<float> BaseRate(const onnx::ModelProto& model, std::optional<double> given) {
  if (given) return static_cast<float>(*given);
  const std::string* text = MetadataValue(model, kLrKey);
  if (text == nullptr) return static_cast<float>(kDefaultBaseRate);
  float lr = 0;
  if (!absl::SimpleAtof(*text, &lr) || !(lr > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata ", kLrKey, " = '", *text, "' is not a positive number"));
  }
  return lr;
}

absl::StatusOr<LrSchedule> ModelSchedule(const onnx::ModelProto& model, float base) {
  const std::string* text = MetadataValue(model, kLrScheduleKey);
  if (text == nullptr) return LrSchedule{};
  Json json;
  try {
    json = Json::parse(*text);
  } catch (const Json::exception&) {
    return absl::InvalidArgumentError(
        absl::StrCat("metadata ", kLrScheduleKey, " = '", *text, "' is not JSON"));
  }
  absl::StatusOr<LrSchedule> schedule =
      LrScheduleFromJson(json, absl::StrCat("metadata ", kLrScheduleKey));
  if (schedule.ok() && static_cast<float>(schedule->min_lr) > base) {  // as the step computes
    return absl::InvalidArgumentError(
        absl::StrCat("--lr ", base, " is below the schedule's min_lr ", schedule->min_lr,
                     " (metadata ", kLrScheduleKey, ")"));
  }
  return schedule;
}

bool InsertLearningRateNode(onnx::GraphProto& graph) {
  onnx::ValueInfoProto* input = nullptr;
  for (onnx::ValueInfoProto& value : *graph.mutable_input()) {
    if (value.name() == kLrInput && IsFloatScalar(value)) input = &value;
  }
  if (input == nullptr) return false;
  *graph.add_output() = *input;
  input->set_name(kScheduleInput);
  auto* type = input->mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx::TensorProto::DOUBLE);
  type->mutable_shape()->add_dim()->set_dim_value(kRateWords);
  onnx::NodeProto node;
  node.set_op_type("LearningRate");
  node.set_domain(kRuntimeDomain);
  node.set_name("ampc.lr/schedule");
  node.add_input(kScheduleInput);
  node.add_input(kStep);
  node.add_output(kLrInput);
  graph.mutable_node()->Add(std::move(node));
  // First: every reader of the rate comes after it.
  for (int i = graph.node_size() - 1; i > 0; --i) graph.mutable_node()->SwapElements(i, i - 1);
  return true;
}

}  // namespace ampc
