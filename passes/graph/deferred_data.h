// Tensor data a compile leaves in files instead of memory (docs/architecture.md, "Large
// models"): the weights of a model with external data are read, converted and written one chunk
// at a time, so a compile's memory does not grow with them.
//
// A deferred tensor is EXTERNAL with location kDeferredLocation (ONNX's checker takes a location
// starting with '#' for data held elsewhere and looks for no file) and the entries offset,
// length and kDeferredFileKey: the index of a file registered here, or kSinkFile for the output
// data the compile is writing. The registry is process-wide: the loader fills it, the passes
// read through it, the save resolves it.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ampc {

inline constexpr char kDeferredLocation[] = "#ampc";
inline constexpr char kDeferredFileKey[] = "ampc.file";
inline constexpr int kSinkFile = -1;
// The chunk every reader of deferred data takes at a time: what a compile holds of one weight.
inline constexpr uint64_t kDeferredChunkBytes = uint64_t{8} << 20;

// Where the data of tensors made during a compile goes: the output's external data file.
class DeferredSink {
 public:
  virtual ~DeferredSink() = default;
  // Starts a tensor of `bytes` bytes; returns its offset in the file.
  virtual absl::StatusOr<uint64_t> Begin(uint64_t bytes) = 0;
  virtual absl::Status Write(const char* data, uint64_t size) = 0;
};

struct DeferredSpan {
  int file = 0;  // an index AddDeferredFile returned, or kSinkFile
  uint64_t offset = 0;
  uint64_t length = 0;
};

// Registers `fd` (owned from now on, open until the process exits) holding data read as `path`;
// returns the index deferred tensors name it by.
int AddDeferredFile(int fd, std::string path);
// The sink tensors converted during the compile go to; null (the default) keeps them in memory.
void SetDeferredSink(DeferredSink* sink);
DeferredSink* DeferredSinkOrNull();

// Sets the sink for its lifetime (null: none).
class DeferredSinkScope {
 public:
  explicit DeferredSinkScope(DeferredSink* sink) { SetDeferredSink(sink); }
  ~DeferredSinkScope() { SetDeferredSink(nullptr); }
  DeferredSinkScope(const DeferredSinkScope&) = delete;
  DeferredSinkScope& operator=(const DeferredSinkScope&) = delete;
};

// What the compile has written of its deferred tensors (converted or copied to the output),
// counted in bytes of their input data: the progress a long compile shows.
struct DeferredProgress {
  uint64_t tensors = 0;
  uint64_t bytes = 0;
};
void AddDeferredProgress(uint64_t tensors, uint64_t bytes);
DeferredProgress DeferredProgressSoFar();

bool IsDeferred(const onnx::TensorProto& tensor);
// Where a deferred tensor's data lies (IsDeferred must hold).
DeferredSpan SpanOf(const onnx::TensorProto& tensor);
// Makes `tensor` (dims and data type set, no data) deferred at `span`.
void MakeDeferred(onnx::TensorProto& tensor, const DeferredSpan& span);

using ChunkFn = std::function<absl::Status(const char* data, uint64_t size)>;
// Calls `fn` on the tensor's data as raw_data holds it, in order, in chunks of at most
// `chunk_bytes` (a multiple of the element size) for deferred data and at once otherwise.
// Deferred data in the sink cannot be read back (FailedPrecondition).
absl::Status ForEachChunk(const onnx::TensorProto& tensor, uint64_t chunk_bytes, const ChunkFn& fn);

// Appends the tensor's deferred data (not in the sink) to `out_fd` at its file position, copied
// by the kernel (copy_file_range: no pass through this process's memory; a reflink where the file
// system shares extents), calling progress(bytes) as it goes. False, with nothing written, where
// the system cannot copy between these files; the caller then copies through ForEachChunk.
absl::StatusOr<bool> CopyDeferredData(const onnx::TensorProto& tensor, int out_fd,
                                      const std::function<void(uint64_t)>& progress);

}  // namespace ampc
