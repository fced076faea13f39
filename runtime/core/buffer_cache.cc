#include "runtime/core/buffer_cache.h"

#include <algorithm>
#include <bit>

namespace ampc {

size_t BufferCache::Capacity(size_t bytes) {
  if (bytes <= 256) return 256;
  if (bytes > (size_t{1} << 48)) return bytes;  // NewTensor refuses more; no rounding overflow
  const size_t step = std::bit_floor(bytes) / 8;
  return (bytes + step - 1) / step * step;
}

void* BufferCache::Take(size_t capacity, bool planned) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.allocations;
  stats_.live_bytes += capacity;
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.live_bytes);
  if (void* place = planned ? planner_.Take(capacity) : nullptr; place != nullptr) {
    stats_.cached_bytes -= capacity;  // the arena's free part counts as cached
    ++stats_.reuses;
    ++stats_.planned;
    return place;
  }
  auto it = cache_.find(capacity);
  if (it == cache_.end()) return nullptr;
  void* data = it->second;
  cache_.erase(it);
  stats_.cached_bytes -= capacity;
  ++stats_.reuses;
  planner_.Served(data);
  return data;
}

void BufferCache::Allocated(void* data) {
  std::lock_guard<std::mutex> lock(mutex_);
  planner_.Served(data);
}

void BufferCache::Refused(size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.live_bytes -= capacity;
}

void BufferCache::Put(void* data, size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.live_bytes -= capacity;
  stats_.cached_bytes += capacity;
  if (planner_.Release(data)) return;
  cache_.emplace(capacity, data);
}

void BufferCache::BeginRun(uint64_t key) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!planning_ && runs_open_ == 0) return;
  ++runs_open_;
  planner_.BeginRun(key);
}

void BufferCache::EndRun() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (runs_open_ == 0) return;
  --runs_open_;
  planner_.EndRun();
}

void BufferCache::set_planning(bool on) {
  std::lock_guard<std::mutex> lock(mutex_);
  planning_ = on;
}

size_t BufferCache::ArenaWanted(uint64_t key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!planning_ || runs_open_ > 0 || !planner_.arena_free()) return 0;
  const size_t needed = planner_.needed_bytes(key);
  return needed > planner_.arena_bytes() ? needed : 0;
}

bool BufferCache::InArena(const void* data) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return planner_.InArena(data);
}

void* BufferCache::SetArena(void* base, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.cached_bytes -= planner_.arena_bytes();
  void* old = planner_.SetArena(base, bytes);
  stats_.cached_bytes += planner_.arena_bytes();
  return old;
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
  for (const auto& [capacity, data] : cache_) {
    buffers.push_back(data);
    stats_.cached_bytes -= capacity;  // what stays counted is the arena's free part
  }
  cache_.clear();
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
