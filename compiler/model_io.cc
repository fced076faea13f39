#include "compiler/model_io.h"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/wire_format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;
using google::protobuf::internal::WireFormat;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;
using google::protobuf::io::FileInputStream;
using google::protobuf::io::FileOutputStream;
using onnx::TensorProto;

static_assert(std::endian::native == std::endian::little, "raw_data is little-endian");

constexpr uint64_t kMaxInlineBytes = INT_MAX;  // protobuf's limit on one serialized message
constexpr uint64_t kDataAlignment = 4096;      // page size: a runtime can mmap each tensor

std::string ErrnoText(int err) { return std::generic_category().message(err); }

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Reads exactly `size` bytes at `offset`. Returns 0, or errno (EIO at an unexpected end of file).
int ReadAt(int fd, char* buffer, uint64_t size, uint64_t offset) {
  while (size > 0) {
    ssize_t n = ::pread(fd, buffer, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    buffer += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<uint64_t>(n);
  }
  return 0;
}

int WriteAll(int fd, const char* data, uint64_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    data += n;
    size -= static_cast<uint64_t>(n);
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Every TensorProto of a model, with where it sits (for messages).

struct TensorSite {
  const onnx::NodeProto* node = nullptr;  // set for attribute tensors
  const std::string* attribute = nullptr;
};

std::string Describe(const TensorProto& tensor, const TensorSite& site) {
  std::string text = tensor.name().empty() ? "" : absl::StrCat("tensor '", tensor.name(), "'");
  if (site.node == nullptr) return text;
  return absl::StrCat(text, text.empty() ? "" : " in ", "attribute '", *site.attribute,
                      "' of node '", site.node->name(), "' (", site.node->op_type(), ")");
}

using TensorFn = absl::FunctionRef<absl::Status(TensorProto&, const TensorSite&)>;

// Visits tensors without creating absent optional fields (mutable_x() would add them).
class TensorWalker {
 public:
  explicit TensorWalker(TensorFn fn) : fn_(fn) {}

  absl::Status Model(onnx::ModelProto& model) {
    if (model.has_graph()) {
      if (absl::Status s = Graph(*model.mutable_graph()); !s.ok()) return s;
    }
    for (onnx::FunctionProto& function : *model.mutable_functions()) {
      if (absl::Status s = Nodes(*function.mutable_node()); !s.ok()) return s;
    }
    for (onnx::TrainingInfoProto& info : *model.mutable_training_info()) {
      if (info.has_initialization()) {
        if (absl::Status s = Graph(*info.mutable_initialization()); !s.ok()) return s;
      }
      if (info.has_algorithm()) {
        if (absl::Status s = Graph(*info.mutable_algorithm()); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Graph(onnx::GraphProto& graph) {
    for (TensorProto& tensor : *graph.mutable_initializer()) {
      if (absl::Status s = fn_(tensor, {}); !s.ok()) return s;
    }
    for (onnx::SparseTensorProto& sparse : *graph.mutable_sparse_initializer()) {
      if (absl::Status s = Sparse(sparse, {}); !s.ok()) return s;
    }
    return Nodes(*graph.mutable_node());
  }

  absl::Status Nodes(google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes) {
    for (onnx::NodeProto& node : nodes) {
      for (onnx::AttributeProto& attr : *node.mutable_attribute()) {
        if (absl::Status s = Attribute(attr, {&node, &attr.name()}); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

  absl::Status Attribute(onnx::AttributeProto& attr, const TensorSite& site) {
    if (attr.has_t()) {
      if (absl::Status s = fn_(*attr.mutable_t(), site); !s.ok()) return s;
    }
    for (TensorProto& tensor : *attr.mutable_tensors()) {
      if (absl::Status s = fn_(tensor, site); !s.ok()) return s;
    }
    if (attr.has_sparse_tensor()) {
      if (absl::Status s = Sparse(*attr.mutable_sparse_tensor(), site); !s.ok()) return s;
    }
    for (onnx::SparseTensorProto& sparse : *attr.mutable_sparse_tensors()) {
      if (absl::Status s = Sparse(sparse, site); !s.ok()) return s;
    }
    if (attr.has_g()) {
      if (absl::Status s = Graph(*attr.mutable_g()); !s.ok()) return s;
    }
    for (onnx::GraphProto& graph : *attr.mutable_graphs()) {
      if (absl::Status s = Graph(graph); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status Sparse(onnx::SparseTensorProto& sparse, const TensorSite& site) {
    if (sparse.has_values()) {
      if (absl::Status s = fn_(*sparse.mutable_values(), site); !s.ok()) return s;
    }
    if (!sparse.has_indices()) return absl::OkStatus();
    return fn_(*sparse.mutable_indices(), site);
  }

  TensorFn fn_;
};

// Bytes of data a tensor's dims and data type call for; nullopt for strings, unknown types and
// bad dims.
std::optional<uint64_t> DataBytes(const TensorProto& tensor) {
  uint64_t bytes = 0;
  switch (tensor.data_type()) {
    case TensorProto::UINT8:
    case TensorProto::INT8:
    case TensorProto::BOOL:
      bytes = 1;
      break;
    case TensorProto::UINT16:
    case TensorProto::INT16:
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
      bytes = 2;
      break;
    case TensorProto::FLOAT:
    case TensorProto::INT32:
    case TensorProto::UINT32:
      bytes = 4;
      break;
    case TensorProto::INT64:
    case TensorProto::UINT64:
    case TensorProto::DOUBLE:
    case TensorProto::COMPLEX64:
      bytes = 8;
      break;
    case TensorProto::COMPLEX128:
      bytes = 16;
      break;
    default:
      return std::nullopt;
  }
  for (int64_t dim : tensor.dims()) {
    if (dim < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes)) {
      return std::nullopt;
    }
  }
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// Loading.

// A location must name a file inside the model's directory.
bool StaysInside(const std::string& location) {
  if (location.empty() || location.find('\0') != std::string::npos) return false;
  fs::path path(location);
  if (path.has_root_path()) return false;
  fs::path normal = path.lexically_normal();
  return !normal.empty() && normal != "." && *normal.begin() != "..";
}

bool ParseSize(const std::string* text, uint64_t& value) {
  return text == nullptr || (absl::SimpleAtoi(*text, &value) && value <= INT64_MAX);
}

struct ExternalSpan {
  std::string location;
  uint64_t offset = 0;
  uint64_t length = 0;
};

// Checks a tensor's external_data entries; appends the location to `prefix` once known.
absl::StatusOr<ExternalSpan> Locate(const TensorProto& tensor, std::string& prefix) {
  const std::string *location = nullptr, *offset = nullptr, *length = nullptr;
  for (const onnx::StringStringEntryProto& entry : tensor.external_data()) {
    if (entry.key() == "location") location = &entry.value();
    if (entry.key() == "offset") offset = &entry.value();
    if (entry.key() == "length") length = &entry.value();
  }
  if (location == nullptr)
    return absl::InvalidArgumentError(prefix + "external data has no 'location'");
  absl::StrAppend(&prefix, "external data '", *location, "'");
  if (!StaysInside(*location)) {
    return absl::InvalidArgumentError(
        prefix + ": location must be a relative path inside the model's directory");
  }
  std::optional<uint64_t> expected = DataBytes(tensor);
  if (!expected) {
    return absl::InvalidArgumentError(
        prefix + ": data type and dims do not give a size (strings cannot be external)");
  }
  ExternalSpan span{*location, 0, *expected};
  if (!ParseSize(offset, span.offset)) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, ": offset '", *offset, "' is not a number"));
  }
  if (!ParseSize(length, span.length)) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, ": length '", *length, "' is not a number"));
  }
  if (span.length != *expected) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ": length ", span.length,
                                                   " does not match dims x element size (",
                                                   *expected, " bytes)"));
  }
  return span;
}

class ExternalDataReader {
 public:
  explicit ExternalDataReader(const std::string& model_path) : model_path_(model_path) {
    dir_ = fs::path(model_path).parent_path();
  }

  bool used() const { return used_; }

  absl::Status Read(TensorProto& tensor, const TensorSite& site) {
    if (tensor.data_location() != TensorProto::EXTERNAL) return absl::OkStatus();
    used_ = true;
    std::string prefix = absl::StrCat(model_path_, ": ", Describe(tensor, site), ": ");
    absl::StatusOr<ExternalSpan> span = Locate(tensor, prefix);
    if (!span.ok()) return span.status();
    absl::StatusOr<const OpenFile*> file = Open(span->location, prefix);
    if (!file.ok()) return file.status();
    uint64_t size = (*file)->size;
    if (span->offset > size || span->length > size - span->offset) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, ": file is ", size,
                                                     " bytes, too short for offset ", span->offset,
                                                     " + length ", span->length));
    }
    std::string* raw = tensor.mutable_raw_data();
    raw->resize(span->length);
    if (int err = ReadAt((*file)->fd.get(), raw->data(), span->length, span->offset); err != 0) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, ": read error: ", ErrnoText(err)));
    }
    tensor.clear_external_data();
    tensor.clear_data_location();
    return absl::OkStatus();
  }

 private:
  struct OpenFile {
    Fd fd;
    uint64_t size = 0;
  };

  absl::StatusOr<const OpenFile*> Open(const std::string& location, const std::string& prefix) {
    auto it = files_.find(location);
    if (it != files_.end()) return &it->second;
    std::string full = (dir_ / location).string();
    Fd fd(::open(full.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (fd.get() < 0 && errno == ENOENT) return absl::NotFoundError(prefix + ": file not found");
    if (fd.get() < 0) return absl::InvalidArgumentError(prefix + ": " + ErrnoText(errno));
    struct stat st;
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(prefix + ": not a regular file");
    }
    OpenFile& file = files_[location];
    file.fd = std::move(fd);
    file.size = static_cast<uint64_t>(st.st_size);
    return &file;
  }

  std::string model_path_;
  fs::path dir_;
  std::map<std::string, OpenFile> files_;
  bool used_ = false;
};

