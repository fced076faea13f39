#include "compiler/external_data.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "compiler/tensor_walker.h"
#include "passes/graph/deferred_data.h"
#include "passes/graph/status_macros.h"
#include "passes/graph/tensor_data.h"

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

// The real path (symlinks resolved) of the file open at `fd`; empty when it cannot be told.
fs::path RealPathOf(int fd) {
  std::error_code error;
  fs::path real = fs::read_symlink(absl::StrCat("/proc/self/fd/", fd), error);
  return error ? fs::path() : real;
}

fs::path RealPath(const fs::path& path) {
  std::error_code error;
  fs::path real = fs::canonical(path.empty() ? fs::path(".") : path, error);
  return error ? fs::path() : real;
}

// Whether the canonical path `file` lies under the canonical folder `root`.
bool Within(const fs::path& file, const fs::path& root) {
  if (file.empty() || root.empty()) return false;
  auto [root_end, file_it] = std::mismatch(root.begin(), root.end(), file.begin(), file.end());
  return root_end == root.end() && file_it != file.end();
}

class ExternalDataReader {
 public:
  explicit ExternalDataReader(const std::string& model_path) : model_path_(model_path) {
    dir_ = fs::path(model_path).parent_path();
    // Data may lie after symlinks in the model's folder as given, or in the folder of the model
    // file's own real path (a hub cache links snapshots/x/model.onnx to ../../blobs/...).
    roots_ = {RealPath(dir_), RealPath(fs::path(model_path)).parent_path()};
  }

  const std::vector<std::string>& files() const { return paths_; }

  // Two tensors read from the same bytes are a malformed file (or a way to make a small model
  // write a huge output): refused, naming both.
  absl::Status CheckOverlaps() {
    for (auto& [real, ranges] : ranges_) {
      std::sort(ranges.begin(), ranges.end(),
                [](const Range& a, const Range& b) { return a.offset < b.offset; });
      for (size_t i = 1; i < ranges.size(); ++i) {
        const Range &before = ranges[i - 1], &range = ranges[i];
        if (range.offset >= before.end) continue;
        return absl::InvalidArgumentError(absl::StrCat(
            model_path_, ": ", range.tensor, ": external data bytes ", range.offset, "..",
            range.end, " of '", real.filename().string(), "' overlap those of ", before.tensor,
            " (bytes ", before.offset, "..", before.end, "); each tensor needs bytes of its own"));
      }
    }
    return absl::OkStatus();
  }

  // Checks where the tensor's data lies (file, bounds) and records its byte range.
  absl::Status Plan(const TensorProto& tensor, const TensorSite& site) {
    if (tensor.data_location() != TensorProto::EXTERNAL) return absl::OkStatus();
    absl::StatusOr<Located> found = Find(tensor, site);
    if (!found.ok()) return found.status();
    if (found->span.length > 0) {
      ranges_[found->file->real].push_back({found->span.offset,
                                            found->span.offset + found->span.length,
                                            DescribeTensor(tensor, site)});
    }
    return absl::OkStatus();
  }

  // Reads the data of a tensor Plan accepted into raw_data, or defers it (deferred_data.h) when
  // it has at least `defer_min_bytes` (0: never).
  absl::Status Read(TensorProto& tensor, const TensorSite& site, uint64_t defer_min_bytes) {
    if (tensor.data_location() != TensorProto::EXTERNAL) return absl::OkStatus();
    absl::StatusOr<Located> found = Find(tensor, site);
    if (!found.ok()) return found.status();
    if (defer_min_bytes > 0 && found->span.length >= defer_min_bytes &&
        tensor.data_type() != TensorProto::STRING) {
      return Defer(tensor, *found);
    }
    std::string* raw = tensor.mutable_raw_data();
    raw->resize(found->span.length);
    if (int err =
            ReadAt(found->file->fd.get(), raw->data(), found->span.length, found->span.offset);
        err != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(found->prefix, ": read error: ", ErrnoText(err)));
    }
    tensor.clear_external_data();
    tensor.clear_data_location();
    return absl::OkStatus();
  }

 private:
  struct OpenFile {
    Fd fd;
    uint64_t size = 0;
    fs::path real;
  };

  struct Range {
    uint64_t offset, end;
    std::string tensor;  // DescribeTensor's words
  };

  absl::StatusOr<const OpenFile*> Open(const std::string& location, const std::string& prefix) {
    auto it = files_.find(location);
    if (it != files_.end()) return &it->second;
    std::string full = (dir_ / location).string();
    absl::StatusOr<InputFile> opened = OpenInputFile(full);
    if (absl::IsNotFound(opened.status())) return absl::NotFoundError(prefix + ": file not found");
    if (!opened.ok()) {  // its message starts with `full`, which `prefix` names already
      const std::string message(opened.status().message());
      return absl::InvalidArgumentError(absl::StrCat(prefix, message.substr(full.size())));
    }
    Fd fd = std::move(opened->fd);
    fs::path real = RealPathOf(fd.get());
    if (real.empty()) real = RealPath(full);  // no /proc
    if (!Within(real, roots_[0]) && !Within(real, roots_[1])) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, ": a symlink leads to ", real.empty() ? "an unknown place" : real.string(),
          ", outside the model's folder; ampc reads external data only from there"));
    }
    paths_.push_back(full);
    OpenFile& file = files_[location];
    file.fd = std::move(fd);
    file.size = opened->size;
    file.real = real;
    return &file;
  }

  struct Located {
    std::string prefix;  // "MODEL: TENSOR: external data 'LOCATION'"
    ExternalSpan span;
    const OpenFile* file = nullptr;
  };

  absl::StatusOr<Located> Find(const TensorProto& tensor, const TensorSite& site) {
    Located found;
    found.prefix = absl::StrCat(model_path_, ": ", DescribeTensor(tensor, site), ": ");
    absl::StatusOr<ExternalSpan> span = Locate(tensor, found.prefix);
    if (!span.ok()) return span.status();
    found.span = *std::move(span);
    absl::StatusOr<const OpenFile*> file = Open(found.span.location, found.prefix);
    if (!file.ok()) return file.status();
    found.file = *file;
    const uint64_t size = found.file->size;
    if (found.span.offset > size || found.span.length > size - found.span.offset) {
      return absl::InvalidArgumentError(
          absl::StrCat(found.prefix, ": file is ", size, " bytes, too short for offset ",
                       found.span.offset, " + length ", found.span.length));
    }
    return found;
  }

  absl::Status Defer(TensorProto& tensor, const Located& found) {
    auto [it, added] = deferred_files_.try_emplace(found.span.location, 0);
    if (added) {
      const int fd = ::dup(found.file->fd.get());
      if (fd < 0) {
        return absl::InvalidArgumentError(absl::StrCat(found.prefix, ": ", ErrnoText(errno)));
      }
      it->second = AddDeferredFile(fd, (dir_ / found.span.location).string());
    }
    MakeDeferred(tensor, {it->second, found.span.offset, found.span.length});
    return absl::OkStatus();
  }

  std::string model_path_;
  std::map<std::string, int> deferred_files_;  // location -> AddDeferredFile's index
  fs::path dir_;
  std::array<fs::path, 2> roots_;
  std::map<std::string, OpenFile> files_;
  std::vector<std::string> paths_;                 // of files_, in the order first read
  std::map<fs::path, std::vector<Range>> ranges_;  // by real path
};

