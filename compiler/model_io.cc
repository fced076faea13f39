#include "compiler/model_io.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/wire_format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "compiler/exit_codes.h"
#include "compiler/external_data.h"
#include "compiler/file_io.h"
#include "compiler/tensor_walker.h"
#include "passes/graph/deferred_data.h"
#include "passes/graph/status_macros.h"

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

constexpr uint64_t kMaxInlineBytes = INT_MAX;  // protobuf's limit on one serialized message
// Protobuf's default recursion limit, stated: it bounds the stack the parse, ONNX's checker and
// inference and every pass that recurses into subgraphs can use.
constexpr int kMaxNesting = 100;

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

// Whether messages nest `limit` or more levels deep (the parse fails there: protobuf's recursion
// limit). Walks the wire format with an explicit stack, never recursing: the files it looks for
// may nest a million levels.
bool NestsAtLeast(int fd, int limit) {
  if (::lseek(fd, 0, SEEK_SET) != 0) return false;
  FileInputStream input(fd);
  CodedInputStream coded(&input);
  coded.SetTotalBytesLimit(INT_MAX);
  std::vector<std::pair<CodedInputStream::Limit, const google::protobuf::Descriptor*>> stack;
  const google::protobuf::Descriptor* descriptor = onnx::ModelProto::descriptor();
  for (;;) {
    const uint32_t tag = coded.ReadTag();
    if (tag == 0) {
      if (stack.empty() || coded.BytesUntilLimit() != 0) return false;
      coded.PopLimit(stack.back().first);
      descriptor = stack.back().second;
      stack.pop_back();
      continue;
    }
    const google::protobuf::FieldDescriptor* field =
        descriptor->FindFieldByNumber(WireFormatLite::GetTagFieldNumber(tag));
    if (field != nullptr && field->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE &&
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      uint32_t length;
      if (!coded.ReadVarint32(&length)) return false;
      if (static_cast<int>(stack.size()) + 1 >= limit) return true;
      stack.emplace_back(coded.PushLimit(static_cast<int>(length)), descriptor);
      descriptor = field->message_type();
      continue;
    }
    if (!WireFormatLite::SkipField(&coded, tag)) return false;
  }
}

absl::Status ParseModel(int fd, uint64_t size, const std::string& path, onnx::ModelProto& model) {
  FileInputStream input(fd);
  bool parsed = false;
  {
    CodedInputStream coded(&input);
    coded.SetTotalBytesLimit(INT_MAX);
    coded.SetRecursionLimit(kMaxNesting);
    parsed = model.ParseFromCodedStream(&coded);
  }
  if (input.GetErrno() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": read error: ", ErrnoText(input.GetErrno())));
  }
  if (parsed) return absl::OkStatus();
  if (NestsAtLeast(fd, kMaxNesting)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        path, ": messages are nested more deeply than ampc reads (", kMaxNesting,
        " nested messages, about ", kMaxNesting / 3, " levels of If or Loop inside one another)"));
  }
  std::string message = absl::StrCat(path, ": not a valid ONNX model (protobuf parse failed)");
  if (LooksTruncated(fd, size)) {
    absl::StrAppend(&message, "; the file may be truncated (its last field runs past the end)");
  }
  return absl::InvalidArgumentError(message);
}

absl::StatusOr<Fd> OpenModelFile(const std::string& path, uint64_t& size) {
  absl::StatusOr<InputFile> file = OpenInputFile(path);
  if (!file.ok()) return file.status();
  size = file->size;
  if (size == 0) return absl::InvalidArgumentError(path + ": is empty, not an ONNX model");
  if (size > kMaxInlineBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": is ", size,
        " bytes; a protobuf model must be under 2 GiB (large weights belong in external data)"));
  }
  return std::move(file->fd);
}

absl::Status TextError(const std::string& path) {
  return absl::InvalidArgumentError(path +
                                    ": is text, not a binary ONNX model; convert it first (Python: "
                                    "onnx.save(onnx.parser.parse_model(text), path))");
}

}  // namespace

absl::StatusOr<LoadedModel> LoadModel(const std::string& path, const LoadOptions& options) {
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
  // Deeply nested protobuf is mostly printable bytes; its own error says more than "is text".
  if (text && !absl::IsResourceExhausted(parsed) && (!parsed.ok() || !loaded.model.has_graph())) {
    return TextError(path);
  }
  if (!parsed.ok()) return parsed;
  if (!loaded.model.has_graph()) {
    return absl::InvalidArgumentError(path + ": not a valid ONNX model (it has no graph)");
  }
  absl::StatusOr<std::vector<std::string>> files =
      ReadExternalData(path, loaded.model, options.defer_min_bytes);
  if (!files.ok()) return files.status();
  loaded.data_files = *std::move(files);
  loaded.used_external_data = !loaded.data_files.empty();
  return loaded;
}

