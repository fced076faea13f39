#include "runtime/cuda_backend.h"

#include "absl/strings/str_cat.h"
#include "kernels/cuda/device.h"

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
  return Check(cudaMemcpyAsync(tensor.raw(), host, tensor.bytes(), cudaMemcpyHostToDevice, stream_),
               "copying to the GPU");
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

absl::Status CudaBackend::Synchronize() {
  return Check(cudaStreamSynchronize(stream_), "the GPU's queued work");
}

CudaBackend& CudaOf(Backend& backend) { return static_cast<CudaBackend&>(backend); }

}  // namespace ampc
