#include "passes/graph/deferred_data.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "passes/graph/status_macros.h"
#include "passes/graph/tensor_data.h"

namespace ampc {
namespace {

struct Registry {
  std::mutex mutex;
  std::vector<std::pair<int, std::string>> files;  // (fd, path)
  DeferredSink* sink = nullptr;
};

std::atomic<uint64_t> progress_tensors{0};
std::atomic<uint64_t> progress_bytes{0};

Registry& Files() {
  static Registry* registry = new Registry;  // never freed: its files stay open until exit
  return *registry;
}

const std::string* Entry(const onnx::TensorProto& tensor, const char* key) {
  for (const onnx::StringStringEntryProto& entry : tensor.external_data()) {
    if (entry.key() == key) return &entry.value();
  }
  return nullptr;
}

uint64_t Number(const std::string* text) {
  uint64_t value = 0;
  if (text != nullptr && !absl::SimpleAtoi(*text, &value)) value = 0;
  return value;
}

void Add(onnx::TensorProto& tensor, const char* key, const std::string& value) {
  onnx::StringStringEntryProto* entry = tensor.add_external_data();
  entry->set_key(key);
  entry->set_value(value);
}

// The registered (fd, path) a deferred tensor's data lies in; the sink cannot be read back.
absl::StatusOr<std::pair<int, std::string>> FileOf(const onnx::TensorProto& tensor,
                                                   const DeferredSpan& span) {
  if (span.file == kSinkFile) {
    return absl::FailedPreconditionError(absl::StrCat(
        "tensor '", tensor.name(), "': its data was written to the output and is not read back"));
  }
  Registry& registry = Files();
  std::lock_guard<std::mutex> lock(registry.mutex);
  if (span.file < 0 || span.file >= static_cast<int>(registry.files.size())) {
    return absl::InternalError(
        absl::StrCat("tensor '", tensor.name(), "': no data file ", span.file, " is registered"));
  }
  return registry.files[span.file];
}

absl::Status EndedEarly(const std::string& path, const onnx::TensorProto& tensor, int err) {
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": tensor '", tensor.name(),
      "': ", err == 0 ? "the file ended before its data (did it shrink?)" : std::strerror(err)));
}

// A chunk buffer kept by each thread from tensor to tensor, uninitialised: a fresh 8 MiB buffer
// per tensor cost page faults and zeroing on the order of reading the data itself. A read inside
// a read (not done today) gets a buffer of its own.
class ChunkBuffer {
 public:
  explicit ChunkBuffer(uint64_t size) {
    if (state_.in_use) {
      own_.reset(new char[size]);
      data_ = own_.get();
      return;
    }
    if (state_.capacity < size) {
      state_.buffer.reset(new char[size]);
      state_.capacity = size;
    }
    state_.in_use = true;
    data_ = state_.buffer.get();
  }
  ~ChunkBuffer() {
    if (own_ == nullptr) state_.in_use = false;
  }
  ChunkBuffer(const ChunkBuffer&) = delete;
  ChunkBuffer& operator=(const ChunkBuffer&) = delete;
  char* data() const { return data_; }

 private:
  struct State {
    std::unique_ptr<char[]> buffer;
    uint64_t capacity = 0;
    bool in_use = false;
  };
  static thread_local State state_;
  std::unique_ptr<char[]> own_;
  char* data_ = nullptr;
};
thread_local ChunkBuffer::State ChunkBuffer::state_;

absl::Status ReadChunks(const onnx::TensorProto& tensor, uint64_t chunk_bytes, const ChunkFn& fn) {
  const DeferredSpan span = SpanOf(tensor);
  AMPC_ASSIGN_OR_RETURN(const auto file, FileOf(tensor, span));
  const uint64_t element = std::max<uint64_t>(ElementSize(tensor.data_type()).value_or(1), 1);
  chunk_bytes = std::max(chunk_bytes / element, uint64_t{1}) * element;
  const uint64_t size = std::min(chunk_bytes, span.length);
  const ChunkBuffer buffer(size);
  for (uint64_t done = 0; done < span.length;) {
    const uint64_t want = std::min<uint64_t>(size, span.length - done);
    for (uint64_t have = 0; have < want;) {  // pread may return less than asked
      const ssize_t got =
          ::pread(file.first, buffer.data() + have, want - have, span.offset + done + have);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return EndedEarly(file.second, tensor, got == 0 ? 0 : errno);
      have += static_cast<uint64_t>(got);
    }
    absl::Status status = fn(buffer.data(), want);
    if (!status.ok()) return status;
    done += want;
  }
  return absl::OkStatus();
}

}  // namespace

