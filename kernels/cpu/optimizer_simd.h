// Vector forms of the optimizers' per-element formulas (kernels/numerics/scaler_math.h): the same
// IEEE operations in the same order on 8 floats at a time, so the same bits as the scalar loop;
// and of the unscale pass with its sum of squares.
#pragma once

#include <cstdint>

#include "kernels/numerics/scaler_math.h"

namespace ampc::optimizer_simd {

// Adam's update of n elements (scaler_math::AdamElement on each); the outputs may alias the
// inputs element for element. Returns how many leading elements it did (a multiple of 8, 0
// without AVX); the caller does the rest with the scalar formula.
int64_t AdamBlock(const scaler_math::AdamScalars& s, const float* p, const float* g, const float* m,
                  const float* v, float* p_out, float* m_out, float* v_out, int64_t n);

// UnscaleClip's pass over n widened gradient values w: u[k] = w[k] * inv (scaler_math::Unscale),
// and the sum of u^2 in double over 8 lanes (element k in lane k % 8; the lanes summed pairwise in
// a fixed order), so the sum depends on n alone. *nonfinite becomes true if a w is inf or NaN.
// Vector and scalar forms give the same bits.
double UnscaleSquares(const float* w, int64_t n, float inv, float* u, bool* nonfinite);

}  // namespace ampc::optimizer_simd
