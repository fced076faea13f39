// Filling C around a GEMM: its degenerate case (K == 0 or alpha == 0), C = epilogue(beta * C +
// bias) without a product; and ONNX Gemm's C broadcast into the output before the product.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/gemm.h"

namespace ampc::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

__device__ float Load(float x) { return x; }
__device__ float Load(__half x) { return __half2float(x); }
__device__ float Load(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ T Store(float x);
template <>
__device__ float Store<float>(float x) {
  return x;
}
template <>
__device__ __half Store<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __nv_bfloat16 Store<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

template <typename T>
__global__ void WithoutProductKernel(T* c, int64_t m, int64_t n, int64_t ldc, int64_t batch,
                                     int64_t stride_c, float beta, const T* bias, bool relu) {
  const int64_t total = batch * m * n;
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t col = i % n, row = (i / n) % m, matrix = i / (m * n);
    T* p = c + matrix * stride_c + row * ldc + col;
    float x = beta == 0.0f ? 0.0f : __fmul_rn(beta, Load(*p));
    if (bias != nullptr) x = __fadd_rn(x, Load(bias[col]));
    if (relu && x < 0.0f) x = 0.0f;
    *p = Store<T>(x);
  }
}

template <typename T>
cudaError_t Launch(void* c, int64_t m, int64_t n, int64_t ldc, int64_t batch, int64_t stride_c,
                   float beta, const void* bias, bool relu, cudaStream_t stream) {
  const int64_t total = batch * m * n;
  const int64_t blocks = std::min((total + kThreads - 1) / kThreads, kMaxBlocks);
  WithoutProductKernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<T*>(c), m, n, ldc, batch, stride_c, beta, static_cast<const T*>(bias), relu);
  return cudaGetLastError();
}

template <typename T>
__global__ void BroadcastKernel(const T* in, int64_t rows, int64_t cols, T* out, int64_t m,
                                int64_t n) {
  const int64_t total = m * n;
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t row = rows == 1 ? 0 : i / n, col = cols == 1 ? 0 : i % n;
    out[i] = in[row * cols + col];
  }
}

}  // namespace

cudaError_t BroadcastToMatrix(ElemType type, const void* in, int64_t rows, int64_t cols, void* out,
                              int64_t m, int64_t n, cudaStream_t stream) {
  if (m < 0 || n < 0 || (rows != 1 && rows != m) || (cols != 1 && cols != n)) {
    return cudaErrorInvalidValue;
  }
  if (m == 0 || n == 0) return cudaSuccess;
  const int64_t blocks = std::min((m * n + kThreads - 1) / kThreads, kMaxBlocks);
  const unsigned grid = static_cast<unsigned>(blocks);
  switch (ElemSize(type)) {  // a copy: only the element size matters
    case 2:
      BroadcastKernel<<<grid, kThreads, 0, stream>>>(static_cast<const uint16_t*>(in), rows, cols,
                                                     static_cast<uint16_t*>(out), m, n);
      break;
    case 4:
      BroadcastKernel<<<grid, kThreads, 0, stream>>>(static_cast<const uint32_t*>(in), rows, cols,
                                                     static_cast<uint32_t*>(out), m, n);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t GemmWithoutProduct(ElemType type, int64_t m, int64_t n, void* c, int64_t ldc,
                               int64_t batch, int64_t stride_c, float beta, const void* bias,
                               bool relu, cudaStream_t stream) {
  if (m < 0 || n < 0 || batch < 0) return cudaErrorInvalidValue;
  if (m == 0 || n == 0 || batch == 0) return cudaSuccess;
  switch (type) {
    case ElemType::kFloat:
      return Launch<float>(c, m, n, ldc, batch, stride_c, beta, bias, relu, stream);
    case ElemType::kFloat16:
      return Launch<__half>(c, m, n, ldc, batch, stride_c, beta, bias, relu, stream);
    case ElemType::kBFloat16:
      return Launch<__nv_bfloat16>(c, m, n, ldc, batch, stride_c, beta, bias, relu, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace ampc::cuda
