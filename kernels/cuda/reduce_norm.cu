// LayerNormalization and its ai.ampc gradient. Each row of [rows, cols] gets a warp (short rows)
// or a block: two passes for the mean and variance as on the CPU, then the outputs. dscale and
// dbias are column sums over the rows: partial sums per chunk of rows into a workspace, then one
// thread per column adds the chunks in order (no atomics, the same bits every run).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/reduce.h"
#include "kernels/cuda/reduce_device.cuh"

namespace ampc::cuda {
namespace {

using detail::AddOp;
using detail::BlockRows;
using detail::ColumnRows;
using detail::ComputeOf;
using detail::Io;
using detail::Tag;
using detail::WarpRows;

// Scale or bias at column k, the parameter being a suffix of the normalized shape of `size`
// elements (size divides cols); `fill` without the parameter.
template <typename T>
__device__ ComputeOf<T> Param(const T* p, int64_t size, int64_t k, ComputeOf<T> fill) {
  if (p == nullptr) return fill;
  return Io<T>::Load(p[k < size ? k : k % size]);
}

template <typename T, typename U, typename Group>
__global__ void __launch_bounds__(detail::kThreads)
    LayerNormKernel(const T* x, const T* scale, const T* bias, T* y, U* mean_out, U* inv_out,
                    int64_t rows, int64_t cols, int64_t scale_size, int64_t bias_size,
                    float epsilon) {
  using F = ComputeOf<T>;
  for (int64_t r0 = detail::FirstRow<Group>(); r0 < rows; r0 += detail::RowStride<Group>()) {
    const int64_t r = r0 + Group::Slot();
    const bool active = r < rows;
    const int64_t base = active ? r * cols : 0;
    const int64_t first = active ? Group::Lane() : cols;  // an inactive thread reads nothing
    F sum = 0;
    for (int64_t k = first; k < cols; k += Group::kSize) sum += Io<T>::Load(x[base + k]);
    const F mean = Group::AllReduce(sum, AddOp()) / static_cast<F>(cols);
    F squares = 0;
    for (int64_t k = first; k < cols; k += Group::kSize) {
      const F d = Io<T>::Load(x[base + k]) - mean;
      squares += d * d;
    }
    const F var = Group::AllReduce(squares, AddOp()) / static_cast<F>(cols);
    const F inv = InvStdDev(var, epsilon);
    for (int64_t k = first; k < cols; k += Group::kSize) {
      const F s = Param(scale, scale_size, k, F{1}), b = Param(bias, bias_size, k, F{0});
      y[base + k] = Io<T>::Store(LayerNormValue(F(Io<T>::Load(x[base + k])), mean, inv, s, b));
    }
    if (active && Group::Lane() == 0) {
      if (mean_out != nullptr) mean_out[r] = Io<U>::Store(mean);
      if (inv_out != nullptr) inv_out[r] = Io<U>::Store(inv);
    }
  }
}

// dx per row: dx = inv * (g - mean(g) - xhat * mean(g * xhat)), g = dy * scale.
template <typename T, typename U, typename Group>
__global__ void __launch_bounds__(detail::kThreads)
    LayerNormGradDxKernel(const T* dy, const T* x, const T* scale, const U* mean_in,
                          const U* inv_in, T* dx, int64_t rows, int64_t cols, int64_t scale_size) {
  using F = ComputeOf<T>;
  for (int64_t r0 = detail::FirstRow<Group>(); r0 < rows; r0 += detail::RowStride<Group>()) {
    const int64_t r = r0 + Group::Slot();
    const bool active = r < rows;
    const int64_t base = active ? r * cols : 0;
    const int64_t first = active ? Group::Lane() : cols;
    const F mean = active ? F(Io<U>::Load(mean_in[r])) : F{0};
    const F inv = active ? F(Io<U>::Load(inv_in[r])) : F{0};
    F sum_g = 0, sum_gx = 0;
    for (int64_t k = first; k < cols; k += Group::kSize) {
      const F g = Io<T>::Load(dy[base + k]) * Param(scale, scale_size, k, F{1});
      sum_g += g;
      sum_gx += g * LayerNormXhat(F(Io<T>::Load(x[base + k])), mean, inv);
    }
    const F mean_g = Group::AllReduce(sum_g, AddOp()) / static_cast<F>(cols);
    const F mean_gx = Group::AllReduce(sum_gx, AddOp()) / static_cast<F>(cols);
    for (int64_t k = first; k < cols; k += Group::kSize) {
      const F g = Io<T>::Load(dy[base + k]) * Param(scale, scale_size, k, F{1});
      const F xhat = LayerNormXhat(F(Io<T>::Load(x[base + k])), mean, inv);
      dx[base + k] = Io<T>::Store(LayerNormGradDx(g, xhat, inv, mean_g, mean_gx));
    }
  }
}

// Rows are split into chunks of ChunkRows(rows) rows, at most kMaxChunks of them.
constexpr int64_t kMaxChunks = 128;
constexpr int64_t kMinChunkRows = 64;

int64_t ChunkRows(int64_t rows) {
  const int64_t chunks = std::min(kMaxChunks, (rows + kMinChunkRows - 1) / kMinChunkRows);
  return chunks == 0 ? 1 : (rows + chunks - 1) / chunks;
}
int64_t Chunks(int64_t rows) { return (rows + ChunkRows(rows) - 1) / ChunkRows(rows); }

// Block (32, 8) at (column block, chunk): the chunk's sums of dy * xhat and dy for 32 columns,
// to partial_scale/partial_bias[chunk * cols + column].
template <typename T, typename U>
__global__ void __launch_bounds__(detail::kThreads)
    LayerNormParamPartialKernel(const T* dy, const T* x, const U* mean_in, const U* inv_in,
                                int64_t rows, int64_t cols, int64_t chunk_rows,
                                ComputeOf<T>* partial_scale, ComputeOf<T>* partial_bias) {
  using F = ComputeOf<T>;
  const int64_t j = int64_t{blockIdx.x} * ColumnRows::kColumns + threadIdx.x;
  const int64_t chunk = blockIdx.y;
  const int64_t begin = chunk * chunk_rows;
  const int64_t end = begin + chunk_rows < rows ? begin + chunk_rows : rows;
  F s = 0, b = 0;
  if (j < cols) {
    for (int64_t r = begin + threadIdx.y; r < end; r += ColumnRows::kLanes) {
      const F g = Io<T>::Load(dy[r * cols + j]);
      s += g * LayerNormXhat(F(Io<T>::Load(x[r * cols + j])), F(Io<U>::Load(mean_in[r])),
                             F(Io<U>::Load(inv_in[r])));
      b += g;
    }
  }
  s = ColumnRows::AllReduce(s, AddOp());
  b = ColumnRows::AllReduce(b, AddOp());
  if (j < cols && threadIdx.y == 0) {
    partial_scale[chunk * cols + j] = s;
    partial_bias[chunk * cols + j] = b;
  }
}

// dscale[j], dbias[j] = the chunks' partial sums added in chunk order.
template <typename T>
__global__ void __launch_bounds__(detail::kThreads)
    LayerNormParamFinishKernel(const ComputeOf<T>* partial_scale, const ComputeOf<T>* partial_bias,
                               int64_t chunks, int64_t cols, T* dscale, T* dbias) {
  using F = ComputeOf<T>;
  for (int64_t j = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < cols;
       j += int64_t{gridDim.x} * blockDim.x) {
    F s = 0, b = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      s += partial_scale[c * cols + j];
      b += partial_bias[c * cols + j];
    }
    if (dscale != nullptr) dscale[j] = Io<T>::Store(s);
    if (dbias != nullptr) dbias[j] = Io<T>::Store(b);
  }
}

bool ValidArgs(const LayerNormArgs& args) {
  const auto valid_size = [&](int64_t size) {
    return size > 0 && size <= args.cols && args.cols % size == 0;
  };
  return args.rows >= 0 && args.cols >= 0 &&
         (args.cols == 0 || (valid_size(args.scale_size) && valid_size(args.bias_size)));
}

// fn(Tag<T>{}, Tag<U>{}): T the data's storage type, U the statistics' (T's or float).
template <typename Fn>
cudaError_t DispatchNorm(const LayerNormArgs& args, Fn&& fn) {
  return detail::DispatchFloat(args.type, [&](auto tag) -> cudaError_t {
    if (args.stat_type == args.type) return fn(tag, tag);
    if (args.stat_type == ElemType::kFloat) return fn(tag, Tag<float>{});
    return cudaErrorNotSupported;
  });
}

size_t AccSize(ElemType type) { return type == ElemType::kDouble ? sizeof(double) : sizeof(float); }

}  // namespace

