// The CUDA backend: device memory with a cache of freed buffers and memory plans (a graph run's
// buffers in one arena, runtime/core/memory_plan.h; after warm-up a step allocates nothing from the
// driver), one stream every kernel and copy of the backend is queued on, so a buffer freed on
// the host may be reused at once: stream order serialises its users.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <typeindex>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/backend.h"
#include "runtime/core/buffer_cache.h"

namespace ampc {

class CudaBackend final : public Backend {
 public:
  // The backend of CUDA device `device`; FailedPrecondition when there is no such device.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(int device = 0);
  ~CudaBackend() override;

  const std::string& name() const override { return name_; }
  absl::StatusOr<std::shared_ptr<Buffer>> Allocate(size_t bytes) override;
  // The host buffer may be reused on return. Copies from 64 KiB to 64 MiB (a batch of data) go
  // through a ring of four pinned staging buffers, so they are queued without waiting for the
  // stream (from pageable memory the driver would wait for the copy, hence for the work queued
  // before it).
  absl::Status CopyFromHost(const void* host, Tensor& tensor) override;
  // Waits for the queued work that produces `tensor`.
  absl::Status CopyToHost(const Tensor& tensor, void* host) override;
  // Through one pinned staging buffer: the copies are queued, then one synchronisation.
  absl::Status CopyAllToHost(std::span<const Tensor* const> tensors,
                             std::span<void* const> hosts) override;
  absl::Status Copy(const Tensor& from, Tensor& to) override;
  absl::Status Synchronize() override;
  // A CUDA Graph of the stream's work (relaxed capture mode: a buffer the cache cannot serve is
  // allocated from the driver). Host data copied while capturing goes through pinned copies the
  // graph keeps.
  bool CanCapture() const override { return true; }
  absl::Status BeginCapture() override;
  absl::StatusOr<std::unique_ptr<CapturedWork>> EndCapture() override;
  void AbortCapture() override;
  void BeginRun(uint64_t key) override;
  void EndRun() override;
  void set_memory_plans(bool on) override { cache_.set_planning(on); }
  MemoryStats memory_stats() const override { return cache_.stats(); }
  void ResetPeak() override { cache_.ResetPeak(); }

  // FP32 matrix products and convolutions may run on tensor cores, which round their inputs to
  // TF32 (10-bit mantissa), as torch.backends.cuda.matmul.allow_tf32: off unless the user asks
  // (`--tf32`). Set it before the first run; FP16/BF16 are unaffected.
  bool allow_tf32() const { return allow_tf32_; }
  void set_allow_tf32(bool allow) { allow_tf32_ = allow; }

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  // Host-to-device copies from the host since creation; a training step should add none
  // beyond its data.
  uint64_t host_copies() const { return host_copies_; }
  // Times the host waited for the device since creation (copies to the host, Synchronize, a
  // staging buffer still in use); a replayed training step adds none.
  uint64_t synchronisations() const { return synchronisations_; }
  // Captured graphs alive now (CapturedWork from EndCapture not yet destroyed).
  int live_captures() const { return live_captures_; }

  // State a kernel family shares across its kernels on this backend (a cuBLASLt handle and
  // workspace, cached plans): made on first use, destroyed with the backend, before its memory.
  template <typename T>
  T& Shared() {
    std::shared_ptr<void>& slot = shared_[std::type_index(typeid(T))];
    if (slot == nullptr) slot = std::make_shared<T>();
    return *static_cast<T*>(slot.get());
  }

  // OK for cudaSuccess; else Internal "<what>: <CUDA's error string>".
  static absl::Status Check(cudaError_t error, absl::string_view what);

 protected:
  void Release(void* data, size_t bytes) override;

 private:
  friend class CudaGraph;
  CudaBackend(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  absl::Status CopyFromHostCaptured(const void* host, Tensor& tensor);
  // After a capture ends or fails: every pool buffer (with `added`) is reserved to the captures
  // again, taken out of the cache or marked held where a value still holds it.
  void SettlePool(const std::vector<std::pair<void*, size_t>>& added);
  void CaptureDestroyed();

  const std::string name_ = "cuda";
  int device_;
  cudaStream_t stream_;
  BufferCache cache_;
  uint64_t host_copies_ = 0;
  uint64_t synchronisations_ = 0;
  bool allow_tf32_ = false;
  // Capture: buffers handed out while capturing; the pool of buffers live captures use (kept
  // out of the cache; those a value still holds are `pool_held_`, reserved again when
  // released); pinned host copies of the capture in progress. Captures must not outlive the
  // backend.
  bool capturing_ = false;
  std::vector<std::pair<void*, size_t>> captured_buffers_;
  std::map<void*, size_t> pool_;
  std::set<void*> pool_held_;
  std::vector<void*> capture_host_;
  int live_captures_ = 0;
  int unplanned_runs_ = 0;  // BeginRun calls not passed on (while capturing) and not yet ended
  size_t arena_refused_ = SIZE_MAX;  // the smallest arena allocation that failed
  char* pinned_ = nullptr;           // CopyAllToHost's staging buffer (cudaMallocHost)
  size_t pinned_bytes_ = 0;
  // CopyFromHost's pinned staging buffers, used in turn; `copied` marks when the device has read
  // one (recorded after its copy), before it is written again.
  struct Staging {
    char* data = nullptr;
    size_t bytes = 0;
    cudaEvent_t copied = nullptr;
  };
  std::vector<Staging> staging_;
  size_t next_staging_ = 0;
  std::map<std::type_index, std::shared_ptr<void>> shared_;
};

// The CUDA backend of a kernel's tensors (kernels registered for "cuda" only ever see this one).
CudaBackend& CudaOf(Backend& backend);

}  // namespace ampc
