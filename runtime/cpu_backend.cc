#include "runtime/cpu_backend.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"

namespace ampc {
namespace {

constexpr std::align_val_t kAlignment{64};

// Capacities are rounded so that nearby sizes share cached buffers.
size_t Capacity(size_t bytes) {
  if (bytes <= 256) return 256;
  if (bytes > (size_t{1} << 48)) return bytes;  // NewTensor refuses more; no rounding overflow
  const size_t step = std::bit_floor(bytes) / 8;
  return (bytes + step - 1) / step * step;
}

}  // namespace

CpuBackend::CpuBackend(int threads) : pool_(threads) {}

CpuBackend::~CpuBackend() {
  for (auto& [capacity, data] : cache_) ::operator delete[](data, kAlignment);
}

absl::StatusOr<std::shared_ptr<Buffer>> CpuBackend::Allocate(size_t bytes) {
  const size_t capacity = Capacity(bytes);
  void* data = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.allocations;
    auto it = cache_.find(capacity);
    if (it != cache_.end()) {
      data = it->second;
      cache_.erase(it);
      stats_.cached_bytes -= capacity;
      ++stats_.reuses;
    }
    stats_.live_bytes += capacity;
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.live_bytes);
  }
  if (data == nullptr) {
    data = ::operator new[](capacity, kAlignment, std::nothrow);
    if (data == nullptr) {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.live_bytes -= capacity;
      return absl::ResourceExhaustedError(
          absl::StrCat("out of host memory allocating ", bytes, " bytes"));
    }
  }
  return std::make_shared<Buffer>(data, capacity, this);
}

void CpuBackend::Release(void* data, size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.live_bytes -= capacity;
  stats_.cached_bytes += capacity;
  cache_.emplace(capacity, data);
}

absl::Status CpuBackend::CopyFromHost(const void* host, Tensor& tensor) {
  std::memcpy(tensor.raw(), host, tensor.bytes());
  return absl::OkStatus();
}

absl::Status CpuBackend::CopyToHost(const Tensor& tensor, void* host) {
  std::memcpy(host, tensor.raw(), tensor.bytes());
  return absl::OkStatus();
}

MemoryStats CpuBackend::memory_stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CpuBackend::ResetPeak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_bytes = stats_.live_bytes;
}

CpuBackend& CpuOf(Backend& backend) { return static_cast<CpuBackend&>(backend); }

}  // namespace ampc
