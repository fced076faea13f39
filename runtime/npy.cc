#include "runtime/npy.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
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

// The value of `key` in the header dict: "'descr': '<f4', 'fortran_order': False, ...".
std::string DictValue(const std::string& header, const std::string& key) {
  const size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) return "";
  size_t start = header.find(':', at);
  if (start == std::string::npos) return "";
  ++start;
  while (start < header.size() && header[start] == ' ') ++start;
  if (start < header.size() && header[start] == '(') {
    return header.substr(start, header.find(')', start) - start + 1);
  }
  size_t end = header.find_first_of(",}", start);
  return header.substr(start, end - start);
}

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
  const std::string header = bytes.substr(offset, header_len);
  std::string descr(absl::StripSuffix(absl::StripPrefix(DictValue(header, "descr"), "'"), "'"));
  if (!descr.empty() && descr[0] == '=') descr[0] = '<';  // native order on a little-endian host
  DType dtype = DType::kUndefined;
  for (const Descr& d : kDescrs) {
    if (descr == d.text) dtype = d.dtype;
  }
  if (dtype == DType::kUndefined) return Bad(path, absl::StrCat("unsupported dtype '", descr, "'"));
  if (absl::StrContains(DictValue(header, "fortran_order"), "True")) {
    return Bad(path, "Fortran order (save with numpy.ascontiguousarray)");
  }
  const std::string shape_text(
      absl::StripSuffix(absl::StripPrefix(DictValue(header, "shape"), "("), ")"));
  Shape shape;
  for (absl::string_view part : absl::StrSplit(shape_text, ',', absl::SkipWhitespace())) {
    int64_t dim;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &dim) || dim < 0) {
      return Bad(path, absl::StrCat("bad shape (", shape_text, ")"));
    }
    shape.push_back(dim);
  }
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
