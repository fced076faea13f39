// A GEMM on BF16 values with the CPU's BF16 dot products (AVX512-BF16's VDPBF16PS): each product of
// two BF16 values is exact in FP32 and the sums accumulate in FP32, as the numerics model of
// docs/runtime.md asks. The operands are floats that hold BF16 values (the widened copies the CPU
// kernels work on), so every caller of linalg_gemm.h's Gemm can take this path for BF16 tensors.
#pragma once

#include <cstdint>

namespace ampc::linalg {

// Whether this CPU has the BF16 dot products GemmBFloat16Values needs.
bool HasBFloat16Dot();

// Whether GemmBFloat16Values can multiply these operands (row-major, op(a) [m,k], op(b) [k,n]): the
// CPU has the instructions and no value is an FP32 subnormal (the instruction reads those as zero).
bool BFloat16DotTakes(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                      int64_t lda, const float* b, int64_t ldb);

// c[m,n] = op(a)[m,k] * op(b)[k,n] (accumulate false) or c + op(a) * op(b) (accumulate true),
// row-major, where every value of a and b is a BF16 value widened to float and BFloat16DotTakes
// them. Each sum runs over k in order (in blocks that depend on k alone), so the result does not
// depend on how a caller splits m or n. Partial sums below FP32's smallest normal (1.2e-38) are
// flushed to zero by the instruction.
void GemmBFloat16Values(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                        int64_t lda, const float* b, int64_t ldb, bool accumulate, float* c,
                        int64_t ldc);

}  // namespace ampc::linalg
