// Freed buffers kept for reuse, by capacity, with the counters a backend reports, and the memory
// plans of graph runs (runtime/core/memory_plan.h) served from an arena. Backends own the memory;
// the cache only remembers it. Thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

#include "runtime/core/backend.h"
#include "runtime/core/memory_plan.h"

namespace ampc {

class BufferCache {
 public:
  // The capacity a request for `bytes` is served with: rounded so that nearby sizes share
  // buffers.
  static size_t Capacity(size_t bytes);

  // Counts a request of `capacity` bytes and returns its planned place in the arena (`planned`:
  // where the caller allows one) or a cached buffer of exactly that capacity, or nullptr when the
  // caller must allocate one (and call Allocated with it, or Refused if that fails).
  void* Take(size_t capacity, bool planned = true);
  void Allocated(void* data);
  void Refused(size_t capacity);
  // A buffer whose last user went away (one of the arena's becomes free again in it).
  void Put(void* data, size_t capacity);

  // A graph run starts or ends (MemoryPlanner::BeginRun); off, no run is planned.
  void BeginRun(uint64_t key);
  void EndRun();
  void set_planning(bool on);
  // The arena a run of `key` starting now needs when it is larger than the one in place and
  // none of it is in use (between runs, planning on), else 0: the caller allocates it and hands
  // it over with SetArena, which returns the old one for the caller to free once nothing uses it.
  size_t ArenaWanted(uint64_t key) const;
  void* SetArena(void* base, size_t bytes);
  bool InArena(const void* data) const;
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
  MemoryPlanner planner_;
  bool planning_ = true;
  int runs_open_ = 0;  // BeginRun calls passed on and not yet ended
};

}  // namespace ampc