// A binary ModelProto is full of tag and length bytes below 0x20; text has (almost) none.
bool LooksLikeText(absl::string_view head) {
  uint64_t control = 0;
  for (unsigned char c : head) {
    if (c == 0) return false;
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) ++control;
  }
  return control * 100 <= head.size();
}

// ONNX text syntax (`<ir_version: 8, ...>`, `name (inputs) => (outputs)`) or a text proto.
bool StartsLikeOnnxText(absl::string_view head) {
  absl::string_view text = absl::StripLeadingAsciiWhitespace(head);
  while (absl::ConsumePrefix(&text, "#")) {
    size_t end = text.find('\n');
    text =
        end == absl::string_view::npos ? "" : absl::StripLeadingAsciiWhitespace(text.substr(end));
  }
  return absl::StartsWith(text, "<") || absl::StartsWith(text, "ir_version") ||
         absl::StartsWith(text, "graph") || absl::StrContains(text, "=>");
}

// Whether a failed parse looks like a cut-off file: the top-level fields are well-formed
// ModelProto fields until one that declares more bytes than the file has left.
bool LooksTruncated(int fd, uint64_t size) {
  if (::lseek(fd, 0, SEEK_SET) != 0) return false;
  FileInputStream input(fd);
  CodedInputStream coded(&input);
  coded.SetTotalBytesLimit(INT_MAX);
  const google::protobuf::Descriptor* descriptor = onnx::ModelProto::descriptor();
  for (int complete = 0;; ++complete) {
    uint32_t tag = coded.ReadTag();
    if (tag == 0) return false;
    const google::protobuf::FieldDescriptor* field =
        descriptor->FindFieldByNumber(WireFormatLite::GetTagFieldNumber(tag));
    WireFormatLite::WireType type = WireFormatLite::GetTagWireType(tag);
    if (field == nullptr || type != WireFormat::WireTypeForField(field)) return false;
    if (type == WireFormatLite::WIRETYPE_VARINT) {
      uint64_t value;
      if (!coded.ReadVarint64(&value)) return complete > 0;
    } else if (type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      uint32_t length;
      if (!coded.ReadVarint32(&length)) return complete > 0;
      if (static_cast<uint64_t>(coded.CurrentPosition()) + length > size) return complete > 0;
      if (!coded.Skip(static_cast<int>(length))) return false;
    } else {
      return false;
    }
  }
}

