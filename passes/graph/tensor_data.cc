#include "passes/graph/tensor_data.h"

#include <array>
#include <bit>
#include <optional>
#include <type_traits>
#include <utility>

namespace ampc {
namespace {

using onnx::TensorProto;

static_assert(std::endian::native == std::endian::little, "raw_data is little-endian");

// The TensorProto field that holds a data type's values when raw_data does not.
enum class TypedField { kNone, kFloat, kDouble, kInt32, kInt64, kUint64 };

// `bits` per element in raw_data (sub-byte types are packed LSB first); `entry_bytes`, the bytes of
// raw_data one typed-field entry stands for (one packed byte for the 4- and 2-bit types; the
// 6-bit floats keep one element per int32_data entry, 0 here, and are packed by PackSixBit).
struct Layout {
  size_t bits;
  TypedField field;
  size_t entry_bytes;
};

// Indexed by TensorProto::DataType.
constexpr std::array<Layout, 29> kLayouts = {{
    {0, TypedField::kNone, 0},      // UNDEFINED
    {32, TypedField::kFloat, 4},    // FLOAT
    {8, TypedField::kInt32, 1},     // UINT8
    {8, TypedField::kInt32, 1},     // INT8
    {16, TypedField::kInt32, 2},    // UINT16
    {16, TypedField::kInt32, 2},    // INT16
    {32, TypedField::kInt32, 4},    // INT32
    {64, TypedField::kInt64, 8},    // INT64
    {0, TypedField::kNone, 0},      // STRING
    {8, TypedField::kInt32, 1},     // BOOL
    {16, TypedField::kInt32, 2},    // FLOAT16
    {64, TypedField::kDouble, 8},   // DOUBLE
    {32, TypedField::kUint64, 4},   // UINT32
    {64, TypedField::kUint64, 8},   // UINT64
    {64, TypedField::kFloat, 4},    // COMPLEX64
    {128, TypedField::kDouble, 8},  // COMPLEX128
    {16, TypedField::kInt32, 2},    // BFLOAT16
    {8, TypedField::kInt32, 1},     // FLOAT8E4M3FN
    {8, TypedField::kInt32, 1},     // FLOAT8E4M3FNUZ
    {8, TypedField::kInt32, 1},     // FLOAT8E5M2
    {8, TypedField::kInt32, 1},     // FLOAT8E5M2FNUZ
    {4, TypedField::kInt32, 1},     // UINT4
    {4, TypedField::kInt32, 1},     // INT4
    {4, TypedField::kInt32, 1},     // FLOAT4E2M1
    {8, TypedField::kInt32, 1},     // FLOAT8E8M0
    {2, TypedField::kInt32, 1},     // UINT2
    {2, TypedField::kInt32, 1},     // INT2
    {6, TypedField::kInt32, 0},     // FLOAT6E2M3
    {6, TypedField::kInt32, 0},     // FLOAT6E3M2
}};

static_assert(kLayouts.size() == onnx::TensorProto_DataType_DataType_MAX + 1,
              "a data type of the pinned ONNX has no layout");

Layout LayoutOf(int32_t data_type) {
  if (data_type < 0 || data_type >= static_cast<int32_t>(kLayouts.size())) {
    return {0, TypedField::kNone, 0};
  }
  return kLayouts[static_cast<size_t>(data_type)];
}

// Bytes that `elements` packed elements of `bits` each take, ceil(bits * elements / 8), without
// overflowing where the byte count fits: every 8 elements take `bits` bytes.
std::optional<uint64_t> PackedBytes(size_t bits, uint64_t elements) {
  uint64_t bytes;
  if (__builtin_mul_overflow(elements / 8, uint64_t{bits}, &bytes) ||
      __builtin_add_overflow(bytes, ((elements % 8) * bits + 7) / 8, &bytes)) {
    return std::nullopt;
  }
  return bytes;
}

// 6-bit values, one per int32_data entry, as the raw_data bitstream (LSB first).
void PackSixBit(const google::protobuf::RepeatedField<int32_t>& values, std::string& out) {
  uint32_t buffer = 0;
  int held = 0;
  for (int32_t v : values) {
    buffer |= (static_cast<uint32_t>(v) & 0x3f) << held;
    for (held += 6; held >= 8; held -= 8, buffer >>= 8) out.push_back(static_cast<char>(buffer));
  }
  if (held > 0) out.push_back(static_cast<char>(buffer));
}

// Appends floating-point values whole and integers as their low `width` bytes.
template <typename Field>
void AppendLittleEndian(const Field& values, size_t width, std::string& out) {
  for (auto v : values) {
    if constexpr (std::is_floating_point_v<decltype(v)>) {
      out.append(reinterpret_cast<const char*>(&v), sizeof(v));
    } else {
      const uint64_t bits = static_cast<uint64_t>(v);
      out.append(reinterpret_cast<const char*>(&bits), width);
    }
  }
}

std::string TypedBytes(const TensorProto& tensor, const Layout& layout) {
  std::string out;
  switch (layout.field) {
    case TypedField::kFloat:
      AppendLittleEndian(tensor.float_data(), sizeof(float), out);
      break;
    case TypedField::kDouble:
      AppendLittleEndian(tensor.double_data(), sizeof(double), out);
      break;
    case TypedField::kInt32:
      if (layout.entry_bytes == 0) {
        PackSixBit(tensor.int32_data(), out);
      } else {
        AppendLittleEndian(tensor.int32_data(), layout.entry_bytes, out);
      }
      break;
    case TypedField::kInt64:
      AppendLittleEndian(tensor.int64_data(), sizeof(int64_t), out);
      break;
    case TypedField::kUint64:
      AppendLittleEndian(tensor.uint64_data(), layout.entry_bytes, out);
      break;
    case TypedField::kNone:
      break;
  }
  return out;
}

void ClearTypedField(TensorProto& tensor, TypedField field) {
  switch (field) {
    case TypedField::kFloat:
      return tensor.clear_float_data();
    case TypedField::kDouble:
      return tensor.clear_double_data();
    case TypedField::kInt32:
      return tensor.clear_int32_data();
    case TypedField::kInt64:
      return tensor.clear_int64_data();
    case TypedField::kUint64:
      return tensor.clear_uint64_data();
    case TypedField::kNone:
      return;
  }
}

}  // namespace

bool IsFloatElementType(int32_t data_type) {
  return data_type == onnx::TensorProto::FLOAT || data_type == onnx::TensorProto::DOUBLE ||
         data_type == onnx::TensorProto::FLOAT16 || data_type == onnx::TensorProto::BFLOAT16;
}

std::optional<size_t> ElementSize(int32_t data_type) {
  const size_t bits = LayoutOf(data_type).bits;
  if (bits == 0 || bits % 8 != 0) return std::nullopt;
  return bits / 8;
}

std::optional<uint64_t> DataBytes(const TensorProto& tensor) {
  const size_t bits = LayoutOf(tensor.data_type()).bits;
  if (bits == 0) return std::nullopt;
  bool empty = false;
  for (int64_t dim : tensor.dims()) {
    if (dim < 0) return std::nullopt;
    empty = empty || dim == 0;
  }
  if (empty) return 0;
  uint64_t elements = 1;
  for (int64_t dim : tensor.dims()) {
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(dim), &elements)) {
      return std::nullopt;
    }
  }
  return PackedBytes(bits, elements);
}

