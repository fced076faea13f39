#include "runtime/core/cuda_backend.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/cuda_device.h"

namespace ampc {

absl::Status CudaBackend::Check(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": CUDA error ", static_cast<int>(error), " (",
                                          cudaGetErrorString(error), ")"));
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(int device) {
  const int count = CudaDeviceCount();
  if (device < 0 || device >= count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no CUDA device ", device, " (", count, " usable GPU", count == 1 ? "" : "s", " found)"));
  }
  if (absl::Status s = Check(cudaSetDevice(device), "cudaSetDevice"); !s.ok()) return s;
  cudaStream_t stream = nullptr;
  if (absl::Status s = Check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                             "cudaStreamCreateWithFlags");
      !s.ok()) {
    return s;
  }
  return std::unique_ptr<CudaBackend>(new CudaBackend(device, stream));
}

CudaBackend::~CudaBackend() {
  AbortCapture();
  cudaStreamSynchronize(stream_);
  shared_.clear();
  for (void* data : cache_.Drain()) cudaFree(data);
  if (void* arena = cache_.SetArena(nullptr, 0)) cudaFree(arena);
  if (pinned_ != nullptr) cudaFreeHost(pinned_);
  for (Staging& slot : staging_) {
    if (slot.data != nullptr) cudaFreeHost(slot.data);
    if (slot.copied != nullptr) cudaEventDestroy(slot.copied);
  }
  cudaStreamDestroy(stream_);
}

absl::StatusOr<std::shared_ptr<Buffer>> CudaBackend::Allocate(size_t bytes) {
  const size_t capacity = BufferCache::Capacity(bytes);
  // A capture keeps its own memory (the pool), never a plan's arena.
  void* data = cache_.Take(capacity, /*planned=*/!capturing_);
  if (data == nullptr) {
    if (cudaMalloc(&data, capacity) != cudaSuccess) {
      cudaGetLastError();
      cache_.Refused(capacity);
      const MemoryStats stats = cache_.stats();
      return absl::ResourceExhaustedError(absl::StrCat("out of GPU memory allocating ", bytes,
                                                       " bytes (", stats.live_bytes,
                                                       " bytes live on the device)"));
    }
    cache_.Allocated(data);
  }
  if (capturing_) captured_buffers_.emplace_back(data, capacity);
  return std::make_shared<Buffer>(data, capacity, this);
}

absl::Status CudaBackend::CopyFromHost(const void* host, Tensor& tensor) {
  if (capturing_) return CopyFromHostCaptured(host, tensor);
  ++host_copies_;
  // Below kStagedBytes the driver queues a pageable copy without waiting; a batch of data is far
  // above. Above kMaxStagedBytes (weights uploaded once, huge batches) the copy goes direct, so
  // the ring's pinned memory stays at most kStagingBuffers * kMaxStagedBytes.
  constexpr size_t kStagedBytes = 64 * 1024;
  constexpr size_t kMaxStagedBytes = 64 * 1024 * 1024;
  constexpr size_t kStagingBuffers = 4;
  const size_t bytes = tensor.bytes();
  if (bytes < kStagedBytes || bytes > kMaxStagedBytes) {
    return Check(cudaMemcpyAsync(tensor.raw(), host, bytes, cudaMemcpyHostToDevice, stream_),
                 "copying to the GPU");
  }
  if (staging_.empty()) staging_.resize(kStagingBuffers);
  Staging& slot = staging_[next_staging_];
  next_staging_ = (next_staging_ + 1) % staging_.size();
  if (slot.copied != nullptr) {
    // cudaErrorNotReady is also left as the thread's last error: cleared, or the next kernel
    // launch would report it.
    if (const cudaError_t done = cudaEventQuery(slot.copied); done == cudaErrorNotReady) {
      ++synchronisations_;  // a real wait
      cudaGetLastError();
    } else if (done != cudaSuccess) {
      return Check(done, "an earlier copy to the GPU");
    }
    AMPC_RETURN_IF_ERROR(Check(cudaEventSynchronize(slot.copied), "an earlier copy to the GPU"));
  } else {
    AMPC_RETURN_IF_ERROR(Check(cudaEventCreateWithFlags(&slot.copied, cudaEventDisableTiming),
                               "cudaEventCreateWithFlags"));
  }
  if (slot.bytes < bytes) {
    if (slot.data != nullptr) cudaFreeHost(slot.data);
    slot.data = nullptr;
    slot.bytes = 0;
    void* data = nullptr;
    AMPC_RETURN_IF_ERROR(Check(cudaMallocHost(&data, bytes), "allocating pinned host memory"));
    slot.data = static_cast<char*>(data);
    slot.bytes = bytes;
  }
  std::memcpy(slot.data, host, bytes);
  AMPC_RETURN_IF_ERROR(
      Check(cudaMemcpyAsync(tensor.raw(), slot.data, bytes, cudaMemcpyHostToDevice, stream_),
            "copying to the GPU"));
  return Check(cudaEventRecord(slot.copied, stream_), "cudaEventRecord");
}

