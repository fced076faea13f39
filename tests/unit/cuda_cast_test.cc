// The GPU casts against the CPU conversions, bit for bit (NaNs by NaN-ness: the hardware returns
// a canonical NaN). Skips where the CUDA backend is not built or no GPU is present.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <utility>
#include <vector>

#include "kernels/numerics/half.h"

#ifdef AMPC_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/cuda/cast.h"
#include "runtime/core/cuda_device.h"
#endif

namespace ampc {
namespace {

enum class Format { kHalf, kBFloat16 };

const char* Name(Format format) { return format == Format::kHalf ? "Half" : "BFloat16"; }
void PrintTo(Format format, std::ostream* os) { *os << Name(format); }

#ifdef AMPC_HAVE_CUDA
constexpr int kGuard = 16;  // elements either side of the output that must stay untouched

template <typename In, typename Out>
using CastFn = cudaError_t (*)(const In*, Out*, int64_t, cudaStream_t);

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : size_(n) {
    void* data = nullptr;
    EXPECT_EQ(cudaMalloc(&data, n * sizeof(T)), cudaSuccess);
    data_ = static_cast<T*>(data);
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  T* data_ = nullptr;
  size_t size_;
};

// Casts `in` on the GPU with the device buffers shifted by `in_offset` and `out_offset` elements,
// and checks that nothing outside the output range was written.
template <typename In, typename Out>
std::vector<Out> RunCast(CastFn<In, Out> cast, const std::vector<In>& in, int in_offset,
                         int out_offset) {
  const size_t n = in.size();
  DeviceBuffer<In> d_in(in_offset + n + 1);
  DeviceBuffer<Out> d_out(kGuard + out_offset + n + kGuard);
  if (n > 0) {
    EXPECT_EQ(
        cudaMemcpy(d_in.data() + in_offset, in.data(), n * sizeof(In), cudaMemcpyHostToDevice),
        cudaSuccess);
  }
  EXPECT_EQ(cudaMemset(d_out.data(), 0xab, d_out.size() * sizeof(Out)), cudaSuccess);
  EXPECT_EQ(cast(d_in.data() + in_offset, d_out.data() + kGuard + out_offset, n, nullptr),
            cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<Out> all(d_out.size());
  EXPECT_EQ(cudaMemcpy(all.data(), d_out.data(), all.size() * sizeof(Out), cudaMemcpyDeviceToHost),
            cudaSuccess);
  Out sentinel;
  std::memset(&sentinel, 0xab, sizeof(Out));
  const size_t begin = kGuard + out_offset;
  for (size_t i = 0; i < all.size(); ++i) {
    if (i >= begin && i < begin + n) continue;
    EXPECT_EQ(std::memcmp(&all[i], &sentinel, sizeof(Out)), 0)
        << "wrote outside the output at " << i;
  }
  return {all.begin() + begin, all.begin() + begin + n};
}
#endif

std::vector<uint16_t> NarrowOnGpu(Format format, const std::vector<float>& in, int in_offset = 0,
                                  int out_offset = 0) {
#ifdef AMPC_HAVE_CUDA
  return RunCast(format == Format::kHalf ? CastFloatToHalf : CastFloatToBFloat16, in, in_offset,
                 out_offset);
#else
  return {};
#endif
}

std::vector<float> WidenOnGpu(Format format, const std::vector<uint16_t>& in, int in_offset = 0,
                              int out_offset = 0) {
#ifdef AMPC_HAVE_CUDA
  return RunCast(format == Format::kHalf ? CastHalfToFloat : CastBFloat16ToFloat, in, in_offset,
                 out_offset);
#else
  return {};
#endif
}

std::vector<uint16_t> NarrowOnCpu(Format format, const std::vector<float>& in) {
  std::vector<uint16_t> out(in.size());
  format == Format::kHalf ? FloatToHalf(in, out) : FloatToBFloat16(in, out);
  return out;
}

std::vector<float> WidenOnCpu(Format format, const std::vector<uint16_t>& in) {
  std::vector<float> out(in.size());
  format == Format::kHalf ? HalfToFloat(in, out) : BFloat16ToFloat(in, out);
  return out;
}

bool IsNaN(Format format, uint16_t bits) {
  return (bits & 0x7fffu) > (format == Format::kHalf ? 0x7c00u : 0x7f80u);
}

// The index of the first element where the GPU and the CPU disagree, or -1.
int64_t FirstMismatch(Format format, const std::vector<uint16_t>& gpu,
                      const std::vector<uint16_t>& cpu) {
  if (gpu.size() != cpu.size()) return 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    if (gpu[i] != cpu[i] && !(IsNaN(format, gpu[i]) && IsNaN(format, cpu[i])))
      return static_cast<int64_t>(i);
  }
  return -1;
}

int64_t FirstMismatch(const std::vector<float>& gpu, const std::vector<float>& cpu) {
  if (gpu.size() != cpu.size()) return 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    const bool same = std::bit_cast<uint32_t>(gpu[i]) == std::bit_cast<uint32_t>(cpu[i]);
    if (!same && !(std::isnan(gpu[i]) && std::isnan(cpu[i]))) return static_cast<int64_t>(i);
  }
  return -1;
}

std::vector<uint16_t> EveryPattern() {
  std::vector<uint16_t> patterns(65536);
  for (uint32_t i = 0; i < patterns.size(); ++i) patterns[i] = static_cast<uint16_t>(i);
  return patterns;
}

// Every value of the format, the ties between neighbours, and random bit patterns.
std::vector<float> FloatCorpus(Format format, size_t random_count) {
  std::vector<float> floats = WidenOnCpu(format, EveryPattern());
  for (size_t i = 0; i + 1 < 65536; ++i) {
    if (std::isfinite(floats[i]) && std::isfinite(floats[i + 1])) {
      floats.push_back(static_cast<float>((double{floats[i]} + double{floats[i + 1]}) / 2));
    }
  }
  std::mt19937 rng(20240607);
  for (size_t i = 0; i < random_count; ++i) {
    floats.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  }
  return floats;
}

class CudaCastTest : public testing::TestWithParam<Format> {
 protected:
  void SetUp() override {
#ifdef AMPC_HAVE_CUDA
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA GPU found";
#else
    GTEST_SKIP() << "CUDA backend not built";
#endif
  }
};

TEST_P(CudaCastTest, WidenMatchesCpuForEveryPattern) {
  const std::vector<uint16_t> patterns = EveryPattern();
  EXPECT_EQ(FirstMismatch(WidenOnGpu(GetParam(), patterns), WidenOnCpu(GetParam(), patterns)), -1);
}

TEST_P(CudaCastTest, NarrowMatchesCpuOnValuesTiesAndRandomFloats) {
  const std::vector<float> floats = FloatCorpus(GetParam(), 4'000'000);
  EXPECT_EQ(
      FirstMismatch(GetParam(), NarrowOnGpu(GetParam(), floats), NarrowOnCpu(GetParam(), floats)),
      -1);
}

// Sizes around the 8-element vector step, and offsets that leave both buffers equally
// misaligned (vector path after a scalar head) or differently misaligned (all scalar).
TEST_P(CudaCastTest, OddSizesAndMisalignedBuffers) {
  const Format format = GetParam();
  const std::vector<float> corpus = FloatCorpus(format, 1'000'003);
  for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{15}, size_t{17}, size_t{4099},
                   corpus.size()}) {
    const std::vector<float> floats(corpus.begin(), corpus.begin() + n);
    const std::vector<uint16_t> narrow = NarrowOnCpu(format, floats);
    for (auto [in_offset, out_offset] : {std::pair{0, 0}, {1, 1}, {2, 2}, {1, 0}, {0, 1}, {3, 5}}) {
      SCOPED_TRACE(testing::Message()
                   << "n=" << n << " offsets " << in_offset << "," << out_offset);
      EXPECT_EQ(FirstMismatch(format, NarrowOnGpu(format, floats, in_offset, out_offset), narrow),
                -1);
      EXPECT_EQ(FirstMismatch(WidenOnGpu(format, narrow, in_offset, out_offset),
                              WidenOnCpu(format, narrow)),
                -1);
    }
  }
}

TEST_P(CudaCastTest, EmptyInputIsANoOp) {
  EXPECT_TRUE(NarrowOnGpu(GetParam(), {}).empty());
  EXPECT_TRUE(WidenOnGpu(GetParam(), {}).empty());
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaCastTest, testing::Values(Format::kHalf, Format::kBFloat16),
                         [](const testing::TestParamInfo<Format>& info) {
                           return Name(info.param);
                         });

}  // namespace
}  // namespace ampc
