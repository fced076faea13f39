// The CPU backend: host memory with a cache of freed buffers (so a step reuses the buffers the
// previous values no longer need) and memory plans (a run's buffers in one arena), and the thread
// pool CPU kernels parallelise over.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/core/backend.h"
#include "runtime/core/buffer_cache.h"
#include "runtime/core/thread_pool.h"

namespace ampc {

class CpuBackend final : public Backend {
 public:
  // `threads`: 0 means one per hardware thread.
  explicit CpuBackend(int threads = 0);
  ~CpuBackend() override;

  const std::string& name() const override { return name_; }
  absl::StatusOr<std::shared_ptr<Buffer>> Allocate(size_t bytes) override;
  absl::Status CopyFromHost(const void* host, Tensor& tensor) override;
  absl::Status CopyToHost(const Tensor& tensor, void* host) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }
  void BeginRun(uint64_t key) override;
  void EndRun() override { cache_.EndRun(); }
  MemoryStats memory_stats() const override;
  void ResetPeak() override;

  ThreadPool& pool() { return pool_; }
  void set_memory_plans(bool on) override { cache_.set_planning(on); }

 protected:
  void Release(void* data, size_t bytes) override;

 private:
  const std::string name_ = "cpu";
  ThreadPool pool_;
  BufferCache cache_;
  size_t arena_refused_ = SIZE_MAX;  // the smallest arena allocation that failed
};

// The CPU backend of a kernel's tensors (kernels registered for "cpu" only ever see this one).
CpuBackend& CpuOf(Backend& backend);

}  // namespace ampc
