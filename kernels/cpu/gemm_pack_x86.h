// x86 building blocks shared by the packed GEMMs (gemm_bf16.cc, gemm_half.cc): lane masks, an
// 8 x 8 transpose of 32-bit values, a micro-kernel's tile store and GotoBLAS's loop nest. The
// vector functions carry their own target attributes, so the files that use them build for
// baseline x86-64 and run only where the CPU reports the instructions.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ampc::linalg {

// The first min(n, 16) lanes.
inline __mmask16 Mask16(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

// Transposes 8 rows of 8 32-bit values (in place).
__attribute__((target("avx2"))) inline void Transpose8x8(__m256i r[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      u[4 * i + 2 * j] = _mm256_unpacklo_epi64(t[4 * i + j], t[4 * i + 2 + j]);
      u[4 * i + 2 * j + 1] = _mm256_unpackhi_epi64(t[4 * i + j], t[4 * i + 2 + j]);
    }
  }
  // u[0..3] hold columns 0, 1, 2, 3 of rows 0-3 (low 128 bits) and 4-7 (high), u[4..7] of rows 4-7.
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2x128_si256(u[i], u[4 + i], 0x20);
    r[4 + i] = _mm256_permute2x128_si256(u[i], u[4 + i], 0x31);
  }
}

// A micro-kernel's tile of C, kRows rows of two registers (32 floats, the first `cols` of them
// kept) at c: stored, or added to what c holds when `add`.
template <int kRows>
__attribute__((target("avx512f"))) inline void StoreTile(const __m512 (&acc)[kRows][2], float* c,
                                                         int64_t ldc, int64_t cols, bool add) {
  const __mmask16 m0 = Mask16(cols), m1 = cols > 16 ? Mask16(cols - 16) : 0;
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
    float* row = c + r * ldc;
    __m512 v0 = acc[r][0], v1 = acc[r][1];
    if (add) {
      v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, row), v0);
      v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, row + 16), v1);
    }
    _mm512_mask_storeu_ps(row, m0, v0);
    _mm512_mask_storeu_ps(row + 16, m1, v1);
  }
}

// `count` rows of op(A) (or columns of op(B)) from `first`, k [p0, p0 + kc), as panels of
// `width`, each `depth` (packed entries of k) x `width`. k runs along x's rows (x[r * ld + p]: A,
// or B transposed: along_rows(start, n, panel)) or down its columns (x[p * ld + r]:
// along_columns(start, n, panel)), n <= width the rows (columns) of the panel.
template <typename In, typename Packed, typename AlongRows, typename AlongColumns>
void PackPanels(const In* x, bool k_along_rows, int64_t ld, int64_t first, int64_t count,
                int64_t p0, int64_t depth, int64_t width, Packed* out, AlongRows&& along_rows,
                AlongColumns&& along_columns) {
  for (int64_t r0 = 0; r0 < count; r0 += width) {
    Packed* panel = out + r0 * depth;
    const int64_t n = std::min(width, count - r0);
    if (k_along_rows) {
      along_rows(x + (first + r0) * ld + p0, n, panel);
    } else {
      along_columns(x + p0 * ld + first + r0, n, panel);
    }
  }
}

// c[rows, cols] = (or += when the last argument says add) the product of one packed A panel and
// one packed B panel over `depth` packed entries of k; kernels[rows - 1] for a tile of `rows`.
template <typename Packed>
using MicroKernelFn = void (*)(const Packed*, const Packed*, int64_t, float*, int64_t, int64_t,
                               bool);

// A packed GEMM's blocking: mr x nr tiles, k in blocks of kc (k_per_entry values of k per packed
// entry), A in blocks of mc rows and B of nc columns.
struct GemmBlocking {
  int64_t mr, nr, kc, mc, nc, k_per_entry;
};

// GotoBLAS's loop nest over c[m, n] = op(a)[m, k] op(b)[k, n] (or c + ..., when accumulate):
// for each [kc, nc] block of op(B), pack(b, trans_b, ldb, j0, nc, p0, kc, nr, out) packs it as
// panels of nr columns; for each [mc, kc] block of op(A), pack(a, !trans_a, lda, i0, mc, p0, kc,
// mr, out) as panels of mr rows (PackPanels' arguments: whether k runs along the rows of what is
// stored); then every tile is one micro-kernel call. Each k block's sum is stored (the first,
// unless accumulate) or added to c.
template <typename In, typename Packed, typename Pack>
void BlockedGemm(const GemmBlocking& s, const MicroKernelFn<Packed>* kernels, Pack&& pack,
                 bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const In* a,
                 int64_t lda, const In* b, int64_t ldb, bool accumulate, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate) {
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    }
    return;
  }
  const int64_t entries = (s.kc + s.k_per_entry - 1) / s.k_per_entry;
  thread_local std::vector<Packed> packed_a, packed_b;
  packed_a.resize(static_cast<size_t>((std::min(s.mc, m) + s.mr - 1) / s.mr * s.mr * entries));
  packed_b.resize(static_cast<size_t>((std::min(s.nc, n) + s.nr - 1) / s.nr * s.nr * entries));
  for (int64_t j0 = 0; j0 < n; j0 += s.nc) {
    const int64_t nc = std::min(s.nc, n - j0);
    for (int64_t p0 = 0; p0 < k; p0 += s.kc) {
      const int64_t kc = std::min(s.kc, k - p0);
      const int64_t depth = (kc + s.k_per_entry - 1) / s.k_per_entry;
      const bool add = accumulate || p0 > 0;
      pack(b, trans_b, ldb, j0, nc, p0, kc, s.nr, packed_b.data());
      for (int64_t i0 = 0; i0 < m; i0 += s.mc) {
        const int64_t mc = std::min(s.mc, m - i0);
        pack(a, !trans_a, lda, i0, mc, p0, kc, s.mr, packed_a.data());
        for (int64_t jr = 0; jr < nc; jr += s.nr) {
          const int64_t cols = std::min(s.nr, nc - jr);
          for (int64_t ir = 0; ir < mc; ir += s.mr) {
            const int64_t rows = std::min(s.mr, mc - ir);
            kernels[rows - 1](packed_a.data() + ir * depth, packed_b.data() + jr * depth, depth,
                              c + (i0 + ir) * ldc + j0 + jr, ldc, cols, add);
          }
        }
      }
    }
  }
}

}  // namespace ampc::linalg

#endif
