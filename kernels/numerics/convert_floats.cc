#include "kernels/numerics/convert_floats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/numerics/convert_floats_kernels.h"
#include "kernels/numerics/float16.h"

namespace ampc {
namespace convert_floats {
namespace {

constexpr float kFp16Max = 65504.0f;

template <typename T>
T Load(const void* p, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(p) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void Store(void* p, size_t i, T v) {
  std::memcpy(static_cast<char*>(p) + i * sizeof(T), &v, sizeof(T));
}

// `v` narrowed to `bits`; `infinity` is the format's +inf. Reading the bits is reading the value
// widened back: ±0 and ±inf are the only values with those magnitudes.
void Count(float v, uint16_t bits, uint16_t infinity, ConversionStats& stats) {
  const uint16_t magnitude = bits & 0x7fffu;
  if (std::isfinite(v) && magnitude == infinity) ++stats.overflowed;
  if (v != 0 && magnitude == 0) ++stats.flushed_to_zero;
}

}  // namespace

void NarrowHalfScalar(const void* in, void* out, size_t n, bool clamp, ConversionStats& stats) {
  ConversionStats counts;
  for (size_t i = 0; i < n; ++i) {
    float v = Load<float>(in, i);
    if (clamp && std::isfinite(v) && std::fabs(v) > kFp16Max) {
      v = std::copysign(kFp16Max, v);
      ++counts.clamped;
    }
    const uint16_t bits = FloatToHalf(v);
    Count(v, bits, 0x7c00u, counts);
    Store(out, i, bits);
  }
  Add(stats, counts);
}

void NarrowBFloat16Scalar(const void* in, void* out, size_t n, ConversionStats& stats) {
  ConversionStats counts;
  for (size_t i = 0; i < n; ++i) {
    const float v = Load<float>(in, i);
    const uint16_t bits = FloatToBFloat16(v);
    Count(v, bits, 0x7f80u, counts);
    Store(out, i, bits);
  }
  Add(stats, counts);
}

void WidenHalfScalar(const void* in, void* out, size_t n) {
  for (size_t i = 0; i < n; ++i) Store(out, i, HalfToFloat(Load<uint16_t>(in, i)));
}

void WidenBFloat16Scalar(const void* in, void* out, size_t n) {
  for (size_t i = 0; i < n; ++i) Store(out, i, BFloat16ToFloat(Load<uint16_t>(in, i)));
}

}  // namespace convert_floats

namespace {

using convert_floats::Kernels;

constexpr Kernels kScalarKernels{
    convert_floats::NarrowHalfScalar, convert_floats::NarrowBFloat16Scalar,
    convert_floats::WidenHalfScalar, convert_floats::WidenBFloat16Scalar};

const Kernels* KernelsOf(FloatPath path) {
  switch (path) {
    case FloatPath::kScalar:
      return &kScalarKernels;
    case FloatPath::kAvx2F16c:
      return convert_floats::Avx2F16cKernels();
    case FloatPath::kAvx512:
      return convert_floats::Avx512Kernels();
  }
  return nullptr;
}

FloatPath BestPath() {
  static const FloatPath best = FloatPathAvailable(FloatPath::kAvx512)     ? FloatPath::kAvx512
                                : FloatPathAvailable(FloatPath::kAvx2F16c) ? FloatPath::kAvx2F16c
                                                                           : FloatPath::kScalar;
  return best;
}

bool IsFloatType(int type) {
  return type == kOnnxFloat || type == kOnnxFloat16 || type == kOnnxBFloat16;
}

size_t SizeOf(int type) { return type == kOnnxFloat ? 4 : 2; }

void Narrow(const Kernels& k, const void* src, void* dst, int to, size_t n, bool clamp,
            ConversionStats& stats) {
  if (to == kOnnxFloat16) {
    k.narrow_half(src, dst, n, clamp, stats);
  } else {
    k.narrow_bfloat16(src, dst, n, stats);
  }
}

void Widen(const Kernels& k, const void* src, int from, void* dst, size_t n) {
  if (from == kOnnxFloat16) {
    k.widen_half(src, dst, n);
  } else {
    k.widen_bfloat16(src, dst, n);
  }
}

// 16 bit to 16 bit through FP32 in blocks that stay in L1.
void Convert16To16(const Kernels& k, const void* src, int from, void* dst, int to, size_t n,
                   bool clamp, ConversionStats& stats) {
  constexpr size_t kBlock = 2048;
  float block[kBlock];
  const auto* in = static_cast<const char*>(src);
  auto* out = static_cast<char*>(dst);
  for (size_t i = 0; i < n; i += kBlock) {
    const size_t m = std::min(kBlock, n - i);
    Widen(k, in + 2 * i, from, block, m);
    Narrow(k, block, out + 2 * i, to, m, clamp, stats);
  }
}

}  // namespace

bool FloatPathAvailable(FloatPath path) { return KernelsOf(path) != nullptr; }

const char* FloatPathName(FloatPath path) {
  switch (path) {
    case FloatPath::kScalar:
      return "scalar";
    case FloatPath::kAvx2F16c:
      return "avx2-f16c";
    case FloatPath::kAvx512:
      return "avx512";
  }
  return "?";
}

bool ConvertFloats(FloatPath path, const void* src, int from, void* dst, int to, size_t n,
                   bool clamp, ConversionStats& stats) {
  const Kernels* k = KernelsOf(path);
  if (k == nullptr || !IsFloatType(from) || !IsFloatType(to)) return false;
  if (n == 0) return true;
  if (from == kOnnxFloat && to == kOnnxFloat) {
    std::memcpy(dst, src, 4 * n);
  } else if (from == kOnnxFloat) {
    Narrow(*k, src, dst, to, n, clamp, stats);
  } else if (to == kOnnxFloat) {
    Widen(*k, src, from, dst, n);
  } else {
    Convert16To16(*k, src, from, dst, to, n, clamp, stats);
  }
  return true;
}

bool ConvertFloats(const void* src, int from, void* dst, int to, size_t n, bool clamp,
                   ConversionStats& stats) {
  return ConvertFloats(BestPath(), src, from, dst, to, n, clamp, stats);
}

bool ConvertFloatsParallel(const void* src, int from, void* dst, int to, size_t n, bool clamp,
                           ConversionStats& stats, int threads) {
  constexpr size_t kAlign = 64;  // elements: every thread's part starts on a cache line
  if (!IsFloatType(from) || !IsFloatType(to)) return false;
  const size_t parts = std::clamp<size_t>(threads, 1, std::max<size_t>(n / kAlign, 1));
  const size_t per = (n / parts + kAlign - 1) / kAlign * kAlign;
  std::vector<ConversionStats> counts(parts);
  std::vector<std::thread> workers;
  auto part = [&](size_t t) {
    const size_t begin = std::min(n, t * per);
    const size_t end = t + 1 == parts ? n : std::min(n, begin + per);
    const auto* in = static_cast<const char*>(src) + begin * SizeOf(from);
    auto* out = static_cast<char*>(dst) + begin * SizeOf(to);
    (void)ConvertFloats(in, from, out, to, end - begin, clamp, counts[t]);
  };
  for (size_t t = 1; t < parts; ++t) workers.emplace_back(part, t);
  part(0);
  for (std::thread& worker : workers) worker.join();
  for (const ConversionStats& c : counts) convert_floats::Add(stats, c);
  return true;
}

}  // namespace ampc
