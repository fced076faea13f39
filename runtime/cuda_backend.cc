#include "runtime/cuda_backend.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/device.h"
#include "runtime/status_macros.h"

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
  cudaStreamSynchronize(stream_);
  shared_.clear();
  for (void* data : cache_.Drain()) cudaFree(data);
  if (pinned_ != nullptr) cudaFreeHost(pinned_);
  for (Staging& slot : staging_) {
    if (slot.data != nullptr) cudaFreeHost(slot.data);
    if (slot.copied != nullptr) cudaEventDestroy(slot.copied);
  }
  cudaStreamDestroy(stream_);
}

absl::StatusOr<std::shared_ptr<Buffer>> CudaBackend::Allocate(size_t bytes) {
  const size_t capacity = BufferCache::Capacity(bytes);
  void* data = cache_.Take(capacity);
  if (data == nullptr && cudaMalloc(&data, capacity) != cudaSuccess) {
    cudaGetLastError();
    cache_.Refused(capacity);
    const MemoryStats stats = cache_.stats();
    return absl::ResourceExhaustedError(absl::StrCat("out of GPU memory allocating ", bytes,
                                                     " bytes (", stats.live_bytes,
                                                     " bytes live on the device)"));
  }
  return std::make_shared<Buffer>(data, capacity, this);
}

absl::Status CudaBackend::CopyFromHost(const void* host, Tensor& tensor) {
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

absl::Status CudaBackend::Synchronize() {
  return Check(cudaStreamSynchronize(stream_), "the GPU's queued work");
}

CudaBackend& CudaOf(Backend& backend) { return static_cast<CudaBackend&>(backend); }

}  // namespace ampc
