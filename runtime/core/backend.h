// The interface a device implements for the runtime: memory, copies, synchronisation and the
// counters the memory planner reports. The CPU backend is the reference; CUDA plugs in unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/core/tensor.h"

namespace ampc {

struct MemoryStats {
  uint64_t live_bytes = 0;
  uint64_t peak_bytes = 0;    // highest live_bytes since the last ResetPeak()
  uint64_t cached_bytes = 0;  // freed buffers kept for reuse
  uint64_t allocations = 0;   // requests served
  uint64_t reuses = 0;        // requests served from the cache (or the arena)
  uint64_t planned = 0;       // requests served from the arena of a memory plan
};

// What one run may use (docs/errors.md, "Resource limits"): checked as tensors are allocated
// and as loops iterate, so a tiny model cannot take the machine's memory or run forever.
struct RunLimits {
  uint64_t max_tensor_bytes = uint64_t{16} << 30;  // one tensor
  // Live tensors of the backend together; 0: the machine's memory (or its cgroup's limit) on
  // the CPU, none of ampc's own on a GPU (its allocator reports what does not fit).
  uint64_t max_memory_bytes = 0;
  int64_t max_loop_iterations = int64_t{1} << 24;  // one Loop node's iterations, per run of it
};

// Work a backend recorded once (Backend::BeginCapture ... EndCapture) and replays whole: the same
// kernels on the same memory, reading whatever that memory holds at each replay (a CUDA Graph).
class CapturedWork {
 public:
  virtual ~CapturedWork() = default;
  // Queues the recorded work; nothing waits for it.
  virtual absl::Status Replay() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu" or "cuda"; kernels are registered per backend name.
  virtual const std::string& name() const = 0;

  // Uninitialised memory for `bytes` bytes; a size of 0 still gives a distinct buffer.
  virtual absl::StatusOr<std::shared_ptr<Buffer>> Allocate(size_t bytes) = 0;

  // A tensor of this backend with uninitialised data; ResourceExhausted beyond the limits.
  absl::StatusOr<Tensor> NewTensor(DType dtype, Shape shape);

  const RunLimits& limits() const { return limits_; }
  void set_limits(const RunLimits& limits) { limits_ = limits; }

  // Copies between host memory and a tensor of this backend (same byte count).
  virtual absl::Status CopyFromHost(const void* host, Tensor& tensor) = 0;
  virtual absl::Status CopyToHost(const Tensor& tensor, void* host) = 0;
  // Copies tensors[i] (of this backend, or in host memory) to hosts[i], all of them, and waits
  // once for the lot (CopyToHost waits for each). The default copies them one at a time.
  virtual absl::Status CopyAllToHost(std::span<const Tensor* const> tensors,
                                     std::span<void* const> hosts);

  // Copies one tensor of this backend into another of the same byte count, queued like a
  // kernel. The default handles host memory only.
  virtual absl::Status Copy(const Tensor& from, Tensor& to);

  // Waits until all queued work is done (a no-op on the CPU).
  virtual absl::Status Synchronize() = 0;

  // Capture: from BeginCapture to EndCapture the work queued is recorded instead of run, for
  // replay without the host. While capturing, whatever waits for the device (CopyToHost,
  // Synchronize) fails and ends the capture's chances (call AbortCapture); data copied from the
  // host is kept with the capture; and the memory handed out stays reserved to the captures made
  // (kept from other users) until all of them are destroyed. Unimplemented where the backend
  // cannot capture (the CPU).
  virtual bool CanCapture() const { return false; }
  virtual absl::Status BeginCapture();
  virtual absl::StatusOr<std::unique_ptr<CapturedWork>> EndCapture();
  // Ends a capture that failed; a no-op when none is in progress.
  virtual void AbortCapture() {}

  // A graph run starts or ends (GraphExecutor::Run; runs inside a run are part of it): backends
  // with memory plans (runtime/core/memory_plan.h) serve its buffers from an arena. `key` names the
  // graph and its input shapes. Runs on one backend do not overlap in time (one thread at a
  // time runs graphs on it; kernels may still use many).
  virtual void BeginRun(uint64_t key) {}
  virtual void EndRun() {}
  // Memory plans for runs from now on, where the backend has them (on by default).
  virtual void set_memory_plans(bool on) {}

  virtual MemoryStats memory_stats() const = 0;
  virtual void ResetPeak() = 0;

 protected:
  friend class Buffer;
  virtual void Release(void* data, size_t bytes) = 0;

 private:
  RunLimits limits_;
};

// The tensor's data is host memory (a host tensor, or one of the CPU backend).
bool InHostMemory(const Tensor& tensor);

// A host copy of `tensor` (the tensor itself when it already lives in host memory).
absl::StatusOr<Tensor> ToHost(const Tensor& tensor);

// `tensor` on `backend`: the tensor itself when it is there already (host memory is the CPU
// backend's), else a copy.
absl::StatusOr<Tensor> OnBackend(const Tensor& tensor, Backend& backend);

}  // namespace ampc
