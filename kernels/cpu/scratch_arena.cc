#include "kernels/cpu/scratch_arena.h"

#include <algorithm>
#include <bit>
#include <new>

namespace ampc {
namespace {

constexpr std::align_val_t kAlignment{64};

// Requests round up by an eighth of their power of two, so that nearby sizes share blocks.
size_t RoundedCapacity(size_t bytes) {
  if (bytes <= 4096) return 4096;
  const size_t step = std::bit_floor(bytes) / 8;
  return (bytes + step - 1) / step * step;
}

}  // namespace

// Holds the arena so that its destructor (private) runs at thread exit.
struct ScratchArenaHolder {
  ScratchArena arena;
};

ScratchArena& ScratchArena::ForThisThread() {
  thread_local ScratchArenaHolder holder;
  return holder.arena;
}

ScratchArena::~ScratchArena() {
  for (const Block& block : free_) ::operator delete[](block.data, kAlignment);
}

std::byte* ScratchArena::Take(size_t bytes, size_t& capacity) {
  // The smallest free block that fits.
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->capacity >= bytes && (best == free_.end() || it->capacity < best->capacity)) best = it;
  }
  if (best != free_.end()) {
    std::byte* data = best->data;
    capacity = best->capacity;
    free_.erase(best);
    return data;
  }
  // None fits: the largest free block (too small) makes way for the new one, so the blocks never
  // outnumber those in use at once.
  auto largest = std::max_element(free_.begin(), free_.end(), [](const Block& a, const Block& b) {
    return a.capacity < b.capacity;
  });
  if (largest != free_.end()) {
    ::operator delete[](largest->data, kAlignment);
    free_.erase(largest);
  }
  capacity = RoundedCapacity(bytes);
  return static_cast<std::byte*>(::operator new[](capacity, kAlignment));
}

void ScratchArena::Return(std::byte* data, size_t capacity) {
  if (capacity > kMaxCachedBytes) {
    ::operator delete[](data, kAlignment);
    return;
  }
  free_.push_back({data, capacity});
}

size_t ScratchArena::free_bytes() const {
  size_t total = 0;
  for (const Block& block : free_) total += block.capacity;
  return total;
}

}  // namespace ampc
