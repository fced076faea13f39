// Memory plans: the buffers a graph run allocates and frees within the run, served from one
// arena at offsets planned from their sizes and lifetimes, so a run allocates nothing and holds
// no more than its peak (issue 6, item 1). A graph's second run with given input shapes is
// recorded (the first chooses algorithms and workspaces, which later runs do not repeat); from
// the third on, each request that matches the recording in order and size gets its planned
// place. Buffers alive at the same time never share memory (greedy placement, largest first);
// a buffer that outlived the run when recorded (an output) is not planned. Whatever differs
// from the recording (a request of another size, a planned place still held) is served as if
// there were no plan, so a plan can cost memory but never correctness.
//
// A plan that replays leave twice in a row (the requests changed for good) is recorded again.
// The arena is as large as the largest plan run so far and is replaced, never shrunk, when a
// larger one runs.
//
// Logic only: the backend owns the arena's memory (SetArena) and calls these under its lock
// (BufferCache does); runs on one backend do not overlap in time. Pointers are compared, never
// dereferenced.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace ampc {

class MemoryPlanner {
 public:
  // A run of the graph and input shapes `key` names starts or ends; runs inside a run (control
  // flow bodies) are part of it.
  void BeginRun(uint64_t key);
  void EndRun();

  // The arena memory for the run's next request of `capacity` bytes, or null: then the caller
  // serves it and says where with Served.
  void* Take(size_t capacity);
  void Served(void* data);
  // A buffer is free again: true when it is the arena's (the caller then keeps nothing).
  bool Release(void* data);

  // The arena a run of `key` would use (its plan's size; 0 without one), and the one in place
  // (set between runs; its old base, which the caller frees once nothing uses it, is returned).
  size_t needed_bytes(uint64_t key) const;
  size_t arena_bytes() const { return arena_bytes_; }
  bool arena_free() const { return served_.empty(); }
  bool InArena(const void* data) const;
  void* SetArena(void* base, size_t bytes);

 private:
  struct Plan {
    std::vector<size_t> capacity;         // per request, in order
    std::vector<int64_t> offset;          // its place in the arena, -1 when not planned
    std::vector<std::vector<int>> under;  // earlier planned requests whose memory it overlaps
    size_t bytes = 0;                     // the arena it needs
    int departures = 0;                   // replays in a row that left it
  };
  // Places the recorded requests (sizes, and the clock at request and release: -1 for never).
  static Plan Place(const std::vector<size_t>& capacity, const std::vector<int64_t>& begin,
                    const std::vector<int64_t>& end);

  enum class Mode { kNone, kRecord, kReplay };
  int depth_ = 0;
  uint64_t key_ = 0;
  Mode mode_ = Mode::kNone;
  absl::flat_hash_map<uint64_t, int> runs_;  // runs seen per key
  absl::flat_hash_map<uint64_t, Plan> plans_;

  // Recording: per request its size and the clock at its request and release (-1: not yet).
  std::vector<size_t> recorded_;
  std::vector<int64_t> begin_, end_;
  int64_t clock_ = 0;
  absl::flat_hash_map<void*, int> recording_;  // live buffers of this run -> request
  int pending_ = -1;                           // the request Served names

  // Replaying.
  const Plan* plan_ = nullptr;
  int next_ = 0;
  bool diverged_ = false;
  std::vector<bool> occupied_;              // per request: its arena place is in use
  absl::flat_hash_map<void*, int> served_;  // arena buffers in use -> request
  char* arena_ = nullptr;
  size_t arena_bytes_ = 0;
};

}  // namespace ampc