absl::Status ParseModel(int fd, uint64_t size, const std::string& path, onnx::ModelProto& model) {
  FileInputStream input(fd);
  bool parsed = false;
  {
    CodedInputStream coded(&input);
    coded.SetTotalBytesLimit(INT_MAX);
    parsed = model.ParseFromCodedStream(&coded);
  }
  if (input.GetErrno() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": read error: ", ErrnoText(input.GetErrno())));
  }
  if (parsed) return absl::OkStatus();
  std::string message = absl::StrCat(path, ": not a valid ONNX model (protobuf parse failed)");
  if (LooksTruncated(fd, size)) {
    absl::StrAppend(&message, "; the file may be truncated (its last field runs past the end)");
  }
  return absl::InvalidArgumentError(message);
}

absl::StatusOr<Fd> OpenModelFile(const std::string& path, uint64_t& size) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) {
    int err = errno;
    std::string message = absl::StrCat(path, ": cannot open: ", ErrnoText(err));
    if (err == ENOENT) return absl::NotFoundError(message);
    return absl::InvalidArgumentError(message);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot stat: ", ErrnoText(errno)));
  }
  if (S_ISDIR(st.st_mode)) return absl::InvalidArgumentError(path + ": is a directory");
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(path + ": is not a regular file");
  size = static_cast<uint64_t>(st.st_size);
  if (size == 0) return absl::InvalidArgumentError(path + ": is empty, not an ONNX model");
  if (size > kMaxInlineBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": is ", size,
        " bytes; a protobuf model must be under 2 GiB (large weights belong in external data)"));
  }
  return fd;
}

