// Blocked as GotoBLAS (as gemm_bf16.cc): B is packed a [kKc, kNc] block at a time into column
// panels of kNr floats, A a [kMc, kKc] block at a time into row panels of kMr, and a kMr x kNr
// micro-kernel keeps its tile of C in registers.
#include "kernels/cpu/gemm_half.h"

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

#define AMPC_HALF_GEMM __attribute__((target("avx512f,avx512bw,avx512vl,f16c")))

namespace ampc::linalg {
namespace {

constexpr int64_t kMr = 8;    // rows of the micro-kernel's tile
constexpr int64_t kNr = 32;   // columns: two registers of 16 floats
constexpr int64_t kKc = 256;  // k per block: the block sums of GemmHalfValues' contract
constexpr int64_t kMc = 128;
constexpr int64_t kNc = 1024;
constexpr GemmBlocking kBlocking{kMr, kNr, kKc, kMc, kNc, /*k_per_entry=*/1};

// The first `count` (<= 8) FP16 values at p, widened; zeros after them.
AMPC_HALF_GEMM __m256i Widen8(const uint16_t* p, int64_t count) {
  const __m128i h = _mm_maskz_loadu_epi16(static_cast<__mmask8>(Mask16(count)), p);
  return _mm256_castps_si256(_mm256_cvtph_ps(h));
}

// Packs `rows` (<= width) rows of kc values whose k runs along the row (x[r * ld + p]) as kc rows
// of `width` floats (zero past `rows`), row p at out + p * width: 8 x 8 blocks through a transpose.
AMPC_HALF_GEMM void PackAlongRows(const uint16_t* x, int64_t ld, int64_t rows, int64_t kc,
                                  int64_t width, float* out) {
  for (int64_t r0 = 0; r0 < width; r0 += 8) {
    for (int64_t p = 0; p < kc; p += 8) {
      const int64_t count = std::min<int64_t>(8, kc - p);
      __m256i block[8];
      for (int64_t i = 0; i < 8; ++i) {
        block[i] = r0 + i < rows ? Widen8(x + (r0 + i) * ld + p, count) : _mm256_setzero_si256();
      }
      Transpose8x8(block);
      for (int64_t t = 0; t < count; ++t) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (p + t) * width + r0), block[t]);
      }
    }
  }
}

// Packs kc rows of `cols` (<= width) values whose k runs down the columns (x[p * ld + j]) as kc
// rows of `width` floats (zero past `cols`), row p at out + p * width.
AMPC_HALF_GEMM void PackAlongColumns(const uint16_t* x, int64_t ld, int64_t kc, int64_t cols,
                                     int64_t width, float* out) {
  for (int64_t p = 0; p < kc; ++p) {
    for (int64_t j = 0; j < width; j += 16) {
      const __mmask16 m = j < cols ? Mask16(cols - j) : 0;
      const __m512 v = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + p * ld + j));
      if (width - j >= 16) {
        _mm512_storeu_ps(out + p * width + j, v);
      } else {
        _mm256_storeu_ps(out + p * width + j, _mm512_castps512_ps256(v));
      }
    }
  }
}

// Packs op(A) (k_along_rows = !trans_a) or op(B) (trans_b) as panels of `width` floats a row.
AMPC_HALF_GEMM void PackHalfPanels(const uint16_t* x, bool k_along_rows, int64_t ld, int64_t first,
                                   int64_t count, int64_t p0, int64_t kc, int64_t width,
                                   float* out) {
  PackPanels(
      x, k_along_rows, ld, first, count, p0, kc, width, out,
      [&](const uint16_t* start, int64_t n, float* panel) {
        PackAlongRows(start, ld, n, kc, width, panel);
      },
      [&](const uint16_t* start, int64_t n, float* panel) {
        PackAlongColumns(start, ld, kc, n, width, panel);
      });
}

// c[rows, cols] (rows <= kMr, cols <= kNr) = or += the product of one A panel and one B panel
// over kc values of k.
template <int kRows>
AMPC_HALF_GEMM void MicroKernel(const float* ap, const float* bp, int64_t kc, float* c, int64_t ldc,
                                int64_t cols, bool add) {
  __m512 acc[kRows][2];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_loadu_ps(bp + p * kNr);
    const __m512 b1 = _mm512_loadu_ps(bp + p * kNr + 16);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m512 av = _mm512_set1_ps(ap[p * kMr + r]);
      acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
    }
  }
  StoreTile<kRows>(acc, c, ldc, cols, add);
}

using MicroKernelFn = void (*)(const float*, const float*, int64_t, float*, int64_t, int64_t, bool);
constexpr MicroKernelFn kMicroKernels[kMr] = {MicroKernel<1>, MicroKernel<2>, MicroKernel<3>,
                                              MicroKernel<4>, MicroKernel<5>, MicroKernel<6>,
                                              MicroKernel<7>, MicroKernel<8>};

bool CpuHasHalfGemm() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // F16C from CPUID leaf 1 (clang 14's __builtin_cpu_supports does not know "f16c").
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  return f16c && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}

}  // namespace

bool HasHalfGemm() {
  static const bool has = CpuHasHalfGemm();
  return has;
}

void GemmHalfValues(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const uint16_t* a,
                    int64_t lda, const uint16_t* b, int64_t ldb, bool accumulate, float* c,
                    int64_t ldc) {
  BlockedGemm<uint16_t, float>(kBlocking, kMicroKernels, PackHalfPanels, trans_a, trans_b, m, n, k,
                               a, lda, b, ldb, accumulate, c, ldc);
}

}  // namespace ampc::linalg

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#else  // not x86-64

namespace ampc::linalg {

bool HasHalfGemm() { return false; }
void GemmHalfValues(bool, bool, int64_t, int64_t, int64_t, const uint16_t*, int64_t,
                    const uint16_t*, int64_t, bool, float*, int64_t) {}

}  // namespace ampc::linalg

#endif
