#include "runtime/buffer_cache.h"

#include <algorithm>
#include <bit>

namespace ampc {

size_t BufferCache::Capacity(size_t bytes) {
  if (bytes <= 256) return 256;
  if (bytes > (size_t{1} << 48)) return bytes;  // NewTensor refuses more; no rounding overflow
  const size_t step = std::bit_floor(bytes) / 8;
  return (bytes + step - 1) / step * step;
}

void* BufferCache::Take(size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.allocations;
  stats_.live_bytes += capacity;
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.live_bytes);
  auto it = cache_.find(capacity);
  if (it == cache_.end()) return nullptr;
  void* data = it->second;
  cache_.erase(it);
  stats_.cached_bytes -= capacity;
  ++stats_.reuses;
  return data;
}

void BufferCache::Refused(size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.live_bytes -= capacity;
}

void BufferCache::Put(void* data, size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.live_bytes -= capacity;
  stats_.cached_bytes += capacity;
  cache_.emplace(capacity, data);
}

bool BufferCache::Reserve(void* data, size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [begin, end] = cache_.equal_range(capacity);
  auto it = std::find_if(begin, end, [data](const auto& entry) { return entry.second == data; });
  if (it == end) return false;
  cache_.erase(it);
  stats_.cached_bytes -= capacity;
  stats_.live_bytes += capacity;
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.live_bytes);
  return true;
}

std::vector<void*> BufferCache::Drain() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<void*> buffers;
  for (const auto& [capacity, data] : cache_) buffers.push_back(data);
  cache_.clear();
  stats_.cached_bytes = 0;
  return buffers;
}

MemoryStats BufferCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void BufferCache::ResetPeak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_bytes = stats_.live_bytes;
}

}  // namespace ampc
