// Element types of runtime tensors: ONNX's TensorProto data types, with their C++ storage types.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "kernels/numerics/half.h"

namespace ampc {

enum class DType : int32_t {
  kUndefined = onnx::TensorProto::UNDEFINED,
  kFloat = onnx::TensorProto::FLOAT,
  kUint8 = onnx::TensorProto::UINT8,
  kInt8 = onnx::TensorProto::INT8,
  kUint16 = onnx::TensorProto::UINT16,
  kInt16 = onnx::TensorProto::INT16,
  kInt32 = onnx::TensorProto::INT32,
  kInt64 = onnx::TensorProto::INT64,
  kString = onnx::TensorProto::STRING,
  kBool = onnx::TensorProto::BOOL,
  kFloat16 = onnx::TensorProto::FLOAT16,
  kDouble = onnx::TensorProto::DOUBLE,
  kUint32 = onnx::TensorProto::UINT32,
  kUint64 = onnx::TensorProto::UINT64,
  kBFloat16 = onnx::TensorProto::BFLOAT16,
  // Low-bit types (low_bit.h): no C++ storage type, so Dispatch and the kernels' type lists never
  // include them; only Cast/CastLike read and write them. 4- and 2-bit ones pack low bits first.
  kFloat8E4M3FN = onnx::TensorProto::FLOAT8E4M3FN,
  kFloat8E4M3FNUZ = onnx::TensorProto::FLOAT8E4M3FNUZ,
  kFloat8E5M2 = onnx::TensorProto::FLOAT8E5M2,
  kFloat8E5M2FNUZ = onnx::TensorProto::FLOAT8E5M2FNUZ,
  kUint4 = onnx::TensorProto::UINT4,
  kInt4 = onnx::TensorProto::INT4,
  kFloat4E2M1 = onnx::TensorProto::FLOAT4E2M1,
  kFloat8E8M0 = onnx::TensorProto::FLOAT8E8M0,
  kUint2 = onnx::TensorProto::UINT2,
  kInt2 = onnx::TensorProto::INT2,
};

// Bits per element: 64 down to 2; 0 for types the runtime cannot hold (string, complex, 6-bit).
int DTypeBits(DType dtype);

// Bytes per element; 0 for the sub-byte types (use DTypeBytes) and those the runtime cannot hold.
size_t DTypeSize(DType dtype);

// Bytes `count` elements take, sub-byte types packed and the last byte padded.
size_t DTypeBytes(DType dtype, int64_t count);

// The FP8, E8M0, FP4 and 2/4-bit integer types, which only Cast and CastLike convert.
bool IsLowBit(DType dtype);

// "float32", "float16", "bfloat16", "int64", ... (numpy's names; "bfloat16" has none there).
std::string DTypeName(DType dtype);

// A type the runtime can hold, or InvalidArgument naming the ONNX data type.
absl::Status CheckSupported(DType dtype);

template <DType D>
struct CTypeOf;
template <>
struct CTypeOf<DType::kFloat> {
  using type = float;
};
template <>
struct CTypeOf<DType::kDouble> {
  using type = double;
};
template <>
struct CTypeOf<DType::kFloat16> {
  using type = Half;
};
template <>
struct CTypeOf<DType::kBFloat16> {
  using type = BFloat16;
};
template <>
struct CTypeOf<DType::kUint8> {
  using type = uint8_t;
};
template <>
struct CTypeOf<DType::kInt8> {
  using type = int8_t;
};
template <>
struct CTypeOf<DType::kUint16> {
  using type = uint16_t;
};
template <>
struct CTypeOf<DType::kInt16> {
  using type = int16_t;
};
template <>
struct CTypeOf<DType::kInt32> {
  using type = int32_t;
};
template <>
struct CTypeOf<DType::kInt64> {
  using type = int64_t;
};
template <>
struct CTypeOf<DType::kUint32> {
  using type = uint32_t;
};
template <>
struct CTypeOf<DType::kUint64> {
  using type = uint64_t;
};
template <>
struct CTypeOf<DType::kBool> {
  using type = bool;
};

// Calls fn.template operator()<T>() with T the storage type of `dtype`, for the types listed in
// Ds...; returns false (without calling) for any other dtype. Usage:
//   Dispatch<DType::kFloat, DType::kFloat16>(dtype, [&]<typename T>() { ... });
template <DType... Ds, typename Fn>
bool Dispatch(DType dtype, Fn&& fn) {
  return ((dtype == Ds ? (fn.template operator()<typename CTypeOf<Ds>::type>(), true) : false) ||
          ...);
}

// The floating-point types kernels compute in: FP32, FP16, BF16 and FP64.
#define AMPC_FLOAT_TYPES DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble
#define AMPC_INT_TYPES                                                                      \
  DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64, DType::kUint8, DType::kUint16, \
      DType::kUint32, DType::kUint64
#define AMPC_ALL_TYPES AMPC_FLOAT_TYPES, AMPC_INT_TYPES, DType::kBool
// For type lists only (no storage types): Cast and CastLike accept them.
#define AMPC_LOW_BIT_TYPES                                                                  \
  DType::kFloat8E4M3FN, DType::kFloat8E4M3FNUZ, DType::kFloat8E5M2, DType::kFloat8E5M2FNUZ, \
      DType::kFloat8E8M0, DType::kFloat4E2M1, DType::kInt4, DType::kUint4, DType::kInt2,    \
      DType::kUint2

// Values of storage type T as the type arithmetic happens in: FP16 and BF16 widen to float
// (exactly); everything else is itself. Store rounds back (to nearest even for FP16/BF16).
template <typename T>
struct Compute {
  using type = T;
  static T Load(T v) { return v; }
  static T Store(T v) { return v; }
};
template <>
struct Compute<Half> {
  using type = float;
  static float Load(Half v) { return HalfToFloat(v.bits); }
  static Half Store(float v) { return Half{FloatToHalf(v)}; }
};
template <>
struct Compute<BFloat16> {
  using type = float;
  static float Load(BFloat16 v) { return BFloat16ToFloat(v.bits); }
  static BFloat16 Store(float v) { return BFloat16{FloatToBFloat16(v)}; }
};

}  // namespace ampc
