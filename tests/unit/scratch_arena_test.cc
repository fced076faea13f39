// kernels/cpu/scratch_arena.h: blocks are reused across calls, never outnumber those once in use
// together, and the oversized ones are not kept.
#include "kernels/cpu/scratch_arena.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <thread>

namespace ampc {
namespace {

TEST(ScratchArenaTest, AReturnedBlockServesTheNextRequestThatFits) {
  float* first = nullptr;
  {
    ScratchBuffer<float> a(100000);
    first = a.data();
    first[99999] = 1.0f;
  }
  ScratchBuffer<float> b(90000);
  EXPECT_EQ(b.data(), first);
}

TEST(ScratchArenaTest, BuffersInUseTogetherAreDistinct) {
  ScratchBuffer<float> a(5000), b(5000);
  EXPECT_NE(a.data(), b.data());
  EXPECT_GE(std::abs(b.data() - a.data()), 5000);
}

TEST(ScratchArenaTest, BlocksNeverOutnumberThoseInUseAtOnce) {
  std::thread([] {  // a fresh thread: its own, empty arena
    ScratchArena& arena = ScratchArena::ForThisThread();
    for (int64_t n = 1000; n < 2000000; n *= 3) {
      ScratchBuffer<float> a(n), b(n / 2);
    }
    EXPECT_EQ(arena.free_blocks(), 2u);
    { ScratchBuffer<float> small(10); }
    EXPECT_EQ(arena.free_blocks(), 2u);
    EXPECT_LT(arena.free_bytes(), 2 * 3000000 * sizeof(float));
  })
      .join();
}

TEST(ScratchArenaTest, GrowingDropsTheBlockTooSmall) {
  std::thread([] {
    ScratchArena& arena = ScratchArena::ForThisThread();
    ScratchBuffer<double> a;
    a.Get(100);
    double* grown = a.Get(1000000);
    EXPECT_EQ(arena.free_blocks(), 0u);
    EXPECT_EQ(a.Get(10), grown);  // fits in what it has
    EXPECT_EQ(arena.free_blocks(), 0u);
  }).join();
}

TEST(ScratchArenaTest, OversizedBlocksAreNotKept) {
  std::thread([] {
    ScratchArena& arena = ScratchArena::ForThisThread();
    { ScratchBuffer<char> big(ScratchArena::kMaxCachedBytes + 1); }
    EXPECT_EQ(arena.free_blocks(), 0u);
  }).join();
}

}  // namespace
}  // namespace ampc