absl::Status CudaBackend::CopyToHost(const Tensor& tensor, void* host) {
  if (capturing_) return Synchronize();  // refused while capturing
  if (absl::Status s = Check(
          cudaMemcpyAsync(host, tensor.raw(), tensor.bytes(), cudaMemcpyDeviceToHost, stream_),
          "copying from the GPU");
      !s.ok()) {
    return s;
  }
  return Synchronize();
}

absl::Status CudaBackend::CopyAllToHost(std::span<const Tensor* const> tensors,
                                        std::span<void* const> hosts) {
  if (capturing_) return Synchronize();  // refused while capturing
  // Each tensor's place in the staging buffer, 16-byte aligned.
  auto padded = [](const Tensor& t) { return (t.bytes() + 15) / 16 * 16; };
  size_t total = 0;
  for (const Tensor* t : tensors) total += padded(*t);
  if (total > pinned_bytes_) {
    if (pinned_ != nullptr) cudaFreeHost(pinned_);
    pinned_ = nullptr;
    pinned_bytes_ = 0;
    void* pinned = nullptr;
    AMPC_RETURN_IF_ERROR(Check(cudaMallocHost(&pinned, total), "allocating pinned host memory"));
    pinned_ = static_cast<char*>(pinned);
    pinned_bytes_ = total;
  }
  size_t offset = 0;
  for (const Tensor* t : tensors) {
    if (!InHostMemory(*t)) {
      AMPC_RETURN_IF_ERROR(Check(
          cudaMemcpyAsync(pinned_ + offset, t->raw(), t->bytes(), cudaMemcpyDeviceToHost, stream_),
          "copying from the GPU"));
    }
    offset += padded(*t);
  }
  AMPC_RETURN_IF_ERROR(Synchronize());
  offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = *tensors[i];
    std::memcpy(hosts[i], InHostMemory(t) ? t.raw() : pinned_ + offset, t.bytes());
    offset += padded(t);
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Copy(const Tensor& from, Tensor& to) {
  if (from.bytes() != to.bytes()) return Backend::Copy(from, to);  // the error
  return Check(cudaMemcpyAsync(to.raw(), from.raw(), from.bytes(), cudaMemcpyDefault, stream_),
               "copying on the GPU");
}

absl::Status CudaBackend::Synchronize() {
  if (capturing_) {
    return absl::FailedPreconditionError(
        "waits for the GPU, which a CUDA graph cannot record (a GPU value read on the host)");
  }
  ++synchronisations_;
  return Check(cudaStreamSynchronize(stream_), "the GPU's queued work");
}

// One instantiated CUDA Graph and the pinned host copies its memcpy nodes read.
class CudaGraph final : public CapturedWork {
 public:
  CudaGraph(CudaBackend& backend, cudaGraphExec_t exec, std::vector<void*> host)
      : backend_(backend), exec_(exec), host_(std::move(host)) {}
  ~CudaGraph() override {
    cudaStreamSynchronize(backend_.stream());  // a replay may still read the host copies
    cudaGraphExecDestroy(exec_);
    for (void* data : host_) cudaFreeHost(data);
    backend_.CaptureDestroyed();
  }
  absl::Status Replay() override {
    return CudaBackend::Check(cudaGraphLaunch(exec_, backend_.stream()), "replaying a CUDA graph");
  }

 private:
  CudaBackend& backend_;
  cudaGraphExec_t exec_;
  std::vector<void*> host_;
};

absl::Status CudaBackend::BeginCapture() {
  if (capturing_) return absl::FailedPreconditionError("a capture is already in progress");
  AMPC_RETURN_IF_ERROR(
      Check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), "starting a capture"));
  capturing_ = true;
  captured_buffers_.clear();
  // The pool's free buffers serve this capture too: captures replay one at a time on the stream.
  for (const auto& [data, capacity] : pool_) {
    if (!pool_held_.contains(data)) cache_.Put(data, capacity);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CapturedWork>> CudaBackend::EndCapture() {
  if (!capturing_) return Backend::EndCapture();
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  absl::Status status = Check(cudaStreamEndCapture(stream_, &graph), "ending a capture");
  cudaGraphExec_t exec = nullptr;
  if (status.ok()) {
    status = Check(cudaGraphInstantiate(&exec, graph, 0), "instantiating a CUDA graph");
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  std::vector<void*> host = std::exchange(capture_host_, {});
  std::vector<std::pair<void*, size_t>> added = std::exchange(captured_buffers_, {});
  if (!status.ok()) {
    cudaGetLastError();
    for (void* data : host) cudaFreeHost(data);
    SettlePool({});
    return status;
  }
  SettlePool(added);
  ++live_captures_;
  return std::unique_ptr<CapturedWork>(new CudaGraph(*this, exec, std::move(host)));
}

void CudaBackend::AbortCapture() {
  if (!capturing_) return;
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(stream_, &graph);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaGetLastError();
  for (void* data : capture_host_) cudaFreeHost(data);
  capture_host_.clear();
  captured_buffers_.clear();
  SettlePool({});
}

void CudaBackend::SettlePool(const std::vector<std::pair<void*, size_t>>& added) {
  for (const auto& [data, capacity] : added) pool_.emplace(data, capacity);
  for (const auto& [data, capacity] : pool_) {
    if (pool_held_.contains(data)) continue;
    if (!cache_.Reserve(data, capacity)) pool_held_.insert(data);
  }
}

void CudaBackend::BeginRun(uint64_t key) {
  if (capturing_ || unplanned_runs_ > 0) {  // a captured run, or one inside it
    ++unplanned_runs_;
    return;
  }
  if (const size_t bytes = cache_.ArenaWanted(key); bytes > 0 && bytes < arena_refused_) {
    // Once per larger plan, in warm-up: the old arena and the cached buffers the new one replaces
    // (kept since the runs before the plan) go first, once queued work no longer uses them.
    ++synchronisations_;
    cudaStreamSynchronize(stream_);
    if (void* old = cache_.SetArena(nullptr, 0)) cudaFree(old);
    for (void* data : cache_.Drain()) cudaFree(data);
    void* arena = nullptr;
    if (cudaMalloc(&arena, bytes) == cudaSuccess) {
      cache_.SetArena(arena, bytes);
    } else {
      arena_refused_ = bytes;  // not asked for again
    }
    cudaGetLastError();
  }
  cache_.BeginRun(key);
}

void CudaBackend::EndRun() {
  if (unplanned_runs_ > 0) {
    --unplanned_runs_;
    return;
  }
  cache_.EndRun();
}

void CudaBackend::Release(void* data, size_t bytes) {
  // The graph may use it; a plan's arena never joins the pool (nor, so, pool_held_).
  if (capturing_ && !cache_.InArena(data)) captured_buffers_.emplace_back(data, bytes);
  // A pool buffer a value let go of stays reserved to the captures (they use it), except while
  // capturing, when the capture in progress may take it again.
  if (pool_held_.erase(data) > 0 && !capturing_) return;
  cache_.Put(data, bytes);
}

void CudaBackend::CaptureDestroyed() {
  if (--live_captures_ > 0) return;
  for (const auto& [data, capacity] : pool_) {
    if (!pool_held_.contains(data)) cache_.Put(data, capacity);
  }
  pool_.clear();
  pool_held_.clear();  // their holders give them back to the cache
}

absl::Status CudaBackend::CopyFromHostCaptured(const void* host, Tensor& tensor) {
  void* pinned = nullptr;
  AMPC_RETURN_IF_ERROR(
      Check(cudaMallocHost(&pinned, std::max<size_t>(tensor.bytes(), 1)), "pinned host memory"));
  capture_host_.push_back(pinned);
  std::memcpy(pinned, host, tensor.bytes());
  return Check(
      cudaMemcpyAsync(tensor.raw(), pinned, tensor.bytes(), cudaMemcpyHostToDevice, stream_),
      "copying to the GPU");
}

CudaBackend& CudaOf(Backend& backend) { return static_cast<CudaBackend&>(backend); }

}  // namespace ampc