// ---------------------------------------------------------------------------------------------
// Saving.

namespace {

absl::Status WriteProto(const onnx::ModelProto& model, const std::string& path, TempFile& file) {
  uint64_t size = model.ByteSizeLong();  // also caches every message's size for the write below
  if (size > kMaxInlineBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": model is ", size,
                     " bytes inline; protobuf cannot write 2 GiB or more (use external data)"));
  }
  AMPC_RETURN_IF_ERROR(file.Create());
  FileOutputStream output(file.fd());
  bool written = false;
  {
    CodedOutputStream coded(&output);
    coded.SetSerializationDeterministic(true);
    // SerializeToCodedStream would walk the whole model again to size it (0.2 s at 1M nodes).
    model.SerializeWithCachedSizes(&coded);
    written = !coded.HadError();
  }
  if (!output.Flush() || !written) {
    return file.Error("cannot write", output.GetErrno() != 0 ? output.GetErrno() : EIO);
  }
  return file.Close();
}

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

// Whether a save must leave the file at `path` alone: the input's data, or any other file the
// run reads or names (IsRunFile).
bool Kept(const std::string& path, const SaveOptions& options) {
  return IsRunFile(path) ||
         std::any_of(options.keep.begin(), options.keep.end(),
                     [&](const std::string& kept) { return SameFile(kept, path); });
}

