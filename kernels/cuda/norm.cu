#include <cstdint>

#include "kernels/cuda/float_storage.cuh"
#include "kernels/cuda/norm.h"

namespace ampc::cuda {
namespace {

constexpr int kThreads = 256;
// Stage 1 of ChannelSums gives each block about this many elements of one channel, and a channel
// at most kMaxChunks blocks; both depend on the shape only, so the summation order does too.
constexpr int64_t kChunkElements = 16384;
constexpr int64_t kMaxChunks = 128;

int64_t ChunksOf(const ChannelLayout& layout) {
  const int64_t count = layout.batch * layout.inner;
  const int64_t chunks = (count + kChunkElements - 1) / kChunkElements;
  return chunks < 1 ? 1 : (chunks > kMaxChunks ? kMaxChunks : chunks);
}

// Sums the block's values of `a` and `b` in a fixed tree; thread 0 gets the totals.
__device__ void BlockSum(float& a, float& b) {
  __shared__ float shared_a[kThreads];
  __shared__ float shared_b[kThreads];
  const int t = threadIdx.x;
  shared_a[t] = a;
  shared_b[t] = b;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (t < half) {
      shared_a[t] += shared_a[t + half];
      shared_b[t] += shared_b[t + half];
    }
    __syncthreads();
  }
  a = shared_a[0];
  b = shared_b[0];
}

// Stage 1: block (c, chunk) sums its contiguous part of channel c's N * inner elements.
template <typename T>
__global__ void ChannelPartialsKernel(ChannelTerm term, const T* x, const T* dy,
                                      const float* center, const float* inv_std,
                                      ChannelLayout layout, int64_t chunk_length, float* partial_a,
                                      float* partial_b) {
  const int64_t c = blockIdx.x;
  const int64_t count = layout.batch * layout.inner;
  const int64_t begin = blockIdx.y * chunk_length;
  const int64_t end = begin + chunk_length < count ? begin + chunk_length : count;
  const float m = term == ChannelTerm::kValue ? 0.0f : center[c];
  const float s = term == ChannelTerm::kGradTerms ? inv_std[c] : 0.0f;
  float a = 0, b = 0;
  for (int64_t k = begin + threadIdx.x; k < end; k += kThreads) {
    const int64_t n = k / layout.inner;
    const int64_t i = (n * layout.channels + c) * layout.inner + (k - n * layout.inner);
    const float v = LoadFloat(x, i);
    if (term == ChannelTerm::kValue) {
      a += v;
    } else if (term == ChannelTerm::kCenteredSquare) {
      const float d = v - m;
      a += d * d;
    } else {
      const float g = LoadFloat(dy, i);
      a += g * ((v - m) * s);
      b += g;
    }
  }
  BlockSum(a, b);
  if (threadIdx.x == 0) {
    partial_a[c * gridDim.y + blockIdx.y] = a;
    partial_b[c * gridDim.y + blockIdx.y] = b;
  }
}

// Stage 2: block c adds channel c's partial sums.
__global__ void ChannelTotalsKernel(const float* partial_a, const float* partial_b, int64_t chunks,
                                    float divisor, float* sum_a, float* sum_b) {
  const int64_t c = blockIdx.x;
  float a = 0, b = 0;
  for (int64_t k = threadIdx.x; k < chunks; k += kThreads) {
    a += partial_a[c * chunks + k];
    b += partial_b[c * chunks + k];
  }
  BlockSum(a, b);
  if (threadIdx.x == 0) {
    sum_a[c] = a / divisor;
    if (sum_b != nullptr) sum_b[c] = b / divisor;
  }
}

// The _rn intrinsics keep each step rounded as the CPU rounds it (no contraction into FMAs).
__global__ void InverseStdKernel(const float* var, float epsilon, float* inv_std, int64_t n) {
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t p = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; p < n; p += step) {
    inv_std[p] = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(var[p], epsilon)));
  }
}

__global__ void MomentumUpdateKernel(const float* running, const float* batch, float momentum,
                                     float* out, int64_t n) {
  const float rest = __fsub_rn(1.0f, momentum);
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t p = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; p < n; p += step) {
    out[p] = __fadd_rn(__fmul_rn(running[p], momentum), __fmul_rn(batch[p], rest));
  }
}

template <typename T>
__global__ void BatchNormApplyKernel(const T* x, T* y, ChannelLayout layout, bool per_element,
                                     const float* mean, const float* inv_std, const float* scale,
                                     const float* bias) {
  const int64_t total = layout.batch * layout.channels * layout.inner;
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; e < total; e += step) {
    const int64_t c = (e / layout.inner) % layout.channels;
    const int64_t p = per_element ? c * layout.inner + e % layout.inner : c;
    const float centered = __fsub_rn(LoadFloat(x, e), mean[p]);
    StoreFloat(y, e, __fadd_rn(__fmul_rn(__fmul_rn(centered, inv_std[p]), scale[p]), bias[p]));
  }
}