absl::Status TextError(const std::string& path) {
  return absl::InvalidArgumentError(path +
                                    ": is text, not a binary ONNX model; convert it first (Python: "
                                    "onnx.save(onnx.parser.parse_model(text), path))");
}

}  // namespace

absl::StatusOr<LoadedModel> LoadModel(const std::string& path) {
  uint64_t size = 0;
  absl::StatusOr<Fd> fd = OpenModelFile(path, size);
  if (!fd.ok()) return fd.status();
  std::string head(std::min<uint64_t>(size, 4096), '\0');
  if (int err = ReadAt(fd->get(), head.data(), head.size(), 0); err != 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": read error: ", ErrnoText(err)));
  }
  bool text = LooksLikeText(head);
  if (text && StartsLikeOnnxText(head)) return TextError(path);

  LoadedModel loaded;
  absl::Status parsed = ParseModel(fd->get(), size, path, loaded.model);
  if (text && (!parsed.ok() || !loaded.model.has_graph())) return TextError(path);
  if (!parsed.ok()) return parsed;
  if (!loaded.model.has_graph()) {
    return absl::InvalidArgumentError(path + ": not a valid ONNX model (it has no graph)");
  }
  ExternalDataReader reader(path);
  absl::Status read = TensorWalker([&](TensorProto& tensor, const TensorSite& site) {
                        return reader.Read(tensor, site);
                      }).Model(loaded.model);
  if (!read.ok()) return read;
  loaded.used_external_data = reader.used();
  return loaded;
}

// ---------------------------------------------------------------------------------------------
// Saving.

namespace {

mode_t CurrentUmask() {
  // Read once: umask() can only be read by setting it.
  static const mode_t mask = [] {
    mode_t old = ::umask(0);
    ::umask(old);
    return old;
  }();
  return mask;
}

// A temporary file `<final>.tmp.XXXXXX` beside `final`: renamed into place by Commit, removed
// otherwise.
class TempFile {
 public:
  explicit TempFile(std::string final_path) : final_(std::move(final_path)) {}
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (!name_.empty()) ::unlink(name_.c_str());
  }

  int fd() const { return fd_.get(); }
  bool created() const { return !name_.empty(); }

  absl::Status Create() {
    std::string name = final_ + ".tmp.XXXXXX";
    Fd fd(::mkstemp(name.data()));
    if (fd.get() < 0) return Error("cannot create", errno);
    name_ = std::move(name);
    fd_ = std::move(fd);
    // mkstemp makes the file 0600; the output gets the usual permissions.
    if (::fchmod(fd_.get(), 0666 & ~CurrentUmask()) != 0) return Error("cannot chmod", errno);
    return absl::OkStatus();
  }