uint64_t HeldBytes(const TensorProto& tensor) {
  if (!tensor.raw_data().empty()) return tensor.raw_data().size();
  const Layout layout = LayoutOf(tensor.data_type());
  switch (layout.field) {
    case TypedField::kFloat:
      return uint64_t{sizeof(float)} * static_cast<uint64_t>(tensor.float_data_size());
    case TypedField::kDouble:
      return uint64_t{sizeof(double)} * static_cast<uint64_t>(tensor.double_data_size());
    case TypedField::kInt32:
      if (layout.entry_bytes == 0) {
        return PackedBytes(layout.bits, static_cast<uint64_t>(tensor.int32_data_size())).value();
      }
      return layout.entry_bytes * static_cast<uint64_t>(tensor.int32_data_size());
    case TypedField::kInt64:
      return uint64_t{sizeof(int64_t)} * static_cast<uint64_t>(tensor.int64_data_size());
    case TypedField::kUint64:
      return layout.entry_bytes * static_cast<uint64_t>(tensor.uint64_data_size());
    case TypedField::kNone:
      break;
  }
  return 0;
}

std::string RawBytes(const TensorProto& tensor) {
  if (!tensor.raw_data().empty()) return tensor.raw_data();
  return TypedBytes(tensor, LayoutOf(tensor.data_type()));
}

bool MoveTypedDataToRaw(TensorProto& tensor) {
  if (tensor.has_raw_data()) return true;
  const Layout layout = LayoutOf(tensor.data_type());
  if (layout.field == TypedField::kNone) return false;
  std::string raw = TypedBytes(tensor, layout);
  ClearTypedField(tensor, layout.field);
  tensor.set_raw_data(std::move(raw));
  return true;
}

onnx::TensorProto ScalarTensor(int elem_type, double value) {
  onnx::TensorProto t;
  t.set_data_type(elem_type);
  if (elem_type == onnx::TensorProto::FLOAT) t.add_float_data(static_cast<float>(value));
  if (elem_type == onnx::TensorProto::INT64) t.add_int64_data(static_cast<int64_t>(value));
  if (elem_type == onnx::TensorProto::BOOL) t.add_int32_data(value != 0 ? 1 : 0);
  return t;
}

}  // namespace ampc
