// The launcher of kernels/cuda/dropout.h: one thread per Philox block of four elements.
#include "kernels/cpu/philox.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/float_storage.cuh"

namespace ampc::cuda {
namespace {

__device__ float ReadRatio(const void* p, ElemType type) {
  if (p == nullptr) return 0.5f;
  switch (type) {
    case ElemType::kFloat16:
      return __half2float(*static_cast<const __half*>(p));
    case ElemType::kBFloat16:
      return __bfloat162float(*static_cast<const __nv_bfloat16*>(p));
    default:
      return *static_cast<const float*>(p);
  }
}

template <typename T>
__global__ void DropoutKernel(const T* x, int64_t count, const void* ratio_p, ElemType ratio_type,
                              const bool* training_p, const int64_t* call_p, uint64_t seed, T* y,
                              bool* mask) {
  const float ratio = ReadRatio(ratio_p, ratio_type);
  const bool drop = training_p != nullptr && *training_p && ratio != 0.0f;
  const uint64_t call = static_cast<uint64_t>(*call_p);
  const float scale = 1.0f / (1.0f - ratio);
  const int64_t blocks = (count + 3) / 4;
  for (int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; b < blocks;
       b += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t block = static_cast<uint64_t>(b);
    Philox4x32 words{{0, 0, 0, 0}};
    if (drop) {
      words = Philox4x32_10({{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                              static_cast<uint32_t>(call), static_cast<uint32_t>(call >> 32)}},
                            static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
    }
    for (int j = 0; j < 4; ++j) {
      const int64_t i = b * 4 + j;
      if (i >= count) break;
      const bool keep =
          !drop || static_cast<double>(words.v[j]) * 0x1.0p-32 >= static_cast<double>(ratio);
      if (!drop) {
        y[i] = x[i];
      } else {
        y[i] = FloatStorage<T>::Store(keep ? FloatStorage<T>::Load(x[i]) * scale : 0.0f);
      }
      if (mask != nullptr) mask[i] = keep;
    }
  }
}

}  // namespace

cudaError_t Dropout(const void* d_x, ElemType type, int64_t count, const void* d_ratio,
                    ElemType ratio_type, const bool* d_training, const int64_t* d_call,
                    uint64_t seed, void* d_y, bool* d_mask, cudaStream_t stream) {
  if (d_call == nullptr || count < 0) return cudaErrorInvalidValue;
  if (d_ratio != nullptr && ratio_type != ElemType::kFloat && ratio_type != ElemType::kFloat16 &&
      ratio_type != ElemType::kBFloat16) {
    return cudaErrorInvalidValue;
  }
  if (count == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const unsigned int grid = GridFor((count + 3) / 4, kThreads);
  return DispatchFloatStorage(type, [&](auto tag) {
    using T = decltype(tag);
    DropoutKernel<T><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(d_x), count, d_ratio,
                                                    ratio_type, d_training, d_call, seed,
                                                    static_cast<T*>(d_y), d_mask);
    return cudaGetLastError();
  });
}

}  // namespace ampc::cuda
