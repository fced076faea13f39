// Working memory of the CPU kernels (widened FP16/BF16 operands, FP32 accumulators, im2col
// columns), kept per thread from one call to the next: a fresh allocation per call costs a page
// fault per 4 KiB on its first touch (jemalloc hands large freed blocks back to the system), which
// was ~10% of a BF16 training step. Bounded: the arena never holds more blocks than were once in
// use at the same time on its thread, none larger than the largest request, and none at all over
// kMaxCachedBytes (those are freed on return).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

namespace ampc {

class ScratchArena {
 public:
  // A block larger than this goes back to the allocator when returned.
  static constexpr size_t kMaxCachedBytes = size_t{256} << 20;

  // The calling thread's arena.
  static ScratchArena& ForThisThread();

  // A block of at least `bytes`, uninitialised (64-byte aligned), and its capacity.
  std::byte* Take(size_t bytes, size_t& capacity);
  // Gives back a block from Take on this arena.
  void Return(std::byte* data, size_t capacity);

  // Free blocks held, and their bytes (for tests).
  size_t free_blocks() const { return free_.size(); }
  size_t free_bytes() const;

 private:
  struct Block {
    std::byte* data;
    size_t capacity;
  };
  ~ScratchArena();
  std::vector<Block> free_;
  friend struct ScratchArenaHolder;
};

// n uninitialised values of A from the calling thread's arena, given back on destruction (on the
// same thread). Get(n) grows it, keeping nothing of the old contents.
template <typename A>
class ScratchBuffer {
  static_assert(std::is_trivially_copyable_v<A> && std::is_trivially_destructible_v<A>);

 public:
  ScratchBuffer() = default;
  explicit ScratchBuffer(int64_t n) { Get(n); }
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() { Release(); }

  A* Get(int64_t n) {
    const size_t bytes = static_cast<size_t>(n) * sizeof(A);
    if (bytes > capacity_ || data_ == nullptr) {
      Release();
      arena_ = &ScratchArena::ForThisThread();
      data_ = arena_->Take(bytes, capacity_);
    }
    return reinterpret_cast<A*>(data_);
  }
  A* data() const { return reinterpret_cast<A*>(data_); }

 private:
  void Release() {
    if (data_ != nullptr) arena_->Return(data_, capacity_);
    data_ = nullptr;
    capacity_ = 0;
  }
  ScratchArena* arena_ = nullptr;
  std::byte* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace ampc
