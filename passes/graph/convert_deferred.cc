#include "passes/graph/convert_deferred.h"

#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "passes/graph/deferred_data.h"
#include "passes/graph/status_macros.h"
#include "passes/graph/tensor_data.h"

namespace ampc {

absl::StatusOr<onnx::TensorProto> ConvertDeferred(const onnx::TensorProto& tensor, int to,
                                                  bool clamp, ConversionStats& stats) {
  const int from = tensor.data_type();
  const uint64_t from_size = ElementSize(from).value_or(0);
  const uint64_t to_size = ElementSize(to).value_or(0);
  if (from_size == 0 || to_size == 0) {
    return absl::InternalError(
        absl::StrCat("ConvertDeferred: ", tensor.name(), ": not a float conversion"));
  }
  onnx::TensorProto out;
  out.mutable_dims()->CopyFrom(tensor.dims());
  out.set_data_type(to);
  DeferredSink* sink = DeferredSinkOrNull();
  DeferredSpan span{kSinkFile, 0, SpanOf(tensor).length / from_size * to_size};
  if (sink != nullptr) {
    AMPC_ASSIGN_OR_RETURN(span.offset, sink->Begin(span.length));
  }
  // Without a sink the result is built in place; with one, a chunk's worth, kept by the thread
  // from tensor to tensor and never cleared (each chunk overwrites what it writes out).
  thread_local std::unique_ptr<char[]> chunk;
  thread_local uint64_t chunk_capacity = 0;
  std::string converted;
  uint64_t written = 0;
  if (sink == nullptr) converted.resize(span.length);
  const int threads = std::thread::hardware_concurrency() >= 2 ? 2 : 1;
  AMPC_RETURN_IF_ERROR(ForEachChunk(
      tensor, kDeferredChunkBytes, [&](const char* data, uint64_t size) -> absl::Status {
        const uint64_t n = size / from_size;
        if (sink != nullptr && chunk_capacity < n * to_size) {
          chunk.reset(new char[n * to_size]);
          chunk_capacity = n * to_size;
        }
        char* dst = sink != nullptr ? chunk.get() : converted.data() + written;
        if (!ConvertFloatsParallel(data, from, dst, to, n, clamp, stats, threads)) {
          return absl::InternalError(
              absl::StrCat("ConvertDeferred: ", tensor.name(), ": not a float conversion"));
        }
        written += n * to_size;
        AddDeferredProgress(0, size);
        return sink == nullptr ? absl::OkStatus() : sink->Write(dst, n * to_size);
      }));
  AddDeferredProgress(1, 0);
  if (sink == nullptr) {
    out.set_raw_data(std::move(converted));
  } else {
    MakeDeferred(out, span);
  }
  return out;
}

}  // namespace ampc