cudaError_t LayerNormalization(const LayerNormArgs& args, const void* d_x, const void* d_scale,
                               const void* d_bias, void* d_y, void* d_mean, void* d_inv_std_dev,
                               cudaStream_t stream) {
  if (!ValidArgs(args)) return cudaErrorInvalidValue;
  return DispatchNorm(args, [&](auto tag, auto stat_tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    using U = typename decltype(stat_tag)::type;
    if (args.rows == 0 || args.cols == 0) return cudaSuccess;
    const auto launch = [&](auto group) {
      using Group = decltype(group);
      LayerNormKernel<T, U, Group>
          <<<detail::BlocksFor<Group>(args.rows), Group::Block(), 0, stream>>>(
              static_cast<const T*>(d_x), static_cast<const T*>(d_scale),
              static_cast<const T*>(d_bias), static_cast<T*>(d_y), static_cast<U*>(d_mean),
              static_cast<U*>(d_inv_std_dev), args.rows, args.cols, args.scale_size, args.bias_size,
              args.epsilon);
      return cudaGetLastError();
    };
    return args.cols >= detail::kBlockRowLength ? launch(BlockRows{}) : launch(WarpRows{});
  });
}

size_t LayerNormalizationGradWorkspaceBytes(const LayerNormArgs& args) {
  if (!ValidArgs(args)) return 0;
  return 2 * static_cast<size_t>(Chunks(args.rows) * args.cols) * AccSize(args.type);
}

