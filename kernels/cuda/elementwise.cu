// Unary ops, Where, Fill and strided copies (binary ops: elementwise_binary.cu).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/elementwise_kernels.cuh"
#include "kernels/cuda/elementwise_math.h"

namespace ampc::cuda {
namespace {

using detail::Aligned;
using detail::Blocks;
using detail::FloatTypes;
using detail::kThreads;
using detail::NumericTypes;
using detail::Pack;
using detail::Types;
using detail::Visit;
using detail::VisitBySize;

// ---- Unary ----

// Storage in, storage out: loads to the compute type, applies op, rounds once to Out.
template <typename Op, typename In, typename Out>
struct UnaryApply {
  Op op;
  AMPC_HD Out operator()(In x) const { return Num<Out>::Store(op(Num<In>::Load(x))); }
};

template <bool kBoolOut, typename Op, typename TypeSet>
cudaError_t RunUnary(Op op, TypeSet types, ElemType type, const void* in, void* out, int64_t n,
                     cudaStream_t stream) {
  cudaError_t result = cudaErrorNotSupported;
  Visit(types, type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Out = std::conditional_t<kBoolOut, bool, T>;
    result = detail::LaunchMap1(UnaryApply<Op, T, Out>{op}, static_cast<const T*>(in),
                                static_cast<Out*>(out), n, stream);
  });
  return result;
}

// ---- Where: moves bits, so it runs on unsigned storage of the element's size ----

struct Select {
  template <typename T>
  __device__ T operator()(bool c, T x, T y) const {
    return c ? x : y;
  }
};

template <int N, typename T>
__global__ void WhereKernel(const bool* cond, bool c_scalar, const T* x, bool x_scalar, const T* y,
                            bool y_scalar, T* out, int64_t n, int64_t chunks) {
  const int64_t first = detail::FirstIndex(), stride = detail::GridStride();
  const bool c0 = cond[0];
  const T x0 = x[0], y0 = y[0];
  for (int64_t k = first; k < chunks; k += stride) {
    const Pack<bool, N> c = detail::LoadPack<N>(cond, c_scalar, c0, k);
    const Pack<T, N> a = detail::LoadPack<N>(x, x_scalar, x0, k);
    const Pack<T, N> b = detail::LoadPack<N>(y, y_scalar, y0, k);
    Pack<T, N> z;
#pragma unroll
    for (int j = 0; j < N; ++j) z.v[j] = Select{}(c.v[j], a.v[j], b.v[j]);
    reinterpret_cast<Pack<T, N>*>(out)[k] = z;
  }
  for (int64_t i = chunks * N + first; i < n; i += stride) {
    out[i] = Select{}(c_scalar ? c0 : cond[i], x_scalar ? x0 : x[i], y_scalar ? y0 : y[i]);
  }
}

template <typename Index, typename T>
__global__ void WherePlanKernel(const bool* cond, const T* x, const T* y, T* out, IndexPlan plan) {
  const int64_t first = detail::FirstIndex(), stride = detail::GridStride();
  for (int64_t i = first; i < plan.count; i += stride) {
    Index offsets[3];
    PlanOffsets<3>(plan, static_cast<Index>(i), offsets);
    out[i] = Select{}(cond[offsets[0]], x[offsets[1]], y[offsets[2]]);
  }
}

template <typename T>
void LaunchWhere(const bool* cond, const T* x, const T* y, T* out, const IndexPlan& plan,
                 cudaStream_t stream) {
  bool c_scalar = false, x_scalar = false, y_scalar = false;
  if (IsFlatInput(plan, 0, &c_scalar) && IsFlatInput(plan, 1, &x_scalar) &&
      IsFlatInput(plan, 2, &y_scalar)) {
    constexpr int N = detail::VecWidth<bool, T>();
    const bool vector = (c_scalar || Aligned(cond, N)) && (x_scalar || Aligned(x, sizeof(T) * N)) &&
                        (y_scalar || Aligned(y, sizeof(T) * N)) && Aligned(out, sizeof(T) * N);
    const int64_t n = plan.count;
    const int64_t chunks = vector ? n / N : 0;
    const int64_t work = std::max(chunks, n - chunks * N);
    WhereKernel<N><<<Blocks(work), kThreads, 0, stream>>>(cond, c_scalar, x, x_scalar, y, y_scalar,
                                                          out, n, chunks);
  } else if (FitsIndex32(plan)) {
    WherePlanKernel<uint32_t><<<Blocks(plan.count), kThreads, 0, stream>>>(cond, x, y, out, plan);
  } else {
    WherePlanKernel<int64_t><<<Blocks(plan.count), kThreads, 0, stream>>>(cond, x, y, out, plan);
  }
}

// ---- Fill ----

template <int N, typename T>
__global__ void FillKernel(T value, T* out, int64_t n, int64_t chunks) {
  const int64_t first = detail::FirstIndex(), stride = detail::GridStride();
  Pack<T, N> pack;
#pragma unroll
  for (int j = 0; j < N; ++j) pack.v[j] = value;
  for (int64_t c = first; c < chunks; c += stride) reinterpret_cast<Pack<T, N>*>(out)[c] = pack;
  for (int64_t i = chunks * N + first; i < n; i += stride) out[i] = value;
}

struct Identity {
  template <typename T>
  __device__ T operator()(T x) const {
    return x;
  }
};

}  // namespace

