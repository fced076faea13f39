// Blocked as GotoBLAS: B is packed a [kKc, kNc] block at a time into column panels of kNr, A a
// [kMc, kKc] block at a time into row panels of kMr, and a kMr x kNr micro-kernel keeps its tile
// of C in registers. Both are packed as pairs of consecutive k, the layout VDPBF16PS reads.
#include "kernels/cpu/gemm_bf16.h"

#if defined(__x86_64__)
#include <cpuid.h>

#include <algorithm>

// GCC 12's AVX-512 intrinsics warn "may be used uninitialized" once inlined (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "kernels/cpu/gemm_pack_x86.h"

#define AMPC_BF16_DOT __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace ampc::linalg {
namespace {

constexpr int64_t kMr = 8;    // rows of the micro-kernel's tile
constexpr int64_t kNr = 32;   // columns: two registers of 16 floats
constexpr int64_t kKc = 256;  // k per block (an even number: packed as pairs)
constexpr int64_t kMc = 128;
constexpr int64_t kNc = 1024;
constexpr GemmBlocking kBlocking{kMr, kNr, kKc, kMc, kNc, /*k_per_entry=*/2};

// Whether any of the rows x cols values at p (row stride ld) is an FP32 subnormal.
AMPC_BF16_DOT bool HasSubnormal(const float* p, int64_t rows, int64_t cols, int64_t ld) {
  const __m512i abs = _mm512_set1_epi32(0x7fffffff), one = _mm512_set1_epi32(1);
  const __m512i normal = _mm512_set1_epi32(0x00800000 - 1);
  __mmask16 found = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; j += 16) {
      const __mmask16 m = Mask16(cols - j);
      const __m512i u = _mm512_and_si512(_mm512_maskz_loadu_epi32(m, p + r * ld + j), abs);
      // 0 < u < 2^-126 as u - 1 < 0x7fffff unsigned.
      found |= _mm512_mask_cmplt_epu32_mask(m, _mm512_sub_epi32(u, one), normal);
    }
  }
  return found != 0;
}

// Word i of the result: the upper half of float i of lo (even i / 2) and of hi (odd i / 2), i.e.
// the BF16 pairs (lo[j], hi[j]) for j = 0..15.
AMPC_BF16_DOT __m512i InterleaveUpper(__m512 lo, __m512 hi) {
  alignas(64) static constexpr uint16_t kIndex[32] = {1,  33, 3,  35, 5,  37, 7,  39, 9,  41, 11,
                                                      43, 13, 45, 15, 47, 17, 49, 19, 51, 21, 53,
                                                      23, 55, 25, 57, 27, 59, 29, 61, 31, 63};
  return _mm512_permutex2var_epi16(_mm512_castps_si512(lo), _mm512_load_si512(kIndex),
                                   _mm512_castps_si512(hi));
}

// The upper halves of 16 consecutive floats as 8 pairs (words 1, 3, 5, ...) in the low 256 bits.
AMPC_BF16_DOT __m256i PairsOfConsecutive(__m512 v) {
  alignas(64) static constexpr uint16_t kIndex[32] = {1,  3,  5,  7,  9,  11, 13, 15,
                                                      17, 19, 21, 23, 25, 27, 29, 31};
  return _mm512_castsi512_si256(
      _mm512_permutexvar_epi16(_mm512_load_si512(kIndex), _mm512_castps_si512(v)));
}

// Packs rows x kc values of a matrix whose k runs along its rows (x[r * ld + p], r < rows) as
// `rows` sequences of (kc + 1) / 2 pairs, pair q of row r stored at out[q * stride + r]. Eight
// rows at a time go through a transpose, so each store writes 8 rows' pairs at once.
AMPC_BF16_DOT void PackAlongRows(const float* x, int64_t ld, int64_t rows, int64_t kc,
                                 int64_t stride, uint32_t* out) {
  const int64_t pairs = (kc + 1) / 2;
  int64_t r = 0;
  for (; r + 8 <= rows; r += 8) {
    for (int64_t p = 0; p < kc; p += 16) {
      __m256i block[8];
      for (int i = 0; i < 8; ++i) {
        block[i] = PairsOfConsecutive(_mm512_maskz_loadu_ps(Mask16(kc - p), x + (r + i) * ld + p));
      }
      Transpose8x8(block);
      const int64_t count = std::min<int64_t>(8, pairs - p / 2);
      for (int64_t t = 0; t < count; ++t) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (p / 2 + t) * stride + r), block[t]);
      }
    }
  }
  alignas(32) uint32_t packed[8];
  for (; r < rows; ++r) {
    for (int64_t p = 0; p < kc; p += 16) {
      const __m512 v = _mm512_maskz_loadu_ps(Mask16(kc - p), x + r * ld + p);
      _mm256_store_si256(reinterpret_cast<__m256i*>(packed), PairsOfConsecutive(v));
      const int64_t count = std::min<int64_t>(8, pairs - p / 2);
      for (int64_t t = 0; t < count; ++t) out[(p / 2 + t) * stride + r] = packed[t];
    }
  }
}

