#include "compiler/tensor_text.h"

#include <zlib.h>

#include <bit>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

#include "compiler/text_tokens.h"
#include "kernels/numerics/half.h"
#include "passes/graph/tensor_data.h"

namespace ampc {
namespace {

using onnx::TensorProto;

static_assert(std::endian::native == std::endian::little, "raw_data is little-endian");

// A tensor's values in one canonical form, whichever field the proto stores them in: numbers as
// little-endian element bytes (the raw_data layout), strings as a list.
class TensorValues {
 public:
  // Types without an element size print their raw bytes one by one.
  explicit TensorValues(const TensorProto& t)
      : type_(t.data_type()), size_(ElementSize(type_).value_or(1)) {
    if (IsString()) {
      strings_.assign(t.string_data().begin(), t.string_data().end());
    } else if (!t.raw_data().empty()) {
      bytes_ = t.raw_data();  // a view: weights can be large
    } else {
      owned_ = RawBytes(t);
      bytes_ = owned_;
    }
  }

  size_t count() const { return IsString() ? strings_.size() : bytes_.size() / size_; }

  std::string Element(size_t i) const {
    if (IsString()) return Quote(strings_[i]);
    const char* p = bytes_.data() + i * size_;
    switch (type_) {
      case TensorProto::FLOAT:
        return FormatFloat(Load<float>(p));
      case TensorProto::DOUBLE:
        return FormatFloat(Load<double>(p));
      case TensorProto::FLOAT16:
        return FormatFloat(HalfToFloat(Load<uint16_t>(p)));
      case TensorProto::BFLOAT16:
        return FormatFloat(BFloat16ToFloat(Load<uint16_t>(p)));
      case TensorProto::COMPLEX64:
        return FormatFloat(Load<float>(p)) + ", " + FormatFloat(Load<float>(p + 4));
      case TensorProto::COMPLEX128:
        return FormatFloat(Load<double>(p)) + ", " + FormatFloat(Load<double>(p + 8));
      case TensorProto::INT8:
        return std::to_string(Load<int8_t>(p));
      case TensorProto::INT16:
        return std::to_string(Load<int16_t>(p));
      case TensorProto::INT32:
        return std::to_string(Load<int32_t>(p));
      case TensorProto::INT64:
        return std::to_string(Load<int64_t>(p));
      case TensorProto::UINT16:
        return std::to_string(Load<uint16_t>(p));
      case TensorProto::UINT32:
        return std::to_string(Load<uint32_t>(p));
      case TensorProto::UINT64:
        return std::to_string(Load<uint64_t>(p));
      default:
        return std::to_string(Load<uint8_t>(p));  // uint8, bool, unknown types
    }
  }

  // Strings count as their 8-byte little-endian length, then their bytes.
  uint32_t Crc32() const {
    uLong crc = crc32_z(0L, Z_NULL, 0);
    auto update = [&crc](std::string_view s) {
      crc = crc32_z(crc, reinterpret_cast<const Bytef*>(s.data()), s.size());
    };
    if (!IsString()) update(bytes_);
    for (std::string_view s : strings_) {
      const uint64_t length = s.size();
      update(std::string_view(reinterpret_cast<const char*>(&length), sizeof(length)));
      update(s);
    }
    return static_cast<uint32_t>(crc);
  }

 private:
  bool IsString() const { return type_ == TensorProto::STRING; }

  template <typename T>
  static T Load(const char* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  }

  int32_t type_;
  size_t size_;
  std::string owned_;
  std::string_view bytes_;
  std::vector<std::string_view> strings_;
};

std::string ExternalData(const TensorProto& t) {
  std::string location = "\"\"", offset, length;
  for (const auto& entry : t.external_data()) {
    if (entry.key() == "location") location = Quote(entry.value());
    if (entry.key() == "offset") offset = ", " + entry.value();
    if (entry.key() == "length") length = ", " + entry.value();
  }
  if (offset.empty() && !length.empty()) offset = ", 0";
  return "external(" + location + offset + length + ")";
}

}  // namespace

std::string TensorValueText(const TensorProto& tensor, int64_t max_inline_elements) {
  if (tensor.data_location() == TensorProto::EXTERNAL) return ExternalData(tensor);
  TensorValues values(tensor);
  const size_t n = values.count();
  if (static_cast<int64_t>(n) > max_inline_elements) {
    char digest[16];
    std::snprintf(digest, sizeof(digest), "crc32:%08x", values.Crc32());
    return digest;
  }
  std::string out = "{";
  for (size_t i = 0; i < n; ++i) out += (i > 0 ? ", " : "") + values.Element(i);
  return out + "}";
}

}  // namespace ampc