template <typename T>
__global__ void BatchNormGradInputKernel(const T* dy, const T* x, T* dx, ChannelLayout layout,
                                         const float* scale, const float* mean,
                                         const float* inv_std, const float* dscale,
                                         const float* dbias) {
  const int64_t total = layout.batch * layout.channels * layout.inner;
  const float count = static_cast<float>(layout.batch * layout.inner);
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t e = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; e < total; e += step) {
    const int64_t c = (e / layout.inner) % layout.channels;
    const float k = __fmul_rn(scale[c], inv_std[c]);
    const float xhat = __fmul_rn(__fsub_rn(LoadFloat(x, e), mean[c]), inv_std[c]);
    const float g = LoadFloat(dy, e);
    const float t = __fsub_rn(__fsub_rn(g, __fdiv_rn(dbias[c], count)),
                              __fdiv_rn(__fmul_rn(xhat, dscale[c]), count));
    StoreFloat(dx, e, __fmul_rn(k, t));
  }
}

}  // namespace

int64_t ChannelSumsWorkspace(const ChannelLayout& layout) {
  return 2 * layout.channels * ChunksOf(layout);
}

cudaError_t ChannelSums(ElemType type, ChannelTerm term, const void* x, const void* dy,
                        const float* center, const float* inv_std, const ChannelLayout& layout,
                        float divisor, float* sum_a, float* sum_b, float* workspace,
                        cudaStream_t stream) {
  if (layout.channels == 0) return cudaSuccess;
  if (layout.channels > INT32_MAX) return cudaErrorInvalidValue;
  const int64_t chunks = ChunksOf(layout);
  const int64_t count = layout.batch * layout.inner;
  const int64_t chunk_length = (count + chunks - 1) / chunks;
  float* partial_a = workspace;
  float* partial_b = workspace + layout.channels * chunks;
  const dim3 grid(static_cast<unsigned int>(layout.channels), static_cast<unsigned int>(chunks));
  const cudaError_t launched = DispatchFloatStorage(type, [&](auto tag) {
    using T = decltype(tag);
    ChannelPartialsKernel<T><<<grid, kThreads, 0, stream>>>(
        term, static_cast<const T*>(x), static_cast<const T*>(dy), center, inv_std, layout,
        chunk_length, partial_a, partial_b);
    return cudaGetLastError();
  });
  if (launched != cudaSuccess) return launched;
  ChannelTotalsKernel<<<static_cast<unsigned int>(layout.channels), kThreads, 0, stream>>>(
      partial_a, partial_b, chunks, divisor, sum_a, sum_b);
  return cudaGetLastError();
}

cudaError_t InverseStd(const float* var, float epsilon, float* inv_std, int64_t n,
                       cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  InverseStdKernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(var, epsilon, inv_std, n);
  return cudaGetLastError();
}

cudaError_t MomentumUpdate(const float* running, const float* batch, float momentum, float* out,
                           int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  MomentumUpdateKernel<<<GridFor(n, kThreads), kThreads, 0, stream>>>(running, batch, momentum, out,
                                                                      n);
  return cudaGetLastError();
}

cudaError_t BatchNormApply(ElemType type, const void* x, void* y, const ChannelLayout& layout,
                           bool per_element, const float* mean, const float* inv_std,
                           const float* scale, const float* bias, cudaStream_t stream) {
  const int64_t total = layout.batch * layout.channels * layout.inner;
  if (total == 0) return cudaSuccess;
  return DispatchFloatStorage(type, [&](auto tag) {
    using T = decltype(tag);
    BatchNormApplyKernel<T><<<GridFor(total, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), layout, per_element, mean, inv_std, scale,
        bias);
    return cudaGetLastError();
  });
}

cudaError_t BatchNormGradInput(ElemType type, const void* dy, const void* x, void* dx,
                               const ChannelLayout& layout, const float* scale, const float* mean,
                               const float* inv_std, const float* dscale, const float* dbias,
                               cudaStream_t stream) {
  const int64_t total = layout.batch * layout.channels * layout.inner;
  if (total == 0) return cudaSuccess;
  return DispatchFloatStorage(type, [&](auto tag) {
    using T = decltype(tag);
    BatchNormGradInputKernel<T><<<GridFor(total, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<T*>(dx), layout, scale,
        mean, inv_std, dscale, dbias);
    return cudaGetLastError();
  });
}

}  // namespace ampc::cuda
