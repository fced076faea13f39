// Elementwise CUDA launchers: broadcasting binary ops, unary ops, Where, Fill and strided copies,
// each equal to the CPU backend's kernel of the same op (elementwise_math.h says where and how
// they may differ: one ulp in some transcendental functions, NaN payloads). Plain C++ header:
// includable without nvcc.
//
// All pointers are device pointers; inputs may be any element alignment (16-byte aligned buffers
// take the vector path). Launches are asynchronous on `stream`; the result is the launch error,
// cudaErrorNotSupported for an op/type combination without a kernel, cudaErrorInvalidValue for a
// plan that does not fit the call.
#ifndef AMPC_KERNELS_CUDA_ELEMENTWISE_H_
#define AMPC_KERNELS_CUDA_ELEMENTWISE_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/broadcast_plan.h"
#include "kernels/cuda/elem_type.h"

namespace ampc::cuda {

enum class BinaryOp : int32_t {
  // Numeric (float, FP16, BF16, double, int8, uint8, int32, int64); the output has A's type.
  kAdd,
  kSub,
  kMul,
  kDiv,  // integers truncate; x / 0 is 0 and lowest / -1 wraps, as on the CPU
  kMax,  // NaN propagates
  kMin,
  kMod,   // Mod with fmod=0: the remainder has the divisor's sign
  kFmod,  // Mod with fmod=1: the dividend's sign; x % 0 is 0 for integers
  // Base float, FP16, BF16, double, int32 or int64; exponent any numeric type.
  kPow,
  // Bool output. Equal takes bool too; the others numeric types.
  kEqual,
  kLess,
  kLessOrEqual,
  kGreater,
  kGreaterOrEqual,
  // Bool in, bool out.
  kAnd,
  kOr,
  kXor,
};

enum class UnaryOp : int32_t {
  // Numeric types, output of the input's type; integer negation wraps.
  kNeg,
  kAbs,
  kRelu,
  kSign,
  // Float, FP16, BF16 and double.
  kSqrt,
  kReciprocal,
  kExp,
  kLog,
  kErf,
  kTanh,
  kSigmoid,
  kFloor,
  kCeil,
  kRound,  // ties to even
  // Float types in, bool out.
  kIsNaN,
  kIsInf,  // as selected by UnaryParams
  // Bool in, bool out.
  kNot,
};

struct UnaryParams {
  bool detect_positive = true;  // IsInf
  bool detect_negative = true;
};

// The type Binary writes: bool for comparisons and logic ops, else a_type.
ElemType BinaryOutputType(BinaryOp op, ElemType a_type);
// The type Unary writes: bool for IsNaN and IsInf, else `type`.
ElemType UnaryOutputType(UnaryOp op, ElemType type);

// out[i] = op(a[offset 0 of i], b[offset 1 of i]) for the plan's `count` outputs (a two-input
// plan, e.g. PlanBroadcast(out_shape, {a_shape, b_shape})). Same-shape and single-element inputs
// take a contiguous, vectorised path. a_type and b_type must be equal except for kPow.
cudaError_t Binary(BinaryOp op, ElemType a_type, ElemType b_type, const void* d_a, const void* d_b,
                   void* d_out, const IndexPlan& plan, cudaStream_t stream);

// out[i] = op(in[i]) over `n` contiguous elements.
cudaError_t Unary(UnaryOp op, ElemType type, const void* d_in, void* d_out, int64_t n,
                  cudaStream_t stream, UnaryParams params = {});

// out[i] = cond[offset 0] ? x[offset 1] : y[offset 2] over a three-input plan; x, y and out have
// element type `type` (any).
cudaError_t Where(ElemType type, const bool* d_cond, const void* d_x, const void* d_y, void* d_out,
                  const IndexPlan& plan, cudaStream_t stream);

// Writes `n` elements of `elem_size` bytes (1, 2, 4 or 8), each the low elem_size bytes of `bits`
// (the element's bytes as a little-endian integer): ConstantOfShape.
cudaError_t Fill(void* d_out, int64_t n, size_t elem_size, uint64_t bits, cudaStream_t stream);

// out[i] = in[offset 0 of i] over a one-input plan, elements of `elem_size` bytes (1, 2, 4 or 8):
// Transpose (permuted strides), Expand (PlanBroadcast), making a strided view contiguous.
cudaError_t StridedCopy(size_t elem_size, const void* d_in, void* d_out, const IndexPlan& plan,
                        cudaStream_t stream);

}  // namespace ampc::cuda

#endif  // AMPC_KERNELS_CUDA_ELEMENTWISE_H_