// Packs kc x cols values of a matrix whose k runs down its columns (x[p * ld + j], j < cols) as
// (kc + 1) / 2 rows of `width` pairs (zero past cols), row q at out + q * width.
AMPC_BF16_DOT void PackAlongColumns(const float* x, int64_t ld, int64_t kc, int64_t cols,
                                    int64_t width, uint32_t* out) {
  for (int64_t p = 0; p < kc; p += 2) {
    uint32_t* row = out + (p / 2) * width;
    const float* r0 = x + p * ld;
    const bool pair = p + 1 < kc;
    for (int64_t j = 0; j < width; j += 16) {
      const __mmask16 m = j < cols ? Mask16(cols - j) : 0;
      const __m512 lo = _mm512_maskz_loadu_ps(m, r0 + j);
      const __m512 hi = pair ? _mm512_maskz_loadu_ps(m, r0 + ld + j) : _mm512_setzero_ps();
      const __m512i v = InterleaveUpper(lo, hi);
      if (width - j >= 16) {
        _mm512_storeu_si512(row + j, v);
      } else {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + j), _mm512_castsi512_si256(v));
      }
    }
  }
}

// Packs op(A) (k_along_rows = !trans_a) or op(B) (trans_b) as panels of `width` pairs a row.
AMPC_BF16_DOT void PackPairPanels(const float* x, bool k_along_rows, int64_t ld, int64_t first,
                                  int64_t count, int64_t p0, int64_t kc, int64_t width,
                                  uint32_t* out) {
  const int64_t pairs = (kc + 1) / 2;
  PackPanels(
      x, k_along_rows, ld, first, count, p0, pairs, width, out,
      [&](const float* start, int64_t n, uint32_t* panel) {
        if (n < width) std::fill(panel, panel + pairs * width, 0u);
        PackAlongRows(start, ld, n, kc, width, panel);
      },
      [&](const float* start, int64_t n, uint32_t* panel) {
        PackAlongColumns(start, ld, kc, n, width, panel);
      });
}

// c[rows, cols] (rows <= kMr, cols <= kNr) = or += the product of one A panel and one B panel over
// `pairs` pairs of k.
template <int kRows>
AMPC_BF16_DOT void MicroKernel(const uint32_t* ap, const uint32_t* bp, int64_t pairs, float* c,
                               int64_t ldc, int64_t cols, bool add) {
  __m512 acc[kRows][2];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t q = 0; q < pairs; ++q) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + q * kNr);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + q * kNr + 16);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[q * kMr + r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
    }
  }
  StoreTile<kRows>(acc, c, ldc, cols, add);
}

constexpr MicroKernelFn<uint32_t> kMicroKernels[kMr] = {
    MicroKernel<1>, MicroKernel<2>, MicroKernel<3>, MicroKernel<4>,
    MicroKernel<5>, MicroKernel<6>, MicroKernel<7>, MicroKernel<8>};

bool CpuHasBFloat16Dot() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // CPUID leaf 7, sub-leaf 1: EAX bit 5 is AVX512_BF16.
  if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) return false;
  return (eax & (1u << 5)) != 0 && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}

}  // namespace

bool HasBFloat16Dot() {
  static const bool has = CpuHasBFloat16Dot();
  return has;
}

bool BFloat16DotTakes(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                      int64_t lda, const float* b, int64_t ldb) {
  return HasBFloat16Dot() && !HasSubnormal(a, trans_a ? k : m, trans_a ? m : k, lda) &&
         !HasSubnormal(b, trans_b ? n : k, trans_b ? k : n, ldb);
}

void GemmBFloat16Values(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                        int64_t lda, const float* b, int64_t ldb, bool accumulate, float* c,
                        int64_t ldc) {
  BlockedGemm<float, uint32_t>(kBlocking, kMicroKernels, PackPairPanels, trans_a, trans_b, m, n, k,
                               a, lda, b, ldb, accumulate, c, ldc);
}

}  // namespace ampc::linalg

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#else  // not x86-64

namespace ampc::linalg {

bool HasBFloat16Dot() { return false; }
bool BFloat16DotTakes(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t, const float*,
                      int64_t) {
  return false;
}
void GemmBFloat16Values(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t, const float*,
                        int64_t, bool, float*, int64_t) {}

}  // namespace ampc::linalg

#endif
