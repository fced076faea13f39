#include "runtime/core/cpu_backend.h"

#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"

namespace ampc {
namespace {

constexpr std::align_val_t kAlignment{64};

}  // namespace

CpuBackend::CpuBackend(int threads) : pool_(threads) {}

CpuBackend::~CpuBackend() {
  for (void* data : cache_.Drain()) ::operator delete[](data, kAlignment);
  if (void* arena = cache_.SetArena(nullptr, 0)) ::operator delete[](arena, kAlignment);
}

void CpuBackend::BeginRun(uint64_t key) {
  if (const size_t bytes = cache_.ArenaWanted(key); bytes > 0 && bytes < arena_refused_) {
    // The old arena and the cached buffers the new one replaces go first.
    if (void* old = cache_.SetArena(nullptr, 0)) ::operator delete[](old, kAlignment);
    for (void* data : cache_.Drain()) ::operator delete[](data, kAlignment);
    if (void* arena = ::operator new[](bytes, kAlignment, std::nothrow)) {
      cache_.SetArena(arena, bytes);
    } else {
      arena_refused_ = bytes;  // not asked for again
    }
  }
  cache_.BeginRun(key);
}

absl::StatusOr<std::shared_ptr<Buffer>> CpuBackend::Allocate(size_t bytes) {
  const size_t capacity = BufferCache::Capacity(bytes);
  void* data = cache_.Take(capacity);
  if (data == nullptr) {
    data = ::operator new[](capacity, kAlignment, std::nothrow);
    if (data == nullptr) {
      cache_.Refused(capacity);
      return absl::ResourceExhaustedError(
          absl::StrCat("out of host memory allocating ", bytes, " bytes"));
    }
    cache_.Allocated(data);
  }
  return std::make_shared<Buffer>(data, capacity, this);
}

void CpuBackend::Release(void* data, size_t capacity) { cache_.Put(data, capacity); }

absl::Status CpuBackend::CopyFromHost(const void* host, Tensor& tensor) {
  std::memcpy(tensor.raw(), host, tensor.bytes());
  return absl::OkStatus();
}

absl::Status CpuBackend::CopyToHost(const Tensor& tensor, void* host) {
  std::memcpy(host, tensor.raw(), tensor.bytes());
  return absl::OkStatus();
}

MemoryStats CpuBackend::memory_stats() const { return cache_.stats(); }

void CpuBackend::ResetPeak() { cache_.ResetPeak(); }

CpuBackend& CpuOf(Backend& backend) { return static_cast<CpuBackend&>(backend); }

}  // namespace ampc
