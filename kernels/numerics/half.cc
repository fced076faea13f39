#include "kernels/numerics/half.h"

#include <cassert>
#include <cstddef>

#include "kernels/numerics/convert_floats_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define AMPC_HALF_F16C 1
#endif

namespace ampc {
namespace {

template <typename In, typename Out, typename Convert>
void ConvertAll(std::span<const In> in, std::span<Out> out, Convert convert) {
  assert(out.size() >= in.size());
  const size_t n = in.size();
  const In* src = in.data();
  Out* dst = out.data();
  for (size_t i = 0; i < n; ++i) dst[i] = convert(src[i]);
}

#ifdef AMPC_HALF_F16C
// F16C (x86 since 2012) converts 8 values per instruction, rounding to nearest even as ours do.
// Chosen at run time: the build targets baseline x86-64. Both instructions ignore MXCSR's DAZ
// and FTZ here (see half_test.cc), so results match the scalar code bit for bit, except that
// VCVTPH2PS quiets signalling NaNs: blocks holding one are redone by the scalar code.
// F16C is read from CPUID: clang 14's __builtin_cpu_supports does not know "f16c".
bool HasF16c() {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    return __builtin_cpu_supports("avx") && (ecx & bit_F16C) != 0;
  }();
  return has;
}

__attribute__((target("avx,f16c"))) void HalfToFloatF16c(const uint16_t* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
    // Signalling NaN: magnitude in (0x7c00, 0x7e00), the quiet bit clear.
    const __m128i magnitude = _mm_and_si128(h, _mm_set1_epi16(0x7fff));
    const __m128i signalling = _mm_and_si128(_mm_cmpgt_epi16(magnitude, _mm_set1_epi16(0x7c00)),
                                             _mm_cmplt_epi16(magnitude, _mm_set1_epi16(0x7e00)));
    if (_mm_movemask_epi8(signalling) != 0) {
      for (size_t j = i; j < i + 8; ++j) out[j] = HalfToFloat(in[j]);
    }
  }
  for (; i < n; ++i) out[i] = HalfToFloat(in[i]);
}

__attribute__((target("avx,f16c"))) void FloatToHalfF16c(const float* in, uint16_t* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = FloatToHalf(in[i]);
}
#endif

}  // namespace

void HalfToFloat(std::span<const uint16_t> in, std::span<float> out) {
#ifdef AMPC_HALF_F16C
  if (HasF16c()) {
    assert(out.size() >= in.size());
    return HalfToFloatF16c(in.data(), out.data(), in.size());
  }
#endif
  ConvertAll(in, out, [](uint16_t h) { return HalfToFloat(h); });
}

void FloatToHalf(std::span<const float> in, std::span<uint16_t> out) {
#ifdef AMPC_HALF_F16C
  if (HasF16c()) {
    assert(out.size() >= in.size());
    return FloatToHalfF16c(in.data(), out.data(), in.size());
  }
#endif
  ConvertAll(in, out, [](float f) { return FloatToHalf(f); });
}

namespace {

// BF16 through convert_floats' vector loops (bit for bit the scalar conversions, tested over every
// FP32 pattern), AVX-512 before AVX2; both leave the lanes' scalar tails to the scalar code.
const convert_floats::Kernels* BFloat16Kernels() {
  static const convert_floats::Kernels* kernels = [] {
    const convert_floats::Kernels* k = convert_floats::Avx512Kernels();
    return k != nullptr ? k : convert_floats::Avx2F16cKernels();
  }();
  return kernels;
}

}  // namespace

void BFloat16ToFloat(std::span<const uint16_t> in, std::span<float> out) {
  assert(out.size() >= in.size());
  if (const convert_floats::Kernels* k = BFloat16Kernels()) {
    return k->widen_bfloat16(in.data(), out.data(), in.size());
  }
  ConvertAll(in, out, [](uint16_t b) { return BFloat16ToFloat(b); });
}

void FloatToBFloat16(std::span<const float> in, std::span<uint16_t> out) {
  assert(out.size() >= in.size());
  if (const convert_floats::Kernels* k = BFloat16Kernels()) {
    ConversionStats unused;
    return k->narrow_bfloat16(in.data(), out.data(), in.size(), unused);
  }
  ConvertAll(in, out, [](float f) { return FloatToBFloat16(f); });
}

}  // namespace ampc
