// The AVX-512 and AVX2 + F16C loops of convert_floats.h. Each function carries its own target
// attribute, so the file builds for baseline x86-64 and runs only where the CPU reports the
// instructions. FP16 rounds with VCVTPS2PH (ties to even, subnormals exact, NaNs quieted with
// their leading payload: FloatToHalf's results); BF16 rounds in integers, as FloatToBFloat16
// does (VCVTNEPS2BF16 would flush subnormal inputs). The counts come from the FP32 magnitude.
#include "kernels/numerics/convert_floats_kernels.h"

#if defined(__x86_64__)
#include <cpuid.h>

// GCC 12's AVX-512 intrinsics start from a self-initialised _mm512_undefined_*() and so warn
// "may be used uninitialized" once inlined (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#define AMPC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,popcnt")))
#define AMPC_AVX2 __attribute__((target("avx2,f16c,popcnt")))

namespace ampc::convert_floats {
namespace {

constexpr int kAbs = 0x7fffffff;
constexpr int kInf = 0x7f800000;
constexpr int kHalfMax = 0x477fe000;       // 65504
constexpr int kHalfOverflow = 0x477ff000;  // 65520: from here on FP16 rounds to infinity
constexpr int kHalfFlush = 0x33000000;     // 2^-25: up to here FP16 rounds to zero
constexpr int kBf16Overflow = 0x7f7f8000;
constexpr int kBf16Flush = 0x00008000;
constexpr int kHalfQuietBitAsFloat = 0x00400000;

const char* Bytes(const void* p) { return static_cast<const char*>(p); }
char* Bytes(void* p) { return static_cast<char*>(p); }

AMPC_AVX512 void CountAvx512(__m512i magnitude, int overflow, int flush, ConversionStats& c) {
  const __mmask16 finite = _mm512_cmplt_epu32_mask(magnitude, _mm512_set1_epi32(kInf));
  const __mmask16 over =
      _mm512_mask_cmpge_epu32_mask(finite, magnitude, _mm512_set1_epi32(overflow));
  // 0 < magnitude <= flush, as magnitude - 1 < flush unsigned.
  const __mmask16 flushed = _mm512_cmplt_epu32_mask(
      _mm512_sub_epi32(magnitude, _mm512_set1_epi32(1)), _mm512_set1_epi32(flush));
  c.overflowed += _mm_popcnt_u32(over);
  c.flushed_to_zero += _mm_popcnt_u32(flushed);
}

AMPC_AVX512 void NarrowHalfAvx512(const void* in, void* out, size_t n, bool clamp,
                                  ConversionStats& stats) {
  const __m512i abs = _mm512_set1_epi32(kAbs);
  const __m512i max = _mm512_set1_epi32(kHalfMax);
  ConversionStats c;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i x = _mm512_loadu_si512(Bytes(in) + 4 * i);
    __m512i m = _mm512_and_si512(x, abs);
    if (clamp) {
      const __mmask16 big =
          _mm512_cmpgt_epu32_mask(m, max) & _mm512_cmplt_epu32_mask(m, _mm512_set1_epi32(kInf));
      x = _mm512_mask_or_epi32(x, big, _mm512_andnot_si512(abs, x), max);
      m = _mm512_mask_mov_epi32(m, big, max);
      c.clamped += _mm_popcnt_u32(big);
    }
    CountAvx512(m, kHalfOverflow, kHalfFlush, c);
    const __m256i h =
        _mm512_cvtps_ph(_mm512_castsi512_ps(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(Bytes(out) + 2 * i), h);
  }
  NarrowHalfScalar(Bytes(in) + 4 * i, Bytes(out) + 2 * i, n - i, clamp, c);
  Add(stats, c);
}

AMPC_AVX512 void NarrowBFloat16Avx512(const void* in, void* out, size_t n, ConversionStats& stats) {
  ConversionStats c;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i x = _mm512_loadu_si512(Bytes(in) + 4 * i);
    const __m512i m = _mm512_and_si512(x, _mm512_set1_epi32(kAbs));
    const __m512i high = _mm512_srli_epi32(x, 16);
    const __m512i lsb = _mm512_and_si512(high, _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb);
    r = _mm512_srli_epi32(r, 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(m, _mm512_set1_epi32(kInf));
    r = _mm512_mask_or_epi32(r, nan, high, _mm512_set1_epi32(0x40));
    CountAvx512(m, kBf16Overflow, kBf16Flush, c);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(Bytes(out) + 2 * i), _mm512_cvtepi32_epi16(r));
  }
  NarrowBFloat16Scalar(Bytes(in) + 4 * i, Bytes(out) + 2 * i, n - i, c);
  Add(stats, c);
}

// VCVTPH2PS quiets signalling NaNs; HalfToFloat keeps them signalling.
AMPC_AVX512 void WidenHalfAvx512(const void* in, void* out, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(Bytes(in) + 2 * i));
    const __m256i hm = _mm256_and_si256(h, _mm256_set1_epi16(0x7fff));
    const __mmask16 signalling = _mm256_cmpgt_epu16_mask(hm, _mm256_set1_epi16(0x7c00)) &
                                 _mm256_cmplt_epu16_mask(hm, _mm256_set1_epi16(0x7e00));
    __m512i f = _mm512_castps_si512(_mm512_cvtph_ps(h));
    f = _mm512_mask_and_epi32(f, signalling, f, _mm512_set1_epi32(~kHalfQuietBitAsFloat));
    _mm512_storeu_si512(Bytes(out) + 4 * i, f);
  }
  WidenHalfScalar(Bytes(in) + 2 * i, Bytes(out) + 4 * i, n - i);
}

