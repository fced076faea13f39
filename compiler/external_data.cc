#include "compiler/external_data.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "compiler/tensor_walker.h"
#include "passes/tensor_data.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;
using onnx::TensorProto;

constexpr uint64_t kDataAlignment = 4096;  // page size: a runtime can mmap each tensor

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

  const std::vector<std::string>& files() const { return paths_; }

  absl::Status Read(TensorProto& tensor, const TensorSite& site) {
    if (tensor.data_location() != TensorProto::EXTERNAL) return absl::OkStatus();
    std::string prefix = absl::StrCat(model_path_, ": ", DescribeTensor(tensor, site), ": ");
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
    paths_.push_back(full);
    OpenFile& file = files_[location];
    file.fd = std::move(fd);
    file.size = static_cast<uint64_t>(st.st_size);
    return &file;
  }

  std::string model_path_;
  fs::path dir_;
  std::map<std::string, OpenFile> files_;
  std::vector<std::string> paths_;  // of files_, in the order first read
};

void AddEntry(TensorProto& tensor, const std::string& key, const std::string& value) {
  onnx::StringStringEntryProto* entry = tensor.add_external_data();
  entry->set_key(key);
  entry->set_value(value);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ReadExternalData(const std::string& model_path,
                                                          onnx::ModelProto& model) {
  ExternalDataReader reader(model_path);
  absl::Status read = VisitTensors(model, [&](TensorProto& tensor, const TensorSite& site) {
    return reader.Read(tensor, site);
  });
  if (!read.ok()) return read;
  return reader.files();
}

ExternalDataWriter::ExternalDataWriter(const std::string& model_path, const std::string& data_name,
                                       int64_t min_bytes)
    : file_((fs::path(model_path).parent_path() / data_name).string()),
      location_(data_name),
      min_bytes_(static_cast<uint64_t>(std::max<int64_t>(min_bytes, 0))) {}

absl::Status ExternalDataWriter::Externalize(onnx::ModelProto& model) {
  absl::Status status = VisitTensors(
      model, [&](TensorProto& tensor, const TensorSite&) { return ExternalizeTensor(tensor); });
  if (!status.ok() || !file_.created()) return status;
  return file_.Close();
}

absl::Status ExternalDataWriter::Commit() {
  return file_.created() ? file_.Commit() : absl::OkStatus();
}

absl::Status ExternalDataWriter::ExternalizeTensor(TensorProto& tensor) {
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

}  // namespace ampc