ElemType UnaryOutputType(UnaryOp op, ElemType type) {
  return op == UnaryOp::kIsNaN || op == UnaryOp::kIsInf ? ElemType::kBool : type;
}

cudaError_t Unary(UnaryOp op, ElemType type, const void* d_in, void* d_out, int64_t n,
                  cudaStream_t stream, UnaryParams params) {
  NumericTypes numeric;
  FloatTypes floats;
  switch (op) {
    case UnaryOp::kNeg:
      return RunUnary<false>(NegOp{}, numeric, type, d_in, d_out, n, stream);
    case UnaryOp::kAbs:
      return RunUnary<false>(AbsOp{}, numeric, type, d_in, d_out, n, stream);
    case UnaryOp::kRelu:
      return RunUnary<false>(ReluOp{}, numeric, type, d_in, d_out, n, stream);
    case UnaryOp::kSign:
      return RunUnary<false>(SignOp{}, numeric, type, d_in, d_out, n, stream);
    case UnaryOp::kSqrt:
      return RunUnary<false>(SqrtOp{}, floats, type, d_in, d_out, n, stream);
    case UnaryOp::kReciprocal:
      return RunUnary<false>(ReciprocalOp{}, floats, type, d_in, d_out, n, stream);
    case UnaryOp::kExp:
      return RunUnary<false>(ExpOp{}, floats, type, d_in, d_out, n, stream);
    case UnaryOp::kLog:
      return RunUnary<false>(LogOp{}, floats, type, d_in, d_out, n, stream);
    case UnaryOp::kErf:
      return RunUnary<false>(ErfOp{}, floats, type, d_in, d_out, n, stream);
    case UnaryOp::kTanh:
      return RunUnary<false>(TanhOp{}, floats, type, d_in, d_out, n, stream);
    case UnaryOp::kSigmoid:
      return RunUnary<false>(SigmoidOp{}, floats, type, d_in, d_out, n, stream);
    case UnaryOp::kFloor:
      return RunUnary<false>(FloorOp{}, floats, type, d_in, d_out, n, stream);
    case UnaryOp::kCeil:
      return RunUnary<false>(CeilOp{}, floats, type, d_in, d_out, n, stream);
    case UnaryOp::kRound:
      return RunUnary<false>(RoundOp{}, floats, type, d_in, d_out, n, stream);
    case UnaryOp::kIsNaN:
      return RunUnary<true>(IsNanOp{}, floats, type, d_in, d_out, n, stream);
    case UnaryOp::kIsInf:
      return RunUnary<true>(IsInfOp{params.detect_positive, params.detect_negative}, floats, type,
                            d_in, d_out, n, stream);
    case UnaryOp::kNot:
      return RunUnary<false>(NotOp{}, Types<bool>{}, type, d_in, d_out, n, stream);
  }
  return cudaErrorNotSupported;
}

cudaError_t Where(ElemType type, const bool* d_cond, const void* d_x, const void* d_y, void* d_out,
                  const IndexPlan& plan, cudaStream_t stream) {
  if (plan.num_inputs != 3 || plan.count < 0) return cudaErrorInvalidValue;
  if (plan.count == 0) return cudaSuccess;
  const bool handled = VisitBySize(ElemSize(type), [&](auto tag) {
    using T = typename decltype(tag)::type;
    LaunchWhere(d_cond, static_cast<const T*>(d_x), static_cast<const T*>(d_y),
                static_cast<T*>(d_out), plan, stream);
  });
  return handled ? cudaGetLastError() : cudaErrorNotSupported;
}

cudaError_t Fill(void* d_out, int64_t n, size_t elem_size, uint64_t bits, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const bool handled = VisitBySize(elem_size, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T value = static_cast<T>(bits);  // the low bytes, on a little-endian host
    constexpr int N = detail::VecWidth<T>();
    T* out = static_cast<T*>(d_out);
    const int64_t chunks = Aligned(out, sizeof(T) * N) ? n / N : 0;
    const int64_t work = std::max(chunks, n - chunks * N);
    FillKernel<N><<<Blocks(work), kThreads, 0, stream>>>(value, out, n, chunks);
  });
  return handled ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t StridedCopy(size_t elem_size, const void* d_in, void* d_out, const IndexPlan& plan,
                        cudaStream_t stream) {
  if (plan.num_inputs != 1 || plan.count < 0) return cudaErrorInvalidValue;
  if (plan.count == 0) return cudaSuccess;
  bool scalar = false;
  if (IsFlatInput(plan, 0, &scalar) && !scalar) {
    if (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8) {
      return cudaErrorInvalidValue;
    }
    return cudaMemcpyAsync(d_out, d_in, static_cast<size_t>(plan.count) * elem_size,
                           cudaMemcpyDeviceToDevice, stream);
  }
  cudaError_t result = cudaErrorInvalidValue;
  VisitBySize(elem_size, [&](auto tag) {
    using T = typename decltype(tag)::type;
    result = detail::LaunchMap1Plan(Identity{}, static_cast<const T*>(d_in), static_cast<T*>(d_out),
                                    plan, stream);
  });
  return result;
}

}  // namespace ampc::cuda