  absl::Status Write(const char* data, uint64_t size) {
    if (int err = WriteAll(fd_.get(), data, size); err != 0) return Error("cannot write", err);
    return absl::OkStatus();
  }

  absl::Status Close() {
    if (::fsync(fd_.get()) != 0) return Error("cannot write", errno);
    if (::close(fd_.release()) != 0) return Error("cannot write", errno);
    return absl::OkStatus();
  }

  absl::Status Commit() {
    if (::rename(name_.c_str(), final_.c_str()) != 0) return Error("cannot replace", errno);
    name_.clear();
    return absl::OkStatus();
  }

  absl::Status Error(const char* what, int err) const {
    return absl::UnavailableError(absl::StrCat(final_, ": ", what, ": ", ErrnoText(err)));
  }

 private:
  std::string final_;
  std::string name_;
  Fd fd_;
};

absl::Status WriteProto(const onnx::ModelProto& model, const std::string& path, TempFile& file) {
  uint64_t size = model.ByteSizeLong();
  if (size > kMaxInlineBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": model is ", size,
                     " bytes inline; protobuf cannot write 2 GiB or more (use external data)"));
  }
  if (absl::Status s = file.Create(); !s.ok()) return s;
  FileOutputStream output(file.fd());
  bool written = false;
  {
    CodedOutputStream coded(&output);
    coded.SetSerializationDeterministic(true);
    written = model.SerializeToCodedStream(&coded) && !coded.HadError();
  }
  if (!output.Flush() || !written) {
    return file.Error("cannot write", output.GetErrno() != 0 ? output.GetErrno() : EIO);
  }
  return file.Close();
}

// Moves data held in typed fields (float_data, ...) to raw_data, which external data requires.
template <typename To, typename From>
void PackRaw(const google::protobuf::RepeatedField<From>& values, TensorProto& tensor) {
  std::string raw(static_cast<size_t>(values.size()) * sizeof(To), '\0');
  for (int i = 0; i < values.size(); ++i) {
    To value = static_cast<To>(values.Get(i));
    std::memcpy(raw.data() + static_cast<size_t>(i) * sizeof(To), &value, sizeof(To));
  }
  tensor.set_raw_data(std::move(raw));
}

bool MoveTypedDataToRaw(TensorProto& tensor) {
  if (tensor.has_raw_data()) return true;
  switch (tensor.data_type()) {
    case TensorProto::FLOAT:
    case TensorProto::COMPLEX64:
      PackRaw<float>(tensor.float_data(), tensor);
      tensor.clear_float_data();
      return true;
    case TensorProto::DOUBLE:
    case TensorProto::COMPLEX128:
      PackRaw<double>(tensor.double_data(), tensor);
      tensor.clear_double_data();
      return true;
    case TensorProto::INT64:
      PackRaw<int64_t>(tensor.int64_data(), tensor);
      tensor.clear_int64_data();
      return true;
    case TensorProto::UINT64:
      PackRaw<uint64_t>(tensor.uint64_data(), tensor);
      tensor.clear_uint64_data();
      return true;
    case TensorProto::UINT32:
      PackRaw<uint32_t>(tensor.uint64_data(), tensor);
      tensor.clear_uint64_data();
      return true;
    case TensorProto::INT32:
      PackRaw<int32_t>(tensor.int32_data(), tensor);
      break;
    case TensorProto::INT8:
    case TensorProto::UINT8:
    case TensorProto::BOOL:
      PackRaw<uint8_t>(tensor.int32_data(), tensor);
      break;
    case TensorProto::INT16:
    case TensorProto::UINT16:
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
      PackRaw<uint16_t>(tensor.int32_data(), tensor);
      break;
    default:
      return false;
  }
  tensor.clear_int32_data();
  return true;
}

// Appends tensors' raw data to the external data file, each at a multiple of kDataAlignment.
class DataFileWriter {
 public:
  DataFileWriter(const std::string& model_path, int64_t min_bytes)
      : file_(model_path + ".data"),
        location_(fs::path(model_path).filename().string() + ".data"),
        min_bytes_(static_cast<uint64_t>(std::max<int64_t>(min_bytes, 0))) {}

