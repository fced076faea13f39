#include "passes/tensor_data.h"

#include <array>
#include <bit>
#include <type_traits>
#include <utility>

namespace ampc {
namespace {

using onnx::TensorProto;

static_assert(std::endian::native == std::endian::little, "raw_data is little-endian");

// The TensorProto field that holds a data type's values when raw_data does not.
enum class TypedField { kNone, kFloat, kDouble, kInt32, kInt64, kUint64 };

struct Layout {
  size_t element_size;
  TypedField field;
};

// Indexed by TensorProto::DataType.
constexpr std::array<Layout, 17> kLayouts = {{
    {0, TypedField::kNone},     // UNDEFINED
    {4, TypedField::kFloat},    // FLOAT
    {1, TypedField::kInt32},    // UINT8
    {1, TypedField::kInt32},    // INT8
    {2, TypedField::kInt32},    // UINT16
    {2, TypedField::kInt32},    // INT16
    {4, TypedField::kInt32},    // INT32
    {8, TypedField::kInt64},    // INT64
    {0, TypedField::kNone},     // STRING
    {1, TypedField::kInt32},    // BOOL
    {2, TypedField::kInt32},    // FLOAT16
    {8, TypedField::kDouble},   // DOUBLE
    {4, TypedField::kUint64},   // UINT32
    {8, TypedField::kUint64},   // UINT64
    {8, TypedField::kFloat},    // COMPLEX64
    {16, TypedField::kDouble},  // COMPLEX128
    {2, TypedField::kInt32},    // BFLOAT16
}};

Layout LayoutOf(int32_t data_type) {
  if (data_type < 0 || data_type >= static_cast<int32_t>(kLayouts.size())) {
    return {0, TypedField::kNone};
  }
  return kLayouts[static_cast<size_t>(data_type)];
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
      AppendLittleEndian(tensor.int32_data(), layout.element_size, out);
      break;
    case TypedField::kInt64:
      AppendLittleEndian(tensor.int64_data(), sizeof(int64_t), out);
      break;
    case TypedField::kUint64:
      AppendLittleEndian(tensor.uint64_data(), layout.element_size, out);
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

std::optional<size_t> ElementSize(int32_t data_type) {
  const size_t size = LayoutOf(data_type).element_size;
  if (size == 0) return std::nullopt;
  return size;
}

std::optional<uint64_t> DataBytes(const TensorProto& tensor) {
  std::optional<size_t> size = ElementSize(tensor.data_type());
  if (!size) return std::nullopt;
  uint64_t bytes = *size;
  for (int64_t dim : tensor.dims()) {
    if (dim < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes)) {
      return std::nullopt;
    }
  }
  return bytes;
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
      return layout.element_size * static_cast<uint64_t>(tensor.int32_data_size());
    case TypedField::kInt64:
      return uint64_t{sizeof(int64_t)} * static_cast<uint64_t>(tensor.int64_data_size());
    case TypedField::kUint64:
      return layout.element_size * static_cast<uint64_t>(tensor.uint64_data_size());
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

}  // namespace ampc
