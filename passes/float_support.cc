#include "passes/float_support.h"

#include <onnx/defs/data_type_utils.h>

#include "absl/strings/str_cat.h"

namespace ampc {
namespace {

constexpr char kNoSchema[] = "(no schema)";

const std::string& TensorTypeString(int dtype) {
  static const auto* names =
      new absl::flat_hash_map<int, std::string>{{onnx::TensorProto::FLOAT, "tensor(float)"},
                                                {onnx::TensorProto::FLOAT16, "tensor(float16)"},
                                                {onnx::TensorProto::BFLOAT16, "tensor(bfloat16)"},
                                                {onnx::TensorProto::DOUBLE, "tensor(double)"}};
  static const std::string* none = new std::string();
  auto it = names->find(dtype);
  return it == names->end() ? *none : it->second;
}

// ONNX's interned type for `dtype` ("tensor(float)", ...); null for a dtype autocast never asks
// about. ToType locks a global mutex and hashes the string on every call (a sixth of autocast's
// time at 100k nodes), so each is looked up once.
onnx::DataType FloatDataType(int dtype) {
  static const auto* types = [] {
    auto* map = new absl::flat_hash_map<int, onnx::DataType>;
    for (int type : {onnx::TensorProto::FLOAT, onnx::TensorProto::FLOAT16,
                     onnx::TensorProto::BFLOAT16, onnx::TensorProto::DOUBLE}) {
      (*map)[type] = onnx::Utils::DataTypeUtils::ToType(TensorTypeString(type));
    }
    return map;
  }();
  auto it = types->find(dtype);
  return it == types->end() ? nullptr : it->second;
}

bool IsTypeVariable(const onnx::OpSchema& schema, const std::string& type_str) {
  for (const auto& constraint : schema.typeConstraintParams()) {
    if (constraint.type_param_str == type_str) return true;
  }
  return false;
}

// A second type variable that takes the main one's dtype: RMSNormalization's scale and output
// (V) go with its input (T), or a low input would give an FP32 output nothing declared.
bool LinkedToMain(const onnx::OpSchema& schema, const std::string& main, const std::string& var) {
  return schema.Name() == "RMSNormalization" && main == "T" && var == "V";
}

}  // namespace

OpsetVersions OpsetsOf(const onnx::ModelProto& model) {
  OpsetVersions opsets;
  for (const onnx::OperatorSetIdProto& opset : model.opset_import()) {
    opsets[opset.domain() == "ai.onnx" ? "" : opset.domain()] = static_cast<int>(opset.version());
  }
  return opsets;
}

int CastOpset(const OpsetVersions& opsets) {
  auto it = opsets.find("");
  return it == opsets.end() ? kCastOpsetWhenMissing : it->second;
}

bool CastSupports(const OpsetVersions& opsets, int dtype) {
  const onnx::OpSchema* cast = onnx::OpSchemaRegistry::Schema("Cast", CastOpset(opsets), "");
  if (cast == nullptr) return false;
  const onnx::DataType type = FloatDataType(dtype);
  if (type == nullptr) return false;
  return cast->inputs()[0].GetTypes().count(type) > 0 &&
         cast->outputs()[0].GetTypes().count(type) > 0;
}

FloatSupport::FloatSupport(const onnx::NodeProto& node, const OpsetVersions& opsets,
                           const std::vector<int>& input_types) {
  const std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
  auto version = opsets.find(domain);
  if (version == opsets.end()) return;
  schema_ = onnx::OpSchemaRegistry::Schema(node.op_type(), version->second, domain);
  if (schema_ == nullptr) {
    // An op without a schema (a custom domain): only a policy entry can classify it, and then
    // every float32 input and output follows the node's dtype.
    for (int type : input_types) {
      if (type == onnx::TensorProto::FLOAT) main_var_ = kNoSchema;
    }
    return;
  }
  for (size_t slot = 0; slot < input_types.size(); ++slot) {
    const int type = input_types[slot];
    if (type != onnx::TensorProto::FLOAT && type != onnx::TensorProto::FLOAT16 &&
        type != onnx::TensorProto::BFLOAT16) {
      continue;
    }
    const onnx::OpSchema::FormalParameter* formal = Formal(schema_->inputs(), slot);
    if (formal == nullptr) continue;
    // A concrete type ("tensor(float)", as Resize's scales) is not a variable.
    if (!IsTypeVariable(*schema_, formal->GetTypeStr())) continue;
    // A node whose first float variable is low already (BatchNormalization in ampc's own output,
    // its statistics FP32) computes low: its FP32 inputs of other variables stay as they are.
    if (type != onnx::TensorProto::FLOAT) {
      main_is_low_ = true;
      return;
    }
    main_var_ = formal->GetTypeStr();
    main_types_ = &formal->GetTypes();
    return;
  }
}

const onnx::OpSchema::FormalParameter* FloatSupport::Formal(
    const std::vector<onnx::OpSchema::FormalParameter>& formals, int slot) const {
  if (formals.empty()) return nullptr;
  if (slot < static_cast<int>(formals.size())) return &formals[slot];
  const onnx::OpSchema::FormalParameter& last = formals.back();
  return last.GetOption() == onnx::OpSchema::Variadic ? &last : nullptr;
}

bool FloatSupport::MainAdmits(int dtype) const {
  if (main_var_.empty()) return false;
  if (schema_ == nullptr) return true;
  const onnx::DataType type = FloatDataType(dtype);
  return type != nullptr && main_types_->count(type) > 0;
}

bool FloatSupport::InputFollowsMain(int slot) const {
  if (main_var_.empty()) return false;
  if (schema_ == nullptr) return true;
  const onnx::OpSchema::FormalParameter* formal = Formal(schema_->inputs(), slot);
  return formal != nullptr && (formal->GetTypeStr() == main_var_ ||
                               LinkedToMain(*schema_, main_var_, formal->GetTypeStr()));
}

bool FloatSupport::OutputFollowsMain(int slot) const {
  if (main_var_.empty()) return false;
  if (schema_ == nullptr) return true;
  const onnx::OpSchema::FormalParameter* formal = Formal(schema_->outputs(), slot);
  return formal != nullptr && (formal->GetTypeStr() == main_var_ ||
                               LinkedToMain(*schema_, main_var_, formal->GetTypeStr()));
}

std::string FloatSupport::SchemaName() const {
  if (schema_ == nullptr) return "unknown op";
  return absl::StrCat(schema_->Name(), "-", schema_->SinceVersion());
}

}  // namespace ampc
