// MatMul's and Gemm's operand checks and shapes, shared by every backend's kernels so each
// accepts the same nodes with the same messages. Defined in linalg_kernels.cc.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/core/kernel.h"

namespace ampc::linalg {

// ONNX types every tensor input alike; a model that breaks this must not be read as another type.
absl::Status CheckSameTypes(const KernelContext& context);

// MatMul's shapes after numpy's rules: 1-D operands become a row (A) or a column (B) matrix,
// removed again from the output.
struct MatMulShape {
  int64_t m, k, n;
  Shape batch_a, batch_b, batch;
  Shape output;
};
absl::StatusOr<MatMulShape> InferMatMul(const KernelContext& context, const Shape& a,
                                        const Shape& b);

// Gemm's Y = alpha * op(A) * op(B) + beta * C: A and B (inputs 0, 1) 2-D with equal inner
// dimensions, the optional C (input 2) broadcasting to [m, n] unidirectionally.
struct GemmShape {
  bool trans_a, trans_b;
  int64_t m, k, n;
};
absl::StatusOr<GemmShape> InferGemm(const KernelContext& context);

}  // namespace ampc::linalg
