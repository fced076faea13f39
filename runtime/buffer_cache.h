// Freed buffers kept for reuse, by capacity, with the counters a backend reports. Backends own
// the memory; the cache only remembers it. Thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

#include "runtime/backend.h"

namespace ampc {

class BufferCache {
 public:
  // The capacity a request for `bytes` is served with: rounded so that nearby sizes share
  // buffers.
  static size_t Capacity(size_t bytes);

  // Counts a request of `capacity` bytes and returns a cached buffer of exactly that capacity,
  // or nullptr when the caller must allocate one (and call Refused if that fails).
  void* Take(size_t capacity);
  void Refused(size_t capacity);
  // A buffer whose last user went away.
  void Put(void* data, size_t capacity);
  // Takes this very buffer out of the cache, if it is there: live again, not a request.
  bool Reserve(void* data, size_t capacity);
  // Empties the cache; the caller frees what it returns.
  std::vector<void*> Drain();

  MemoryStats stats() const;
  void ResetPeak();

 private:
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> cache_;
  MemoryStats stats_;
};

}  // namespace ampc
