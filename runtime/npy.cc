#include "runtime/npy.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace ampc {
namespace {

struct Descr {
  const char* text;
  DType dtype;
};

constexpr Descr kDescrs[] = {
    {"<f4", DType::kFloat},  {"<f2", DType::kFloat16}, {"<f8", DType::kDouble},
    {"|i1", DType::kInt8},   {"<i2", DType::kInt16},   {"<i4", DType::kInt32},
    {"<i8", DType::kInt64},  {"|u1", DType::kUint8},   {"<u2", DType::kUint16},
    {"<u4", DType::kUint32}, {"<u8", DType::kUint64},  {"|b1", DType::kBool},
};

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

// Reads the header dict as numpy.lib.format writes it, "{'descr': '<f4', 'fortran_order':
// False, 'shape': (2, 3), }" and padding: exactly those three keys, each once.
class HeaderParser {
 public:
  explicit HeaderParser(absl::string_view text) : rest_(text) {}

  absl::StatusOr<NpyHeader> Parse() {
    NpyHeader header;
    int seen = 0;  // bit per key
    if (!Take('{')) return Error("expected '{'");
    while (!Take('}')) {
      std::string key;
      if (!String(key) || !Take(':')) return Error("expected 'key': value");
      const int bit = key == "descr" ? 1 : key == "fortran_order" ? 2 : key == "shape" ? 4 : 0;
      if (bit == 0) return Error(absl::StrCat("unknown key '", key, "'"));
      if (seen & bit) return Error(absl::StrCat("key '", key, "' appears twice"));
      seen |= bit;
      const bool ok = bit == 1   ? String(header.descr)
                      : bit == 2 ? Bool(header.fortran_order)
                                 : Tuple(header.shape);
      if (!ok) return Error(absl::StrCat("bad value of '", key, "'"));
      if (!Take(',') && !absl::StartsWith(absl::StripLeadingAsciiWhitespace(rest_), "}")) {
        return Error("expected ',' or '}'");
      }
    }
    if (!absl::StripAsciiWhitespace(rest_).empty()) return Error("text after the dict");
    if (seen != 7) return Error("needs the keys 'descr', 'fortran_order' and 'shape'");
    return header;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("header: ", what));
  }
  bool Take(char c) {
    rest_ = absl::StripLeadingAsciiWhitespace(rest_);
    return absl::ConsumePrefix(&rest_, absl::string_view(&c, 1));
  }
  bool String(std::string& out) {
    rest_ = absl::StripLeadingAsciiWhitespace(rest_);
    if (rest_.empty() || (rest_[0] != '\'' && rest_[0] != '"')) return false;
    const size_t end = rest_.find(rest_[0], 1);
    if (end == absl::string_view::npos) return false;
    out = std::string(rest_.substr(1, end - 1));
    rest_.remove_prefix(end + 1);
    return true;
  }
  bool Bool(bool& out) {
    rest_ = absl::StripLeadingAsciiWhitespace(rest_);
    out = absl::ConsumePrefix(&rest_, "True");
    return out || absl::ConsumePrefix(&rest_, "False");
  }
  bool Tuple(Shape& out) {
    if (!Take('(')) return false;
    while (!Take(')')) {
      rest_ = absl::StripLeadingAsciiWhitespace(rest_);
      const size_t end = std::min(rest_.find_first_of(",)"), rest_.size());
      int64_t dim;
      if (!absl::SimpleAtoi(rest_.substr(0, end), &dim) || dim < 0) return false;
      out.push_back(dim);
      rest_.remove_prefix(end);
      if (!Take(',') && !absl::StartsWith(rest_, ")")) return false;
    }
    return true;
  }

  absl::string_view rest_;
};

absl::Status Bad(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": not a readable .npy file: ", what));
}

}  // namespace

absl::StatusOr<Tensor> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) return Bad(path, "bad magic");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return Bad(path, "short header");
    uint32_t len;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    offset = 12;
  } else {
    return Bad(path, absl::StrCat("format version ", major));
  }
  if (bytes.size() < offset + header_len) return Bad(path, "short header");
  absl::StatusOr<NpyHeader> header =
      HeaderParser(absl::string_view(bytes).substr(offset, header_len)).Parse();
  if (!header.ok()) return Bad(path, std::string(header.status().message()));
  std::string& descr = header->descr;
  if (!descr.empty() && descr[0] == '=') descr[0] = '<';  // native order on a little-endian host
  DType dtype = DType::kUndefined;
  for (const Descr& d : kDescrs) {
    if (descr == d.text) dtype = d.dtype;
  }
  if (dtype == DType::kUndefined) return Bad(path, absl::StrCat("unsupported dtype '", descr, "'"));
  if (header->fortran_order) return Bad(path, "Fortran order (save with numpy.ascontiguousarray)");
  const Shape& shape = header->shape;
  absl::StatusOr<size_t> needed = CheckedBytes(dtype, shape);
  if (!needed.ok()) return Bad(path, std::string(needed.status().message()));
  const size_t data_offset = offset + header_len;
  if (bytes.size() - data_offset != *needed) {
    return Bad(path, absl::StrCat("shape ", ShapeString(shape), " needs ", *needed,
                                  " bytes of data, the file has ", bytes.size() - data_offset));
  }
  Tensor tensor = Tensor::Host(dtype, shape);
  std::memcpy(tensor.raw(), bytes.data() + data_offset, tensor.bytes());
  return tensor;
}

std::string EncodeNpy(const Tensor& tensor) {
  Tensor data = tensor;
  if (tensor.dtype() == DType::kBFloat16) {
    data = Tensor::Host(DType::kFloat, tensor.shape());
    for (int64_t i = 0; i < tensor.size(); ++i) {
      data.data<float>()[i] = BFloat16ToFloat(tensor.data<BFloat16>()[i].bits);
    }
  }
  const char* descr = "";
  for (const Descr& d : kDescrs) {
    if (d.dtype == data.dtype()) descr = d.text;
  }
  const std::string shape = data.rank() == 1
                                ? absl::StrCat("(", data.dim(0), ",)")
                                : absl::StrCat("(", absl::StrJoin(data.shape(), ", "), ")");
  std::string header =
      absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back(1);
  out.push_back(0);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  out.append(static_cast<const char*>(data.raw()), data.bytes());
  return out;
}

}  // namespace ampc
