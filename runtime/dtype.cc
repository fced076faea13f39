#include "runtime/dtype.h"

#include "absl/strings/str_cat.h"

namespace ampc {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kBool:
    case DType::kUint8:
    case DType::kInt8:
      return 1;
    case DType::kUint16:
    case DType::kInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kFloat:
    case DType::kInt32:
    case DType::kUint32:
      return 4;
    case DType::kDouble:
    case DType::kInt64:
    case DType::kUint64:
      return 8;
    default:
      return 0;
  }
}

std::string DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kDouble:
      return "float64";
    case DType::kUint8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kUint16:
      return "uint16";
    case DType::kInt16:
      return "int16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kUint32:
      return "uint32";
    case DType::kUint64:
      return "uint64";
    case DType::kBool:
      return "bool";
    case DType::kString:
      return "string";
    default: {
      const auto type = static_cast<onnx::TensorProto::DataType>(dtype);
      if (onnx::TensorProto::DataType_IsValid(type)) return onnx::TensorProto::DataType_Name(type);
      return absl::StrCat("data type ", static_cast<int32_t>(dtype));
    }
  }
}

absl::Status CheckSupported(DType dtype) {
  if (DTypeSize(dtype) != 0) return absl::OkStatus();
  return absl::UnimplementedError(
      absl::StrCat("element type ", DTypeName(dtype), " is not supported by the runtime"));
}

}  // namespace ampc