void AddEntry(TensorProto& tensor, const std::string& key, const std::string& value) {
  onnx::StringStringEntryProto* entry = tensor.add_external_data();
  entry->set_key(key);
  entry->set_value(value);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ReadExternalData(const std::string& model_path,
                                                          onnx::ModelProto& model,
                                                          uint64_t defer_min_bytes) {
  ExternalDataReader reader(model_path);
  // Every location and range is checked before any data is read.
  absl::Status planned = VisitTensors(model, [&](TensorProto& tensor, const TensorSite& site) {
    return reader.Plan(tensor, site);
  });
  if (!planned.ok()) return planned;
  AMPC_RETURN_IF_ERROR(reader.CheckOverlaps());
  absl::Status read = VisitTensors(model, [&](TensorProto& tensor, const TensorSite& site) {
    return reader.Read(tensor, site, defer_min_bytes);
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

absl::StatusOr<uint64_t> ExternalDataWriter::Begin(uint64_t bytes) {
  if (!file_.created()) {
    AMPC_RETURN_IF_ERROR(file_.Create());
  }
  const uint64_t offset = (end_ + kDataAlignment - 1) / kDataAlignment * kDataAlignment;
  const std::string padding(offset - end_, '\0');
  AMPC_RETURN_IF_ERROR(file_.Write(padding.data(), padding.size()));
  end_ = offset + bytes;
  return offset;
}

absl::Status ExternalDataWriter::Write(const char* data, uint64_t size) {
  return file_.Write(data, size);
}

void ExternalDataWriter::PointAt(TensorProto& tensor, uint64_t offset, uint64_t length) const {
  tensor.clear_external_data();
  AddEntry(tensor, "location", location_);
  AddEntry(tensor, "offset", absl::StrCat(offset));
  AddEntry(tensor, "length", absl::StrCat(length));
  tensor.set_data_location(TensorProto::EXTERNAL);
}

// A deferred tensor in this file already is pointed at; one in an input's data is copied here.
absl::Status ExternalDataWriter::PlaceDeferred(TensorProto& tensor) {
  const DeferredSpan span = SpanOf(tensor);
  if (span.file == kSinkFile) {
    PointAt(tensor, span.offset, span.length);
    return absl::OkStatus();
  }
  AMPC_ASSIGN_OR_RETURN(const uint64_t offset, Begin(span.length));
  AMPC_ASSIGN_OR_RETURN(const bool copied, CopyDeferredData(tensor, file_.fd(), [](uint64_t bytes) {
                          AddDeferredProgress(0, bytes);
                        }));
  if (!copied) {
    AMPC_RETURN_IF_ERROR(
        ForEachChunk(tensor, kDeferredChunkBytes, [&](const char* data, uint64_t size) {
          AddDeferredProgress(0, size);
          return Write(data, size);
        }));
  }
  AddDeferredProgress(1, 0);
  PointAt(tensor, offset, span.length);
  return absl::OkStatus();
}

absl::Status ExternalDataWriter::ExternalizeTensor(TensorProto& tensor) {
  if (IsDeferred(tensor)) return PlaceDeferred(tensor);
  std::optional<uint64_t> bytes = DataBytes(tensor);
  if (tensor.data_location() == TensorProto::EXTERNAL || tensor.has_segment() || !bytes ||
      *bytes < min_bytes_ || !MoveTypedDataToRaw(tensor)) {
    return absl::OkStatus();
  }
  const std::string& raw = tensor.raw_data();
  AMPC_ASSIGN_OR_RETURN(const uint64_t offset, Begin(raw.size()));
  AMPC_RETURN_IF_ERROR(Write(raw.data(), raw.size()));
  PointAt(tensor, offset, raw.size());
  tensor.set_raw_data(std::string());  // frees the copy's buffer, not just its size
  tensor.clear_raw_data();
  return absl::OkStatus();
}

}  // namespace ampc
