// Kernel templates shared by the elementwise .cu files: maps of one, two or three inputs over
// contiguous buffers (16-byte vector steps where every buffer is aligned for them; single-element
// inputs broadcast) and over index plans (broadcast, strided), and the element type dispatch.
// CUDA only: include from .cu files.
#ifndef AMPC_KERNELS_CUDA_ELEMENTWISE_KERNELS_CUH_
#define AMPC_KERNELS_CUDA_ELEMENTWISE_KERNELS_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/broadcast_plan.h"
#include "kernels/cuda/elem_type.h"
#include "kernels/cuda/elementwise_math.h"

namespace ampc::cuda::detail {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

// N elements of T moved as one aligned vector (16 bytes at most).
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// Elements per vector step: 16 bytes of the widest type involved.
template <typename... Ts>
constexpr int VecWidth() {
  size_t widest = 1;
  ((widest = sizeof(Ts) > widest ? sizeof(Ts) : widest), ...);
  return static_cast<int>(16 / widest);
}

inline bool Aligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

inline unsigned Blocks(int64_t work) {
  return static_cast<unsigned>(
      std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

__device__ inline int64_t FirstIndex() { return int64_t{blockIdx.x} * blockDim.x + threadIdx.x; }
__device__ inline int64_t GridStride() { return int64_t{gridDim.x} * blockDim.x; }

// ---- One input: out[i] = f(in[i]) ----

template <int N, typename F, typename In, typename Out>
__global__ void Map1Kernel(F f, const In* in, Out* out, int64_t n, int64_t chunks) {
  const int64_t first = FirstIndex(), stride = GridStride();
  for (int64_t c = first; c < chunks; c += stride) {
    const Pack<In, N> x = reinterpret_cast<const Pack<In, N>*>(in)[c];
    Pack<Out, N> y;
#pragma unroll
    for (int j = 0; j < N; ++j) y.v[j] = f(x.v[j]);
    reinterpret_cast<Pack<Out, N>*>(out)[c] = y;
  }
  for (int64_t i = chunks * N + first; i < n; i += stride) out[i] = f(in[i]);
}

template <typename F, typename In, typename Out>
cudaError_t LaunchMap1(F f, const In* in, Out* out, int64_t n, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  constexpr int N = VecWidth<In, Out>();
  const bool vector = Aligned(in, sizeof(In) * N) && Aligned(out, sizeof(Out) * N);
  const int64_t chunks = vector ? n / N : 0;
  const int64_t work = std::max(chunks, n - chunks * N);
  Map1Kernel<N><<<Blocks(work), kThreads, 0, stream>>>(f, in, out, n, chunks);
  return cudaGetLastError();
}

// out[i] = f(in[offset 0 of i]) over a one-input plan.
template <typename Index, typename F, typename In, typename Out>
__global__ void Map1PlanKernel(F f, const In* in, Out* out, IndexPlan plan) {
  const int64_t first = FirstIndex(), stride = GridStride();
  for (int64_t i = first; i < plan.count; i += stride) {
    Index offsets[1];
    PlanOffsets<1>(plan, static_cast<Index>(i), offsets);
    out[i] = f(in[offsets[0]]);
  }
}

template <typename F, typename In, typename Out>
cudaError_t LaunchMap1Plan(F f, const In* in, Out* out, const IndexPlan& plan,
                           cudaStream_t stream) {
  if (plan.num_inputs != 1 || plan.count < 0) return cudaErrorInvalidValue;
  if (plan.count == 0) return cudaSuccess;
  if (FitsIndex32(plan)) {
    Map1PlanKernel<uint32_t><<<Blocks(plan.count), kThreads, 0, stream>>>(f, in, out, plan);
  } else {
    Map1PlanKernel<int64_t><<<Blocks(plan.count), kThreads, 0, stream>>>(f, in, out, plan);
  }
  return cudaGetLastError();
}

// ---- Two inputs: out[i] = f(a[.], b[.]) ----

template <int N, typename T>
__device__ inline Pack<T, N> LoadPack(const T* p, bool scalar, T first, int64_t chunk) {
  if (!scalar) return reinterpret_cast<const Pack<T, N>*>(p)[chunk];
  Pack<T, N> pack;
#pragma unroll
  for (int j = 0; j < N; ++j) pack.v[j] = first;
  return pack;
}

template <int N, typename F, typename A, typename B, typename Out>
__global__ void Map2Kernel(F f, const A* a, bool a_scalar, const B* b, bool b_scalar, Out* out,
                           int64_t n, int64_t chunks) {
  const int64_t first = FirstIndex(), stride = GridStride();
  const A a0 = a[0];
  const B b0 = b[0];
  for (int64_t c = first; c < chunks; c += stride) {
    const Pack<A, N> x = LoadPack<N>(a, a_scalar, a0, c);
    const Pack<B, N> y = LoadPack<N>(b, b_scalar, b0, c);
    Pack<Out, N> z;
#pragma unroll
    for (int j = 0; j < N; ++j) z.v[j] = f(x.v[j], y.v[j]);
    reinterpret_cast<Pack<Out, N>*>(out)[c] = z;
  }
  for (int64_t i = chunks * N + first; i < n; i += stride) {
    out[i] = f(a_scalar ? a0 : a[i], b_scalar ? b0 : b[i]);
  }
}

template <typename Index, typename F, typename A, typename B, typename Out>
__global__ void Map2PlanKernel(F f, const A* a, const B* b, Out* out, IndexPlan plan) {
  const int64_t first = FirstIndex(), stride = GridStride();
  for (int64_t i = first; i < plan.count; i += stride) {
    Index offsets[2];
    PlanOffsets<2>(plan, static_cast<Index>(i), offsets);
    out[i] = f(a[offsets[0]], b[offsets[1]]);
  }
}

template <typename F, typename A, typename B, typename Out>
cudaError_t LaunchMap2(F f, const A* a, const B* b, Out* out, const IndexPlan& plan,
                       cudaStream_t stream) {
  if (plan.num_inputs != 2 || plan.count < 0) return cudaErrorInvalidValue;
  if (plan.count == 0) return cudaSuccess;
  bool a_scalar = false, b_scalar = false;
  if (IsFlatInput(plan, 0, &a_scalar) && IsFlatInput(plan, 1, &b_scalar)) {
    constexpr int N = VecWidth<A, B, Out>();
    const bool vector = (a_scalar || Aligned(a, sizeof(A) * N)) &&
                        (b_scalar || Aligned(b, sizeof(B) * N)) && Aligned(out, sizeof(Out) * N);
    const int64_t n = plan.count;
    const int64_t chunks = vector ? n / N : 0;
    const int64_t work = std::max(chunks, n - chunks * N);
    Map2Kernel<N>
        <<<Blocks(work), kThreads, 0, stream>>>(f, a, a_scalar, b, b_scalar, out, n, chunks);
  } else if (FitsIndex32(plan)) {
    Map2PlanKernel<uint32_t><<<Blocks(plan.count), kThreads, 0, stream>>>(f, a, b, out, plan);
  } else {
    Map2PlanKernel<int64_t><<<Blocks(plan.count), kThreads, 0, stream>>>(f, a, b, out, plan);
  }
  return cudaGetLastError();
}

// ---- Element type dispatch ----

template <typename... Ts>
struct Types {};
template <typename T>
struct Tag {
  using type = T;
};

template <typename T>
constexpr ElemType ElemTypeOf();
template <>
constexpr ElemType ElemTypeOf<float>() {
  return ElemType::kFloat;
}
template <>
constexpr ElemType ElemTypeOf<F16>() {
  return ElemType::kFloat16;
}
template <>
constexpr ElemType ElemTypeOf<BF16>() {
  return ElemType::kBFloat16;
}
template <>
constexpr ElemType ElemTypeOf<double>() {
  return ElemType::kDouble;
}
template <>
constexpr ElemType ElemTypeOf<int8_t>() {
  return ElemType::kInt8;
}
template <>
constexpr ElemType ElemTypeOf<uint8_t>() {
  return ElemType::kUint8;
}
template <>
constexpr ElemType ElemTypeOf<int32_t>() {
  return ElemType::kInt32;
}
template <>
constexpr ElemType ElemTypeOf<int64_t>() {
  return ElemType::kInt64;
}
template <>
constexpr ElemType ElemTypeOf<bool>() {
  return ElemType::kBool;
}

using FloatTypes = Types<float, F16, BF16, double>;
using NumericTypes = Types<float, F16, BF16, double, int32_t, int64_t, int8_t, uint8_t>;
using AllTypes = Types<float, F16, BF16, double, int32_t, int64_t, int8_t, uint8_t, bool>;

// Calls fn(Tag<T>{}) with T the storage type of `type` when it is one of Ts; false otherwise.
template <typename... Ts, typename Fn>
bool Visit(Types<Ts...>, ElemType type, Fn&& fn) {
  return ((type == ElemTypeOf<Ts>() ? (fn(Tag<Ts>{}), true) : false) || ...);
}

// Unsigned storage of `size` bytes (copies, Where, Fill move bits, not values).
template <typename Fn>
bool VisitBySize(size_t size, Fn&& fn) {
  switch (size) {
    case 1:
      fn(Tag<uint8_t>{});
      return true;
    case 2:
      fn(Tag<uint16_t>{});
      return true;
    case 4:
      fn(Tag<uint32_t>{});
      return true;
    case 8:
      fn(Tag<uint64_t>{});
      return true;
    default:
      return false;
  }
}

}  // namespace ampc::cuda::detail

#endif  // AMPC_KERNELS_CUDA_ELEMENTWISE_KERNELS_CUH_
