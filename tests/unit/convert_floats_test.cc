#include "kernels/numerics/convert_floats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace ampc {
namespace {

bool operator==(const ConversionStats& a, const ConversionStats& b) {
  return a.clamped == b.clamped && a.overflowed == b.overflowed &&
         a.flushed_to_zero == b.flushed_to_zero;
}

std::string ToString(const ConversionStats& s) {
  return "{clamped " + std::to_string(s.clamped) + ", overflowed " + std::to_string(s.overflowed) +
         ", flushed " + std::to_string(s.flushed_to_zero) + "}";
}

struct Conversion {
  const char* name;
  int from;
  int to;
  bool clamp;
};

size_t SizeOf(int type) { return type == kOnnxFloat ? 4 : 2; }

// The first element whose bytes differ, or n.
size_t FirstDifference(const std::vector<char>& a, const std::vector<char>& b, size_t size) {
  for (size_t i = 0; i < a.size() / size; ++i) {
    if (std::memcmp(a.data() + i * size, b.data() + i * size, size) != 0) return i;
  }
  return a.size() / size;
}

std::string Hex(const char* p, size_t size) {
  uint32_t v = 0;
  std::memcpy(&v, p, size);
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", static_cast<int>(2 * size), v);
  return buf;
}

std::vector<char> Convert(FloatPath path, const Conversion& c, const std::vector<char>& in,
                          ConversionStats& stats) {
  const size_t n = in.size() / SizeOf(c.from);
  std::vector<char> out(n * SizeOf(c.to));
  if (!ConvertFloats(path, in.data(), c.from, out.data(), c.to, n, c.clamp, stats)) out.clear();
  return out;
}

// `got` (from `path`) against `want` (from the scalar path); "" when they agree bit for bit and
// count alike.
std::string Compare(FloatPath path, const Conversion& c, const std::vector<char>& in,
                    const std::vector<char>& want, const ConversionStats& want_stats) {
  ConversionStats got_stats;
  const std::vector<char> got = Convert(path, c, in, got_stats);
  if (got.size() != want.size()) return "conversion refused";
  if (got != want) {
    const size_t i = FirstDifference(want, got, SizeOf(c.to));
    return std::string(FloatPathName(path)) + " on input " +
           Hex(in.data() + i * SizeOf(c.from), SizeOf(c.from)) + ": scalar " +
           Hex(want.data() + i * SizeOf(c.to), SizeOf(c.to)) + ", " +
           Hex(got.data() + i * SizeOf(c.to), SizeOf(c.to));
  }
  if (!(want_stats == got_stats)) {
    return std::string(FloatPathName(path)) + " counts " + ToString(got_stats) + ", scalar " +
           ToString(want_stats);
  }
  return "";
}

std::string Compare(FloatPath path, const Conversion& c, const std::vector<char>& in) {
  ConversionStats want_stats;
  const std::vector<char> want = Convert(FloatPath::kScalar, c, in, want_stats);
  return Compare(path, c, in, want, want_stats);
}

std::vector<FloatPath> FastPaths() {
  std::vector<FloatPath> paths;
  for (FloatPath path : {FloatPath::kAvx2F16c, FloatPath::kAvx512}) {
    if (FloatPathAvailable(path)) {
      paths.push_back(path);
    } else {
      std::printf("not tested: this CPU lacks the %s instructions\n", FloatPathName(path));
    }
  }
  return paths;
}

// Every FP32 bit pattern through every fast path against one scalar run, in chunks over all
// cores (the scalar run is most of the time, so each test takes all paths).
std::string CompareAllFloats(const std::vector<FloatPath>& paths, const Conversion& c) {
  constexpr uint64_t kChunk = uint64_t{1} << 22;
  std::atomic<uint64_t> next{0};
  std::vector<std::string> failures(std::max(2u, std::thread::hardware_concurrency()));
  auto work = [&](std::string& failure) {
    std::vector<char> in(kChunk * 4);
    for (uint64_t begin;
         failure.empty() && (begin = next.fetch_add(kChunk)) < (uint64_t{1} << 32);) {
      for (uint64_t i = 0; i < kChunk; ++i) {
        const auto bits = static_cast<uint32_t>(begin + i);
        std::memcpy(in.data() + 4 * i, &bits, 4);
      }
      ConversionStats want_stats;
      const std::vector<char> want = Convert(FloatPath::kScalar, c, in, want_stats);
      for (FloatPath path : paths) {
        if (failure.empty()) failure = Compare(path, c, in, want, want_stats);
      }
    }
  };
  std::vector<std::thread> threads;
  for (std::string& failure : failures) threads.emplace_back(work, std::ref(failure));
  for (std::thread& t : threads) t.join();
  for (const std::string& failure : failures) {
    if (!failure.empty()) return failure;
  }
  return "";
}

class ConvertFloatsExhaustiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    paths_ = FastPaths();
    if (paths_.empty())
      GTEST_SKIP() << "this CPU has no vector path to compare with the scalar one";
  }
  std::vector<FloatPath> paths_;
};

TEST_F(ConvertFloatsExhaustiveTest, EveryFloatToHalfClampedMatchesScalar) {
  EXPECT_EQ(CompareAllFloats(paths_, {"fp32->fp16", kOnnxFloat, kOnnxFloat16, true}), "");
}

TEST_F(ConvertFloatsExhaustiveTest, EveryFloatToHalfUnclampedMatchesScalar) {
  EXPECT_EQ(CompareAllFloats(paths_, {"fp32->fp16", kOnnxFloat, kOnnxFloat16, false}), "");
}