int AddDeferredFile(int fd, std::string path) {
  Registry& registry = Files();
  std::lock_guard<std::mutex> lock(registry.mutex);
  registry.files.emplace_back(fd, std::move(path));
  return static_cast<int>(registry.files.size()) - 1;
}

void SetDeferredSink(DeferredSink* sink) { Files().sink = sink; }

DeferredSink* DeferredSinkOrNull() { return Files().sink; }

void AddDeferredProgress(uint64_t tensors, uint64_t bytes) {
  progress_tensors.fetch_add(tensors, std::memory_order_relaxed);
  progress_bytes.fetch_add(bytes, std::memory_order_relaxed);
}

DeferredProgress DeferredProgressSoFar() {
  return {progress_tensors.load(std::memory_order_relaxed),
          progress_bytes.load(std::memory_order_relaxed)};
}

bool IsDeferred(const onnx::TensorProto& tensor) {
  if (tensor.data_location() != onnx::TensorProto::EXTERNAL) return false;
  const std::string* location = Entry(tensor, "location");
  return location != nullptr && *location == kDeferredLocation;
}

DeferredSpan SpanOf(const onnx::TensorProto& tensor) {
  const std::string* file = Entry(tensor, kDeferredFileKey);
  int index = 0;
  if (file == nullptr || !absl::SimpleAtoi(*file, &index)) index = kSinkFile;
  return {index, Number(Entry(tensor, "offset")), Number(Entry(tensor, "length"))};
}

void MakeDeferred(onnx::TensorProto& tensor, const DeferredSpan& span) {
  tensor.clear_raw_data();
  tensor.clear_external_data();
  tensor.set_data_location(onnx::TensorProto::EXTERNAL);
  Add(tensor, "location", kDeferredLocation);
  Add(tensor, "offset", absl::StrCat(span.offset));
  Add(tensor, "length", absl::StrCat(span.length));
  Add(tensor, kDeferredFileKey, absl::StrCat(span.file));
}

absl::StatusOr<bool> CopyDeferredData(const onnx::TensorProto& tensor, int out_fd,
                                      const std::function<void(uint64_t)>& progress) {
  const DeferredSpan span = SpanOf(tensor);
  AMPC_ASSIGN_OR_RETURN(const auto file, FileOf(tensor, span));
  loff_t in = static_cast<loff_t>(span.offset);
  for (uint64_t done = 0; done < span.length;) {
    const size_t want = static_cast<size_t>(std::min(span.length - done, kDeferredChunkBytes));
    const ssize_t got = ::copy_file_range(file.first, &in, out_fd, nullptr, want, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && done == 0 &&
        (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP ||
         errno == EBADF)) {
      return false;  // nothing written: the caller copies through user space
    }
    if (got == 0) return EndedEarly(file.second, tensor, 0);
    if (got < 0) {  // the input's side or the output's (a full disk)
      return absl::InvalidArgumentError(absl::StrCat("tensor '", tensor.name(),
                                                     "': copying its data from ", file.second,
                                                     " to the output: ", std::strerror(errno)));
    }
    done += static_cast<uint64_t>(got);
    progress(static_cast<uint64_t>(got));
  }
  return true;
}

absl::Status ForEachChunk(const onnx::TensorProto& tensor, uint64_t chunk_bytes,
                          const ChunkFn& fn) {
  if (IsDeferred(tensor)) return ReadChunks(tensor, chunk_bytes, fn);
  if (!tensor.raw_data().empty()) return fn(tensor.raw_data().data(), tensor.raw_data().size());
  const std::string bytes = RawBytes(tensor);
  return fn(bytes.data(), bytes.size());
}

}  // namespace ampc