cudaError_t LayerNormalizationGrad(const LayerNormArgs& args, const void* d_dy, const void* d_x,
                                   const void* d_scale, const void* d_mean,
                                   const void* d_inv_std_dev, void* d_dx, void* d_dscale,
                                   void* d_dbias, void* d_workspace, cudaStream_t stream) {
  if (!ValidArgs(args)) return cudaErrorInvalidValue;
  return DispatchNorm(args, [&](auto tag, auto stat_tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    using U = typename decltype(stat_tag)::type;
    using F = ComputeOf<T>;
    if (args.cols == 0) return cudaSuccess;
    const auto dy = static_cast<const T*>(d_dy);
    const auto x = static_cast<const T*>(d_x);
    const auto mean = static_cast<const U*>(d_mean);
    const auto inv = static_cast<const U*>(d_inv_std_dev);
    if (d_dx != nullptr && args.rows > 0) {
      const auto launch = [&](auto group) {
        using Group = decltype(group);
        LayerNormGradDxKernel<T, U, Group>
            <<<detail::BlocksFor<Group>(args.rows), Group::Block(), 0, stream>>>(
                dy, x, static_cast<const T*>(d_scale), mean, inv, static_cast<T*>(d_dx), args.rows,
                args.cols, args.scale_size);
        return cudaGetLastError();
      };
      const cudaError_t status =
          args.cols >= detail::kBlockRowLength ? launch(BlockRows{}) : launch(WarpRows{});
      if (status != cudaSuccess) return status;
    }
    if (d_dscale == nullptr && d_dbias == nullptr) return cudaSuccess;
    const int64_t chunks = Chunks(args.rows);
    F* partial_scale = static_cast<F*>(d_workspace);
    F* partial_bias = partial_scale + chunks * args.cols;
    if (chunks > 0) {
      const dim3 grid(
          static_cast<unsigned>((args.cols + ColumnRows::kColumns - 1) / ColumnRows::kColumns),
          static_cast<unsigned>(chunks));
      LayerNormParamPartialKernel<T, U><<<grid, ColumnRows::Block(), 0, stream>>>(
          dy, x, mean, inv, args.rows, args.cols, ChunkRows(args.rows), partial_scale,
          partial_bias);
      if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
    }
    // Also with no rows: dscale and dbias are then 0, as on the CPU.
    const int64_t blocks = std::min<int64_t>((args.cols + detail::kThreads - 1) / detail::kThreads,
                                             detail::kMaxBlocks);
    LayerNormParamFinishKernel<T><<<static_cast<unsigned>(blocks), detail::kThreads, 0, stream>>>(
        partial_scale, partial_bias, chunks, args.cols, static_cast<T*>(d_dscale),
        static_cast<T*>(d_dbias));
    return cudaGetLastError();
  });
}

}  // namespace ampc::cuda
