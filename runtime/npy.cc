#include "runtime/npy.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "runtime/core/input_file.h"

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

// numpy itself refuses headers over 10,000 bytes unless told otherwise; this leaves room.
constexpr uint64_t kMaxHeaderBytes = 1 << 20;

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

// Where the header dict lies: after the magic, the version and its 2- or 4-byte length.
absl::Status ReadPreamble(const InputFile& file, const std::string& path, uint64_t& offset,
                          uint64_t& header_len) {
  char pre[12] = {};
  const uint64_t have = std::min<uint64_t>(file.size, sizeof pre);
  if (int err = ReadAt(file.fd.get(), pre, have, 0); err != 0) {
    return Bad(path, absl::StrCat("read error: ", ErrnoText(err)));
  }
  if (have < 10 || std::memcmp(pre, "\x93NUMPY", 6) != 0) return Bad(path, "bad magic");
  const int major = static_cast<unsigned char>(pre[6]);
  if (major == 1) {
    header_len = static_cast<unsigned char>(pre[8]) | static_cast<unsigned char>(pre[9]) << 8;
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (have < 12) return Bad(path, "short header");
    uint32_t len;
    std::memcpy(&len, pre + 8, 4);
    header_len = len;
    offset = 12;
  } else {
    return Bad(path, absl::StrCat("format version ", major));
  }
  if (header_len > kMaxHeaderBytes) {
    return Bad(path, absl::StrCat("a header of ", header_len, " bytes (numpy writes under ",
                                  kMaxHeaderBytes, ")"));
  }
  if (file.size < offset + header_len) return Bad(path, "short header");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> ReadNpy(const std::string& path) {
  absl::StatusOr<InputFile> file = OpenInputFile(path);
  if (!file.ok()) return file.status();
  uint64_t offset = 0, header_len = 0;
  if (absl::Status s = ReadPreamble(*file, path, offset, header_len); !s.ok()) return s;
  std::string text(header_len, '\0');
  if (int err = ReadAt(file->fd.get(), text.data(), header_len, offset); err != 0) {
    return Bad(path, absl::StrCat("read error: ", ErrnoText(err)));
  }
  absl::StatusOr<NpyHeader> header = HeaderParser(text).Parse();
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
  const uint64_t data_offset = offset + header_len;
  if (file->size - data_offset != *needed) {  // checked before the data is allocated or read
    return Bad(path, absl::StrCat("shape ", ShapeString(shape), " needs ", *needed,
                                  " bytes of data, the file has ", file->size - data_offset));
  }
  Tensor tensor = Tensor::Host(dtype, shape);
  if (int err =
          ReadAt(file->fd.get(), static_cast<char*>(tensor.raw()), tensor.bytes(), data_offset);
      err != 0) {
    return Bad(path, absl::StrCat("read error: ", ErrnoText(err)));
  }
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
