// A tensor's data as bytes: the element size of each TensorProto data type, and the little-endian
// raw_data layout of values, whichever field holds them.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace ampc {

// Bytes per element in raw_data; nullopt for STRING, UNDEFINED, unknown data types and the
// sub-byte ones (4-, 2- and 6-bit, packed in raw_data; DataBytes counts them).
std::optional<size_t> ElementSize(int32_t data_type);

// FLOAT, DOUBLE, FLOAT16 or BFLOAT16: the types whose values are floats a pass reads or converts
// (the float8 types are not).
bool IsFloatElementType(int32_t data_type);

// Bytes of data the tensor's dims and data type call for (sub-byte types packed, the last byte
// padded); nullopt for STRING, UNDEFINED and unknown data types, a negative dim, and on overflow.
std::optional<uint64_t> DataBytes(const onnx::TensorProto& tensor);

// Bytes of data the tensor holds, counted as raw_data would hold them (raw_data's size, else the
// typed field's count times its width); nothing is copied. 0 for STRING and unknown data types
// without raw_data.
uint64_t HeldBytes(const onnx::TensorProto& tensor);

// The tensor's elements as little-endian bytes (the raw_data layout): raw_data when it is not
// empty, else the typed field the ONNX spec stores the data type in (int32_data for 16-bit and
// smaller types: one element each, one packed byte each for 4- and 2-bit types, 6-bit values
// packed here; uint64_data for uint32 and uint64, float_data and double_data for complex pairs).
// Empty for STRING and unknown data types without raw_data.
std::string RawBytes(const onnx::TensorProto& tensor);

// A scalar (no dims) of elem_type FLOAT, INT64 or BOOL holding `value`, in the typed field.
onnx::TensorProto ScalarTensor(int elem_type, double value);

// Moves values from their typed field into raw_data (external data requires raw_data). True if
// the tensor now has raw_data; false for STRING and unknown data types.
bool MoveTypedDataToRaw(onnx::TensorProto& tensor);

}  // namespace ampc
