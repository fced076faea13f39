#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/cast.h"
#include "kernels/cuda/elementwise_kernels.cuh"
#include "kernels/cuda/elementwise_math.h"
#include "kernels/numerics/cast_math.h"

namespace ampc {
namespace {

constexpr int kVector = 8;  // elements per vector step: 16 bytes of 16-bit values
constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

template <typename To, typename From>
__device__ To BitCast(From from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  memcpy(&to, &from, sizeof(To));
  return to;
}

// Narrowing casts: 8 floats in two 16-byte loads, 8 results in one 16-byte store.
template <typename Op>
struct Narrow {
  __device__ static uint16_t One(float x) { return Op::One(x); }
  __device__ static void Vec8(const float* in, uint16_t* out) {
    const float4 a = reinterpret_cast<const float4*>(in)[0];
    const float4 b = reinterpret_cast<const float4*>(in)[1];
    *reinterpret_cast<uint4*>(out) =
        make_uint4(Op::Two(make_float2(a.x, a.y)), Op::Two(make_float2(a.z, a.w)),
                   Op::Two(make_float2(b.x, b.y)), Op::Two(make_float2(b.z, b.w)));
  }
};

// Widening casts: 8 values in one 16-byte load, 8 floats in two 16-byte stores.
template <typename Op>
struct Widen {
  __device__ static float One(uint16_t x) { return Op::One(x); }
  __device__ static void Vec8(const uint16_t* in, float* out) {
    const uint4 v = *reinterpret_cast<const uint4*>(in);
    const float2 p0 = Op::Two(v.x), p1 = Op::Two(v.y), p2 = Op::Two(v.z), p3 = Op::Two(v.w);
    reinterpret_cast<float4*>(out)[0] = make_float4(p0.x, p0.y, p1.x, p1.y);
    reinterpret_cast<float4*>(out)[1] = make_float4(p2.x, p2.y, p3.x, p3.y);
  }
};

struct ToHalf {
  __device__ static uint16_t One(float x) { return __half_as_ushort(__float2half_rn(x)); }
  __device__ static uint32_t Two(float2 x) { return BitCast<uint32_t>(__float22half2_rn(x)); }
};

struct FromHalf {
  __device__ static float One(uint16_t x) { return __half2float(__ushort_as_half(x)); }
  __device__ static float2 Two(uint32_t x) { return __half22float2(BitCast<__half2>(x)); }
};

struct ToBFloat16 {
  __device__ static uint16_t One(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
  __device__ static uint32_t Two(float2 x) { return BitCast<uint32_t>(__float22bfloat162_rn(x)); }
};

struct FromBFloat16 {
  __device__ static float One(uint16_t x) { return __bfloat162float(__ushort_as_bfloat16(x)); }
  __device__ static float2 Two(uint32_t x) {
    return __bfloat1622float2(BitCast<__nv_bfloat162>(x));
  }
};

// Elements [0, head) and the tail after `chunks` vector steps go one by one; the steps between
// start at `head`, where both pointers are 16-byte aligned.
template <typename Cast, typename In, typename Out>
__global__ void CastKernel(const In* in, Out* out, int64_t n, int64_t head, int64_t chunks) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (int64_t c = first; c < chunks; c += stride) {
    const int64_t i = head + c * kVector;
    Cast::Vec8(in + i, out + i);
  }
  for (int64_t i = first; i < head; i += stride) out[i] = Cast::One(in[i]);
  for (int64_t i = head + chunks * kVector + first; i < n; i += stride) out[i] = Cast::One(in[i]);
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The first index where both pointers are 16-byte aligned; n when there is none (the pattern
// repeats every kVector elements), and then every element takes the scalar path.
template <typename In, typename Out>
int64_t AlignedHead(const In* in, const Out* out, int64_t n) {
  for (int64_t k = 0; k < kVector && k < n; ++k) {
    if (Aligned16(in + k) && Aligned16(out + k)) return k;
  }
  return n;
}

template <typename Cast, typename In, typename Out>
cudaError_t Launch(const In* in, Out* out, int64_t n, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const int64_t head = AlignedHead(in, out, n);
  const int64_t chunks = (n - head) / kVector;
  const int64_t scalar = std::max(head, n - head - chunks * kVector);
  const int64_t threads = std::max(chunks, scalar);
  const int64_t blocks = std::min((threads + kThreads - 1) / kThreads, kMaxBlocks);
  CastKernel<Cast>
      <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(in, out, n, head, chunks);
  return cudaGetLastError();
}

}  // namespace

cudaError_t CastFloatToHalf(const float* d_in, uint16_t* d_out, int64_t n, cudaStream_t stream) {
  return Launch<Narrow<ToHalf>>(d_in, d_out, n, stream);
}

cudaError_t CastHalfToFloat(const uint16_t* d_in, float* d_out, int64_t n, cudaStream_t stream) {
  return Launch<Widen<FromHalf>>(d_in, d_out, n, stream);
}

cudaError_t CastFloatToBFloat16(const float* d_in, uint16_t* d_out, int64_t n,
                                cudaStream_t stream) {
  return Launch<Narrow<ToBFloat16>>(d_in, d_out, n, stream);
}

cudaError_t CastBFloat16ToFloat(const uint16_t* d_in, float* d_out, int64_t n,
                                cudaStream_t stream) {
  return Launch<Widen<FromBFloat16>>(d_in, d_out, n, stream);
}

namespace cuda {

cudaError_t Cast(ElemType from, ElemType to, const void* d_in, void* d_out, int64_t n,
                 cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (from == to) {
    const size_t size = ElemSize(from);
    if (size == 0) return cudaErrorNotSupported;
    if (d_in == d_out) return cudaSuccess;
    return cudaMemcpyAsync(d_out, d_in, static_cast<size_t>(n) * size, cudaMemcpyDeviceToDevice,
                           stream);
  }
  const auto* in16 = static_cast<const uint16_t*>(d_in);
  auto* out16 = static_cast<uint16_t*>(d_out);
  const auto* in32 = static_cast<const float*>(d_in);
  auto* out32 = static_cast<float*>(d_out);
  if (from == ElemType::kFloat && to == ElemType::kFloat16) {
    return CastFloatToHalf(in32, out16, n, stream);
  }
  if (from == ElemType::kFloat16 && to == ElemType::kFloat) {
    return CastHalfToFloat(in16, out32, n, stream);
  }
  if (from == ElemType::kFloat && to == ElemType::kBFloat16) {
    return CastFloatToBFloat16(in32, out16, n, stream);
  }
  if (from == ElemType::kBFloat16 && to == ElemType::kFloat) {
    return CastBFloat16ToFloat(in16, out32, n, stream);
  }
  cudaError_t result = cudaErrorNotSupported;
  detail::Visit(detail::AllTypes{}, from, [&](auto from_tag) {
    detail::Visit(detail::AllTypes{}, to, [&](auto to_tag) {
      using From = typename decltype(from_tag)::type;
      using To = typename decltype(to_tag)::type;
      if constexpr (!std::is_same_v<From, To>) {
        result = detail::LaunchMap1(ConvertOp<From, To>{}, static_cast<const From*>(d_in),
                                    static_cast<To*>(d_out), n, stream);
      }
    });
  });
  return result;
}

}  // namespace cuda
}  // namespace ampc
