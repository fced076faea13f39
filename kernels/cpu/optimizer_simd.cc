#include "kernels/cpu/optimizer_simd.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define AMPC_OPTIMIZER_AVX 1
#endif

namespace ampc::optimizer_simd {
namespace {

#ifdef AMPC_OPTIMIZER_AVX
// AVX only (no FMA in the target), so no multiply and add can be contracted into one rounding.
// Division and square root are IEEE-exact in vector form as in scalar form.
__attribute__((target("avx"))) int64_t AdamAvx(const scaler_math::AdamScalars& s, const float* p,
                                               const float* g, const float* m, const float* v,
                                               float* p_out, float* m_out, float* v_out,
                                               int64_t n) {
  const __m256 wd = _mm256_set1_ps(s.wd), decay = _mm256_set1_ps(s.decay);
  const __m256 w1 = _mm256_set1_ps(s.w1), keep = _mm256_set1_ps(1.0f - s.w1);
  const __m256 beta2 = _mm256_set1_ps(s.beta2), w2 = _mm256_set1_ps(s.w2);
  const __m256 bc2_sqrt = _mm256_set1_ps(s.bc2_sqrt), eps = _mm256_set1_ps(s.eps);
  const __m256 neg_step = _mm256_set1_ps(s.neg_step_size);
  const bool decay_p = s.wd != 0.0f && s.decoupled, decay_g = s.wd != 0.0f && !s.decoupled;
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    __m256 pk = _mm256_loadu_ps(p + k), gk = _mm256_loadu_ps(g + k);
    const __m256 mk = _mm256_loadu_ps(m + k), vk = _mm256_loadu_ps(v + k);
    if (decay_p) pk = _mm256_mul_ps(pk, decay);
    if (decay_g) gk = _mm256_add_ps(gk, _mm256_mul_ps(wd, pk));
    const __m256 diff = _mm256_sub_ps(gk, mk);
    const __m256 m1 = s.small_w1 ? _mm256_add_ps(mk, _mm256_mul_ps(w1, diff))
                                 : _mm256_sub_ps(gk, _mm256_mul_ps(diff, keep));
    const __m256 v1 =
        _mm256_add_ps(_mm256_mul_ps(vk, beta2), _mm256_mul_ps(_mm256_mul_ps(w2, gk), gk));
    const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v1), bc2_sqrt), eps);
    const __m256 p1 = _mm256_add_ps(pk, _mm256_div_ps(_mm256_mul_ps(neg_step, m1), denom));
    _mm256_storeu_ps(p_out + k, p1);
    _mm256_storeu_ps(m_out + k, m1);
    _mm256_storeu_ps(v_out + k, v1);
  }
  return k;
}

__attribute__((target("avx"))) int64_t UnscaleSquaresAvx(const float* w, int64_t n, float inv,
                                                         float* u, double* lanes, bool* nonfinite) {
  const __m256 scale = _mm256_set1_ps(inv), zero = _mm256_setzero_ps();
  __m256d low = _mm256_setzero_pd(), high = _mm256_setzero_pd();
  __m256 bad = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256 wk = _mm256_loadu_ps(w + k);
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_sub_ps(wk, wk), zero, _CMP_NEQ_UQ));
    const __m256 uk = _mm256_mul_ps(wk, scale);
    _mm256_storeu_ps(u + k, uk);
    const __m256d u0 = _mm256_cvtps_pd(_mm256_castps256_ps128(uk));
    const __m256d u1 = _mm256_cvtps_pd(_mm256_extractf128_ps(uk, 1));
    low = _mm256_add_pd(low, _mm256_mul_pd(u0, u0));
    high = _mm256_add_pd(high, _mm256_mul_pd(u1, u1));
  }
  _mm256_storeu_pd(lanes, low);
  _mm256_storeu_pd(lanes + 4, high);
  if (_mm256_movemask_ps(bad) != 0) *nonfinite = true;
  return k;
}

bool HasAvx() {
  static const bool has = __builtin_cpu_supports("avx");
  return has;
}
#endif

}  // namespace

double UnscaleSquares(const float* w, int64_t n, float inv, float* u, bool* nonfinite) {
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
#ifdef AMPC_OPTIMIZER_AVX
  if (HasAvx()) k = UnscaleSquaresAvx(w, n, inv, u, lanes, nonfinite);
#endif
  bool bad = false;
  for (; k < n; ++k) {
    bad |= scaler_math::NonFinite(w[k]);
    u[k] = scaler_math::Unscale(w[k], inv);
    lanes[k % 8] += scaler_math::Square(u[k]);
  }
  if (bad) *nonfinite = true;
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

int64_t AdamBlock(const scaler_math::AdamScalars& s, const float* p, const float* g, const float* m,
                  const float* v, float* p_out, float* m_out, float* v_out, int64_t n) {
#ifdef AMPC_OPTIMIZER_AVX
  if (HasAvx()) return AdamAvx(s, p, g, m, v, p_out, m_out, v_out, n);
#endif
  return 0;
}

}  // namespace ampc::optimizer_simd