// Whether the file at `path` contains `needle` (read in chunks; false when it cannot be read or
// is not a regular file: a destination that links to a FIFO must not block the save).
bool FileContains(const std::string& path, const std::string& needle) {
  absl::StatusOr<InputFile> file = OpenInputFile(path);
  if (!file.ok()) return false;
  const Fd fd = std::move(file->fd);
  std::string window;
  std::string chunk(1 << 20, '\0');
  for (;;) {
    const ssize_t n = ::read(fd.get(), chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    window.append(chunk.data(), static_cast<size_t>(n));
    if (absl::StrContains(window, needle)) return true;
    window.erase(0, window.size() - std::min(window.size(), needle.size() - 1));
  }
}

// The external data file names a save to `target` takes turns between; the third only when the
// input reads one of the first two.
std::array<std::string, 3> DataNames(const fs::path& target) {
  const std::string name = target.filename().string();
  return {name + ".data", name + ".alt.data", name + ".alt2.data"};
}

// Removes the data files of DataNames(target) but `in_use` ("" for none) that the input does not
// keep: what earlier saves left and the model now in place does not read.
void RemoveUnusedDataFiles(const fs::path& target, const std::string& in_use,
                           const SaveOptions& options) {
  for (const std::string& previous : DataNames(target)) {
    const fs::path old_data = target.parent_path() / previous;
    if (previous == in_use || Kept(old_data.string(), options)) continue;
    ::unlink(old_data.c_str());
    RemoveStaleTempFiles(old_data.string());
  }
}

// Takes a copy: externalizing rewrites the tensors. Two files cannot be renamed into place at
// once, so the data never goes to a file the model now at `path` reads. Whenever a save is
// killed, the model in place is complete and so is the data it reads; the data files it no
// longer reads are removed last.
absl::StatusOr<std::string> ChooseDataName(const std::string& path, const SaveOptions& options) {
  const fs::path target(path);
  const std::array<std::string, 3> names = DataNames(target);
  const auto chosen = std::find_if(names.begin(), names.end(), [&](const std::string& data) {
    return !FileContains(path, data) && !Kept((target.parent_path() / data).string(), options);
  });
  if (chosen == names.end()) {
    return absl::UnavailableError(absl::StrCat(
        path, ": cannot write external data: ", target.filename().string(),
        ".data, .alt.data and .alt2.data are all read, by the model in place or by this run"));
  }
  return *chosen;
}

absl::Status SaveWithExternalData(onnx::ModelProto model, const std::string& path,
                                  const SaveOptions& options) {
  const fs::path target(path);
  std::unique_ptr<ExternalDataWriter> own;
  ExternalDataWriter* data = options.data;
  if (data == nullptr) {
    AMPC_ASSIGN_OR_RETURN(own, OpenOutputData(path, options));
    data = own.get();
  }
  const std::string data_name = data->data_name();
  AMPC_RETURN_IF_ERROR(data->Externalize(model));
  TempFile model_file(path);
  AMPC_RETURN_IF_ERROR(WriteProto(model, path, model_file));
  AMPC_RETURN_IF_ERROR(data->Commit());
  AMPC_RETURN_IF_ERROR(model_file.Commit());
  SyncDirectory(path);
  FaultPoint("before-cleanup");
  RemoveUnusedDataFiles(target, data_name, options);
  RemoveStaleTempFiles((target.parent_path() / data_name).string());
  return absl::OkStatus();
}

bool HoldsDeferred(const onnx::ModelProto& model) {
  bool found = false;
  // The visit only reads: VisitTensors takes the model mutable for the callers that rewrite.
  VisitTensors(const_cast<onnx::ModelProto&>(model), [&](TensorProto& tensor, const TensorSite&) {
    found = found || IsDeferred(tensor);
    return absl::OkStatus();
  }).IgnoreError();
  return found;
}

// --external-data=never of a model whose data stayed in its files: read back into the copy.
absl::Status SaveInlineReadingDeferred(onnx::ModelProto model, const std::string& path,
                                       const SaveOptions& options) {
  AMPC_RETURN_IF_ERROR(VisitTensors(model, [](TensorProto& tensor, const TensorSite&) {
    if (!IsDeferred(tensor)) return absl::OkStatus();
    std::string raw;
    AMPC_RETURN_IF_ERROR(
        ForEachChunk(tensor, kDeferredChunkBytes, [&](const char* data, uint64_t size) {
          raw.append(data, size);
          return absl::OkStatus();
        }));
    tensor.clear_external_data();
    tensor.clear_data_location();
    tensor.set_raw_data(std::move(raw));
    return absl::OkStatus();
  }));
  TempFile file(path);
  AMPC_RETURN_IF_ERROR(WriteProto(model, path, file));
  AMPC_RETURN_IF_ERROR(file.Commit());
  RemoveUnusedDataFiles(fs::path(path), "", options);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExternalDataWriter>> OpenOutputData(const std::string& path,
                                                                   const SaveOptions& options) {
  AMPC_ASSIGN_OR_RETURN(const std::string data_name, ChooseDataName(path, options));
  return std::make_unique<ExternalDataWriter>(path, data_name, options.external_min_bytes);
}

absl::Status SaveModel(const onnx::ModelProto& model, const std::string& path,
                       const SaveOptions& options) {
  if (IsRunFile(path)) {
    return UsageError(absl::StrCat(path,
                                   ": cannot write: this run reads it or writes it as "
                                   "another output; ampc never replaces those"));
  }
  if (Kept(path, options)) {
    return absl::UnavailableError(
        absl::StrCat(path, ": cannot write: the input model reads its external data from it"));
  }
  absl::Status status;
  const bool deferred = HoldsDeferred(model);
  if (options.data != nullptr || WantsExternalData(model, options) ||
      (deferred && options.external_data != SaveOptions::ExternalData::kNever)) {
    status = SaveWithExternalData(model, path, options);
  } else if (deferred) {
    status = SaveInlineReadingDeferred(model, path, options);
  } else {
    TempFile file(path);
    status = WriteProto(model, path, file);
    if (status.ok()) status = file.Commit();
    if (status.ok()) RemoveUnusedDataFiles(fs::path(path), "", options);  // an earlier save's
  }
  if (!status.ok()) return status;
  SyncDirectory(path);
  RemoveStaleTempFiles(path);
  return absl::OkStatus();
}

std::vector<std::string> FilesASaveMayWrite(const std::string& path,
                                            std::vector<std::string> also) {
  also.push_back(path);
  for (const std::string& data : DataNames(fs::path(path))) {
    also.push_back((fs::path(path).parent_path() / data).string());
  }
  return also;
}

absl::Status CheckSaveDestination(const std::string& path) {
  AMPC_RETURN_IF_ERROR(CheckWritable(path));
  const std::array<std::string, 3> names = DataNames(fs::path(path));
  for (const std::string& data : {names[0], names[1]}) {  // the third only when these are read
    if (absl::Status s = CheckReplaceable((fs::path(path).parent_path() / data).string());
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> DataFilesItReads(const std::string& model, const std::string& target) {
  auto folder = [](const std::string& path) {
    const fs::path parent = fs::path(path).parent_path();
    return parent.empty() ? std::string(".") : parent.string();
  };
  std::vector<std::string> files;
  if (!SameFile(folder(model), folder(target))) return files;  // locations are model-relative
  for (const std::string& data : DataNames(fs::path(target))) {
    if (FileContains(model, data)) files.push_back((fs::path(folder(target)) / data).string());
  }
  return files;
}

void NoteInputs(const std::string& path, const LoadedModel& loaded) {
  NoteInputFile(path);
  for (const std::string& data : loaded.data_files) NoteInputFile(data);
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