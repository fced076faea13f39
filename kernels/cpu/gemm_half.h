// A GEMM on FP16 operands as stored: panels are packed straight from FP16 (widened with F16C on
// the way, no widened copy of either matrix) and multiplied with FP32 FMAs. A product of two FP16
// values is exact in FP32, so each fused multiply-add rounds once, as an FP32 sum of the exact
// products: the numerics model of docs/runtime.md.
#pragma once

#include <cstdint>

namespace ampc::linalg {

// Whether this CPU has the instructions GemmHalfValues needs (AVX-512 F/BW/VL and F16C).
bool HasHalfGemm();

// c[m,n] = op(a)[m,k] * op(b)[k,n] (accumulate false) or c + op(a) * op(b) (accumulate true),
// row-major, a and b the bits of FP16 values. Each value is the FP32 sum of its products in order
// of k, in blocks of 256 (the first block's sum is added to c, or stored, and each later block's
// sum added to that), so the result does not depend on how a caller splits m or n. Needs
// HasHalfGemm().
void GemmHalfValues(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const uint16_t* a,
                    int64_t lda, const uint16_t* b, int64_t ldb, bool accumulate, float* c,
                    int64_t ldc);

}  // namespace ampc::linalg