AMPC_AVX512 void WidenBFloat16Avx512(const void* in, void* out, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(Bytes(in) + 2 * i));
    _mm512_storeu_si512(Bytes(out) + 4 * i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
  }
  WidenBFloat16Scalar(Bytes(in) + 2 * i, Bytes(out) + 4 * i, n - i);
}

AMPC_AVX2 int64_t Popcount(__m256i mask) {
  return _mm_popcnt_u32(static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(mask))));
}

// Signed compares suffice: magnitudes are below 2^31.
AMPC_AVX2 void CountAvx2(__m256i magnitude, int overflow, int flush, ConversionStats& c) {
  const __m256i finite = _mm256_cmpgt_epi32(_mm256_set1_epi32(kInf), magnitude);
  const __m256i over = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(overflow - 1));
  const __m256i flushed =
      _mm256_and_si256(_mm256_cmpgt_epi32(magnitude, _mm256_setzero_si256()),
                       _mm256_cmpgt_epi32(_mm256_set1_epi32(flush + 1), magnitude));
  c.overflowed += Popcount(_mm256_and_si256(finite, over));
  c.flushed_to_zero += Popcount(flushed);
}

AMPC_AVX2 void NarrowHalfAvx2(const void* in, void* out, size_t n, bool clamp,
                              ConversionStats& stats) {
  const __m256i abs = _mm256_set1_epi32(kAbs);
  const __m256i max = _mm256_set1_epi32(kHalfMax);
  ConversionStats c;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(Bytes(in) + 4 * i));
    __m256i m = _mm256_and_si256(x, abs);
    if (clamp) {
      const __m256i big = _mm256_and_si256(_mm256_cmpgt_epi32(m, max),
                                           _mm256_cmpgt_epi32(_mm256_set1_epi32(kInf), m));
      x = _mm256_blendv_epi8(x, _mm256_or_si256(_mm256_andnot_si256(abs, x), max), big);
      m = _mm256_blendv_epi8(m, max, big);
      c.clamped += Popcount(big);
    }
    CountAvx2(m, kHalfOverflow, kHalfFlush, c);
    const __m128i h = _mm256_cvtps_ph(_mm256_castsi256_ps(x), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(Bytes(out) + 2 * i), h);
  }
  NarrowHalfScalar(Bytes(in) + 4 * i, Bytes(out) + 2 * i, n - i, clamp, c);
  Add(stats, c);
}

AMPC_AVX2 void NarrowBFloat16Avx2(const void* in, void* out, size_t n, ConversionStats& stats) {
  ConversionStats c;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(Bytes(in) + 4 * i));
    const __m256i m = _mm256_and_si256(x, _mm256_set1_epi32(kAbs));
    const __m256i high = _mm256_srli_epi32(x, 16);
    const __m256i lsb = _mm256_and_si256(high, _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb);
    r = _mm256_srli_epi32(r, 16);
    const __m256i nan = _mm256_cmpgt_epi32(m, _mm256_set1_epi32(kInf));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(high, _mm256_set1_epi32(0x40)), nan);
    CountAvx2(m, kBf16Overflow, kBf16Flush, c);
    const __m128i b = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(Bytes(out) + 2 * i), b);
  }
  NarrowBFloat16Scalar(Bytes(in) + 4 * i, Bytes(out) + 2 * i, n - i, c);
  Add(stats, c);
}

AMPC_AVX2 void WidenHalfAvx2(const void* in, void* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(Bytes(in) + 2 * i));
    const __m128i hm = _mm_and_si128(h, _mm_set1_epi16(0x7fff));
    const __m128i signalling = _mm_and_si128(_mm_cmpgt_epi16(hm, _mm_set1_epi16(0x7c00)),
                                             _mm_cmplt_epi16(hm, _mm_set1_epi16(0x7e00)));
    const __m256i quiet = _mm256_and_si256(_mm256_cvtepi16_epi32(signalling),
                                           _mm256_set1_epi32(kHalfQuietBitAsFloat));
    const __m256 f = _mm256_andnot_ps(_mm256_castsi256_ps(quiet), _mm256_cvtph_ps(h));
    _mm256_storeu_ps(reinterpret_cast<float*>(Bytes(out) + 4 * i), f);
  }
  WidenHalfScalar(Bytes(in) + 2 * i, Bytes(out) + 4 * i, n - i);
}

AMPC_AVX2 void WidenBFloat16Avx2(const void* in, void* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(Bytes(in) + 2 * i));
    const __m256i f = _mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(Bytes(out) + 4 * i), f);
  }
  WidenBFloat16Scalar(Bytes(in) + 2 * i, Bytes(out) + 4 * i, n - i);
}

// F16C from CPUID: clang 14's __builtin_cpu_supports does not know "f16c" (as in half.cc).
bool HasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}

constexpr Kernels kAvx512{NarrowHalfAvx512, NarrowBFloat16Avx512, WidenHalfAvx512,
                          WidenBFloat16Avx512};
constexpr Kernels kAvx2F16c{NarrowHalfAvx2, NarrowBFloat16Avx2, WidenHalfAvx2, WidenBFloat16Avx2};

}  // namespace

const Kernels* Avx512Kernels() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("popcnt");
  return has ? &kAvx512 : nullptr;
}

const Kernels* Avx2F16cKernels() {
  static const bool has =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt") && HasF16c();
  return has ? &kAvx2F16c : nullptr;
}

}  // namespace ampc::convert_floats

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#else  // not x86-64

namespace ampc::convert_floats {

const Kernels* Avx512Kernels() { return nullptr; }
const Kernels* Avx2F16cKernels() { return nullptr; }

}  // namespace ampc::convert_floats

#endif
