#include "runtime/core/dtype.h"

#include "absl/strings/str_cat.h"

namespace ampc {

int DTypeBits(DType dtype) {
  switch (dtype) {
    case DType::kUint2:
    case DType::kInt2:
      return 2;
    case DType::kUint4:
    case DType::kInt4:
    case DType::kFloat4E2M1:
      return 4;
    case DType::kBool:
    case DType::kUint8:
    case DType::kInt8:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
    case DType::kFloat8E8M0:
      return 8;
    case DType::kUint16:
    case DType::kInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
      return 16;
    case DType::kFloat:
    case DType::kInt32:
    case DType::kUint32:
      return 32;
    case DType::kDouble:
    case DType::kInt64:
    case DType::kUint64:
      return 64;
    default:
      return 0;
  }
}

size_t DTypeSize(DType dtype) {
  const int bits = DTypeBits(dtype);
  return bits % 8 == 0 ? static_cast<size_t>(bits / 8) : 0;
}

size_t DTypeBytes(DType dtype, int64_t count) {
  return (static_cast<size_t>(count) * static_cast<size_t>(DTypeBits(dtype)) + 7) / 8;
}

bool IsLowBit(DType dtype) {
  switch (dtype) {
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
    case DType::kFloat8E8M0:
    case DType::kFloat4E2M1:
    case DType::kUint4:
    case DType::kInt4:
    case DType::kUint2:
    case DType::kInt2:
      return true;
    default:
      return false;
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
  if (DTypeBits(dtype) != 0) return absl::OkStatus();
  return absl::UnimplementedError(
      absl::StrCat("element type ", DTypeName(dtype), " is not supported by the runtime"));
}

}  // namespace ampc
