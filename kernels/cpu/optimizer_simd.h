// Vector forms of the optimizers' per-element formulas (kernels/numerics/scaler_math.h): the same
// IEEE operations in the same order on 8 floats at a time, so the same bits as the scalar loop.
#pragma once

#include <cstdint>

#include "kernels/numerics/scaler_math.h"

namespace ampc::optimizer_simd {

// Adam's update of n elements (scaler_math::AdamElement on each); the outputs may alias the
// inputs element for element. Returns how many leading elements it did (a multiple of 8, 0
// without AVX); the caller does the rest with the scalar formula.
int64_t AdamBlock(const scaler_math::AdamScalars& s, const float* p, const float* g, const float* m,
                  const float* v, float* p_out, float* m_out, float* v_out, int64_t n);

}  // namespace ampc::optimizer_simd