  TempFile& file() { return file_; }

  absl::Status Externalize(TensorProto& tensor) {
    std::optional<uint64_t> bytes = DataBytes(tensor);
    if (tensor.data_location() == TensorProto::EXTERNAL || tensor.has_segment() || !bytes ||
        *bytes < min_bytes_ || !MoveTypedDataToRaw(tensor)) {
      return absl::OkStatus();
    }
    if (!file_.created()) {
      if (absl::Status s = file_.Create(); !s.ok()) return s;
    }
    uint64_t offset = (end_ + kDataAlignment - 1) / kDataAlignment * kDataAlignment;
    const std::string padding(offset - end_, '\0');
    if (absl::Status s = file_.Write(padding.data(), padding.size()); !s.ok()) return s;
    const std::string& raw = tensor.raw_data();
    if (absl::Status s = file_.Write(raw.data(), raw.size()); !s.ok()) return s;
    end_ = offset + raw.size();
    AddEntry(tensor, "location", location_);
    AddEntry(tensor, "offset", absl::StrCat(offset));
    AddEntry(tensor, "length", absl::StrCat(raw.size()));
    tensor.set_data_location(TensorProto::EXTERNAL);
    tensor.set_raw_data(std::string());  // frees the copy's buffer, not just its size
    tensor.clear_raw_data();
    return absl::OkStatus();
  }

 private:
  static void AddEntry(TensorProto& tensor, const std::string& key, const std::string& value) {
    onnx::StringStringEntryProto* entry = tensor.add_external_data();
    entry->set_key(key);
    entry->set_value(value);
  }

  TempFile file_;
  std::string location_;
  uint64_t min_bytes_;
  uint64_t end_ = 0;
};

bool WantsExternalData(const onnx::ModelProto& model, const SaveOptions& options) {
  switch (options.external_data) {
    case SaveOptions::ExternalData::kNever:
      return false;
    case SaveOptions::ExternalData::kAlways:
      return true;
    case SaveOptions::ExternalData::kAuto:
      break;
  }
  if (options.input_used_external_data) return true;
  return model.ByteSizeLong() >
         static_cast<uint64_t>(std::max<int64_t>(options.inline_limit_bytes, 0));
}

// Makes the renames durable; the files themselves were fsync'ed already.
void SyncDirectory(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  Fd fd(::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() >= 0) ::fsync(fd.get());
}

// Takes a copy: externalizing rewrites the tensors.
absl::Status SaveWithExternalData(onnx::ModelProto model, const std::string& path,
                                  const SaveOptions& options) {
  DataFileWriter data(path, options.external_min_bytes);
  absl::Status status = TensorWalker([&](TensorProto& tensor, const TensorSite&) {
                          return data.Externalize(tensor);
                        }).Model(model);
  if (!status.ok()) return status;
  if (data.file().created()) {
    if (absl::Status s = data.file().Close(); !s.ok()) return s;
  }
  TempFile model_file(path);
  if (absl::Status s = WriteProto(model, path, model_file); !s.ok()) return s;
  if (data.file().created()) {
    if (absl::Status s = data.file().Commit(); !s.ok()) return s;
  }
  return model_file.Commit();
}

}  // namespace

absl::Status SaveModel(const onnx::ModelProto& model, const std::string& path,
                       const SaveOptions& options) {
  absl::Status status;
  if (WantsExternalData(model, options)) {
    status = SaveWithExternalData(model, path, options);
  } else {
    TempFile file(path);
    status = WriteProto(model, path, file);
    if (status.ok()) status = file.Commit();
  }
  if (!status.ok()) return status;
  SyncDirectory(path);
  return absl::OkStatus();
}

namespace {

fs::path Normalized(const std::string& path) {
  std::error_code error;
  fs::path absolute = fs::absolute(path, error);
  if (error) return fs::path(path).lexically_normal();
  fs::path canonical = fs::weakly_canonical(absolute, error);
  return error ? absolute.lexically_normal() : canonical;
}

}  // namespace

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0) {
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  }
  return Normalized(a) == Normalized(b);
}

}  // namespace ampc