TEST_F(ConvertFloatsExhaustiveTest, EveryFloatToBFloat16MatchesScalar) {
  EXPECT_EQ(CompareAllFloats(paths_, {"fp32->bf16", kOnnxFloat, kOnnxBFloat16, false}), "");
}

std::vector<char> AllHalfPatterns() {
  std::vector<char> in(2 << 16);
  for (uint32_t i = 0; i < (1u << 16); ++i) {
    const auto bits = static_cast<uint16_t>(i);
    std::memcpy(in.data() + 2 * i, &bits, 2);
  }
  return in;
}

class ConvertFloatsPathTest : public ::testing::TestWithParam<FloatPath> {
 protected:
  void SetUp() override {
    if (!FloatPathAvailable(GetParam())) {
      GTEST_SKIP() << "this CPU lacks the " << FloatPathName(GetParam()) << " instructions";
    }
  }
};

TEST_P(ConvertFloatsPathTest, Every16BitPatternMatchesScalar) {
  const std::vector<char> in = AllHalfPatterns();
  for (const Conversion& c : {Conversion{"fp16->fp32", kOnnxFloat16, kOnnxFloat, false},
                              Conversion{"bf16->fp32", kOnnxBFloat16, kOnnxFloat, false},
                              Conversion{"fp16->bf16", kOnnxFloat16, kOnnxBFloat16, false},
                              Conversion{"bf16->fp16", kOnnxBFloat16, kOnnxFloat16, false},
                              Conversion{"bf16->fp16 clamped", kOnnxBFloat16, kOnnxFloat16, true},
                              Conversion{"fp16->fp16", kOnnxFloat16, kOnnxFloat16, false}}) {
    EXPECT_EQ(Compare(GetParam(), c, in), "") << c.name;
  }
}

// Lengths that leave tails, and sources and destinations off any alignment.
TEST_P(ConvertFloatsPathTest, UnalignedSpansAndTailsMatchScalar) {
  std::mt19937 random(7);
  std::vector<char> bytes(4 * 1000 + 3);
  for (char& b : bytes) b = static_cast<char>(random());
  for (size_t offset : {0, 1, 2, 3}) {
    for (size_t n : {0, 1, 7, 15, 17, 33, 999}) {
      const std::vector<char> in(bytes.begin() + offset, bytes.begin() + offset + 4 * n);
      EXPECT_EQ(Compare(GetParam(), {"fp32->fp16", kOnnxFloat, kOnnxFloat16, true}, in), "") << n;
      EXPECT_EQ(Compare(GetParam(), {"fp32->bf16", kOnnxFloat, kOnnxBFloat16, false}, in), "") << n;
      EXPECT_EQ(Compare(GetParam(), {"fp16->fp32", kOnnxFloat16, kOnnxFloat, false}, in), "") << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, ConvertFloatsPathTest,
                         ::testing::Values(FloatPath::kAvx2F16c, FloatPath::kAvx512),
                         [](const auto& info) {
                           return info.param == FloatPath::kAvx512 ? "Avx512" : "Avx2F16c";
                         });

TEST(ConvertFloatsTest, CountsClampsOverflowsAndFlushes) {
  const float in[] = {70000.0f, -1e5f, 65519.0f, 1e-8f, -0.0f, 0.0f, 1.0f};
  uint16_t out[7];
  ConversionStats clamped;
  ASSERT_TRUE(ConvertFloats(in, kOnnxFloat, out, kOnnxFloat16, 7, true, clamped));
  EXPECT_EQ(out[0], 0x7bff);
  EXPECT_EQ(out[1], 0xfbff);
  EXPECT_EQ(out[4], 0x8000);
  EXPECT_EQ(ToString(clamped), ToString({3, 0, 1}));
  ConversionStats unclamped;
  ASSERT_TRUE(ConvertFloats(in, kOnnxFloat, out, kOnnxFloat16, 7, false, unclamped));
  EXPECT_EQ(out[0], 0x7c00);
  EXPECT_EQ(out[1], 0xfc00);
  EXPECT_EQ(out[2], 0x7bff);
  EXPECT_EQ(ToString(unclamped), ToString({0, 2, 1}));
}

TEST(ConvertFloatsTest, RefusesOtherTypes) {
  float in = 1, out = 0;
  ConversionStats stats;
  EXPECT_FALSE(ConvertFloats(&in, 11 /*DOUBLE*/, &out, kOnnxFloat, 1, false, stats));
  EXPECT_FALSE(ConvertFloatsParallel(&in, kOnnxFloat, &out, 6 /*INT32*/, 1, false, stats, 2));
}

TEST(ConvertFloatsTest, SplitOverThreadsChangesNothing) {
  std::mt19937 random(11);
  std::vector<uint32_t> in(100003);
  for (uint32_t& bits : in) bits = random();
  std::vector<uint16_t> one(in.size()), split(in.size());
  ConversionStats one_stats;
  ASSERT_TRUE(
      ConvertFloats(in.data(), kOnnxFloat, one.data(), kOnnxFloat16, in.size(), true, one_stats));
  for (int threads : {1, 2, 3, 8}) {
    ConversionStats split_stats;
    ASSERT_TRUE(ConvertFloatsParallel(in.data(), kOnnxFloat, split.data(), kOnnxFloat16, in.size(),
                                      true, split_stats, threads));
    EXPECT_EQ(one, split) << threads;
    EXPECT_EQ(ToString(one_stats), ToString(split_stats)) << threads;
  }
}

}  // namespace
}  // namespace ampc
