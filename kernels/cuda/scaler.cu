#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cuda/scaler.h"
#include "kernels/numerics/float16.h"
#include "kernels/numerics/lr_schedule.h"
#include "kernels/numerics/rounded.h"
#include "kernels/numerics/scaler_math.h"

namespace ampc::cuda {
namespace {

constexpr int kThreads = 256;         // per block; a multiple of the warp size
constexpr int64_t kChunk = 8192;      // elements per block
constexpr size_t kParamLimit = 4096;  // bytes of kernel parameters on every CUDA version

// The tensors of one launch: kDepth pointers per tensor; tensor i's chunks are the blocks
// [first_block[i], first_block[i + 1]). Passed by value as a kernel parameter.
template <int kDepth, int kMax>
struct Table {
  static constexpr int kCapacity = kMax;
  void* ptr[kDepth][kMax];
  int64_t count[kMax];
  int32_t first_block[kMax + 1];
  ElemType type[kMax];
  int32_t size;
  int64_t block_base;  // the global index of this launch's block 0 (for per-block partials)
};

using UnscaleTable = Table<2, 96>;  // gradient, FP32 output (null: not written)
using SgdTable = Table<5, 64>;      // param, grad, buf, param_out, buf_out
using AdamTable = Table<7, 48>;     // param, grad, m, v, param_out, m_out, v_out
// Room left for the other parameters of each kernel.
static_assert(sizeof(UnscaleTable) + 64 <= kParamLimit);
static_assert(sizeof(SgdTable) + 64 <= kParamLimit);
static_assert(sizeof(AdamTable) + 64 <= kParamLimit);

// One chunk's result for the finalize kernel.
struct Partial {
  double sum_of_squares;
  int32_t found;
  int32_t unused;
};
static_assert(sizeof(Partial) == 16);
constexpr size_t kScratchHeader = 16;  // the norm, for the clip launch

// ---- host: packing tensors into tables ----

// Packs the tensors with count(i) > 0, in order, into tables of at most kCapacity tensors;
// fill(table, slot, i) sets the slot's pointers and type. False when a table's block count would
// not fit in int32.
template <typename TableT, typename CountFn, typename FillFn>
bool PackTables(size_t n, CountFn count_of, FillFn fill, std::vector<TableT>& tables,
                int64_t& total_blocks) {
  tables.clear();
  total_blocks = 0;
  for (size_t i = 0; i < n; ++i) {
    const int64_t count = count_of(i);
    if (count == 0) continue;
    if (tables.empty() || tables.back().size == TableT::kCapacity) {
      tables.emplace_back();
      tables.back().size = 0;
      tables.back().first_block[0] = 0;
      tables.back().block_base = total_blocks;
    }
    TableT& t = tables.back();
    const int slot = t.size;
    const int64_t chunks = (count + kChunk - 1) / kChunk;
    if (chunks > std::numeric_limits<int32_t>::max() - t.first_block[slot]) return false;
    t.count[slot] = count;
    t.first_block[slot + 1] = t.first_block[slot] + static_cast<int32_t>(chunks);
    fill(t, slot, i);
    t.size = slot + 1;
    total_blocks += chunks;
  }
  return true;
}

template <typename TableT>
unsigned Blocks(const TableT& t) {
  return static_cast<unsigned>(t.first_block[t.size]);
}

bool IsGradientType(ElemType type, bool allow_double) {
  return type == ElemType::kFloat || type == ElemType::kFloat16 || type == ElemType::kBFloat16 ||
         (allow_double && type == ElemType::kDouble);
}

void* Mutable(const void* p) { return const_cast<void*>(p); }

// ---- device: one block, one chunk ----

// The tensor whose chunks include block `b`: the last i with first_block[i] <= b.
__device__ int FindTensor(const int32_t* first_block, int size, int b) {
  int lo = 0, hi = size - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (first_block[mid] <= b) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

struct Chunk {
  int tensor;
  int64_t begin, end;  // elements [begin, end) of the tensor
};

template <typename TableT>
__device__ Chunk ChunkOfBlock(const TableT& t) {
  const int b = static_cast<int>(blockIdx.x);
  Chunk c;
  c.tensor = FindTensor(t.first_block, t.size, b);
  c.begin = static_cast<int64_t>(b - t.first_block[c.tensor]) * kChunk;
  const int64_t end = c.begin + kChunk;
  c.end = end < t.count[c.tensor] ? end : t.count[c.tensor];
  return c;
}

// Storage types of gradients: the non-finite test on the stored value, the exact widening (a
// double rounds to float, as the CPU's static_cast<float>).
struct FloatIn {
  using T = float;
  __device__ static bool NonFinite(float x) { return math::NonFinite(x); }
  __device__ static float Widen(float x) { return x; }
};
struct HalfIn {
  using T = Half;
  __device__ static bool NonFinite(Half x) { return math::NonFinite(x); }
  __device__ static float Widen(Half x) { return HalfToFloat(x.bits); }
};
struct BFloat16In {
  using T = BFloat16;
  __device__ static bool NonFinite(BFloat16 x) { return math::NonFinite(x); }
  __device__ static float Widen(BFloat16 x) { return BFloat16ToFloat(x.bits); }
};
struct DoubleIn {
  using T = double;
  __device__ static bool NonFinite(double x) { return math::NonFinite(x); }
  __device__ static float Widen(double x) { return math::ToFloat(x); }
};

// The block's sum of x in a fixed order (warp shuffles, then the warps' sums in order);
// valid in thread 0. Called at most once per kernel (the shared buffer is not reused).
__device__ double BlockSum(double x) {
  __shared__ double warp_sums[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) {
    x = rounded::Add(x, __shfl_down_sync(0xffffffffu, x, offset));
  }
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = x;
  __syncthreads();
  double total = 0.0;
  if (threadIdx.x == 0) {
    for (int w = 0; w < kThreads / 32; ++w) total = rounded::Add(total, warp_sums[w]);
  }
  return total;
}

__device__ void CopyChunk(const float* in, float* out, const Chunk& c) {
  if (in == out) return;
  for (int64_t k = c.begin + threadIdx.x; k < c.end; k += blockDim.x) out[k] = in[k];
}

// ---- CheckFinite / UnscaleClip ----

template <typename In>
__device__ void UnscaleChunk(const void* grad, float* out, const Chunk& c, float inv, bool& found,
                             double& sum) {
  const typename In::T* g = static_cast<const typename In::T*>(grad);
  for (int64_t k = c.begin + threadIdx.x; k < c.end; k += blockDim.x) {
    const typename In::T x = g[k];
    found = found || In::NonFinite(x);
    const float u = math::Unscale(In::Widen(x), inv);
    if (out != nullptr) out[k] = u;
    sum = rounded::Add(sum, math::Square(u));
  }
}

__global__ void __launch_bounds__(kThreads)
    UnscaleKernel(const __grid_constant__ UnscaleTable t, const float* scale, Partial* partials) {
  const Chunk c = ChunkOfBlock(t);
  const void* grad = t.ptr[0][c.tensor];
  float* out = static_cast<float*>(t.ptr[1][c.tensor]);
  const float inv = scale == nullptr ? 1.0f : math::InverseScale(*scale);
  bool found = false;
  double sum = 0.0;
  switch (t.type[c.tensor]) {
    case ElemType::kFloat:
      UnscaleChunk<FloatIn>(grad, out, c, inv, found, sum);
      break;
    case ElemType::kFloat16:
      UnscaleChunk<HalfIn>(grad, out, c, inv, found, sum);
      break;
    case ElemType::kBFloat16:
      UnscaleChunk<BFloat16In>(grad, out, c, inv, found, sum);
      break;
    case ElemType::kDouble:
      UnscaleChunk<DoubleIn>(grad, out, c, inv, found, sum);
      break;
    default:
      break;  // rejected on the host
  }
  const bool any = __syncthreads_or(found ? 1 : 0) != 0;
  const double total = BlockSum(sum);
  if (threadIdx.x == 0) partials[t.block_base + blockIdx.x] = Partial{total, any ? 1 : 0, 0};
}

// The partials in a fixed order: each thread a strided subsequence, then BlockSum.
__global__ void __launch_bounds__(kThreads)
    FinalizeKernel(const Partial* partials, int64_t n, float* norm_slot, float* norm, bool* found) {
  double sum = 0.0;
  bool any = false;
  for (int64_t p = threadIdx.x; p < n; p += kThreads) {
    sum = rounded::Add(sum, partials[p].sum_of_squares);
    any = any || partials[p].found != 0;
  }
  any = __syncthreads_or(any ? 1 : 0) != 0;
  const double total = BlockSum(sum);
  if (threadIdx.x == 0) {
    const float result = math::NormOf(total);
    *norm_slot = result;
    if (norm != nullptr) *norm = result;
    if (found != nullptr) *found = any;
  }
}

__global__ void __launch_bounds__(kThreads)
    ClipKernel(const __grid_constant__ UnscaleTable t, const float* norm_slot, float max_norm) {
  const Chunk c = ChunkOfBlock(t);
  float* out = static_cast<float*>(t.ptr[1][c.tensor]);
  const float coef = math::ClipCoefficient(*norm_slot, max_norm);
  for (int64_t k = c.begin + threadIdx.x; k < c.end; k += blockDim.x) {
    out[k] = rounded::Multiply(out[k], coef);
  }
}

// ---- UpdateScale ----

__global__ void UpdateScaleKernel(const float* scale, const int64_t* tracker,
                                  const int64_t* hysteresis_left, const bool* found,
                                  const bool* loss_bad, math::ScaleAttrs attrs, float* scale_out,
                                  int64_t* tracker_out, int64_t* hysteresis_left_out) {
  math::ScaleState s{*scale, *tracker, *hysteresis_left};
  s = math::UpdateScale(s, *found, loss_bad != nullptr && *loss_bad, attrs);
  *scale_out = s.scale;
  *tracker_out = s.tracker;
  *hysteresis_left_out = s.hysteresis_left;
}

__global__ void LearningRateKernel(const double* words, const int64_t* step, float* rate) {
  *rate = DecodedLearningRate(words, *step);
}

// ---- SGD ----

template <typename In>
__device__ void SgdChunk(const math::SgdScalars& s, const float* p, const void* grad,
                         const float* buf, float* p_out, float* buf_out, const Chunk& c) {
  const typename In::T* g = static_cast<const typename In::T*>(grad);
  for (int64_t k = c.begin + threadIdx.x; k < c.end; k += blockDim.x) {
    float b = 0.0f;
    const float next = math::SgdElement(s, p[k], In::Widen(g[k]), s.has_buf ? buf[k] : 0.0f, &b);
    p_out[k] = next;
    if (s.has_buf) buf_out[k] = b;
  }
}

__global__ void __launch_bounds__(kThreads)
    SgdKernel(const __grid_constant__ SgdTable t, math::SgdAttrs attrs, const bool* skip,
              const float* lr, const bool* first) {
  const Chunk c = ChunkOfBlock(t);
  const int i = c.tensor;
  const float* p = static_cast<const float*>(t.ptr[0][i]);
  const void* grad = t.ptr[1][i];
  const float* buf = static_cast<const float*>(t.ptr[2][i]);
  float* p_out = static_cast<float*>(t.ptr[3][i]);
  float* buf_out = static_cast<float*>(t.ptr[4][i]);
  if (*skip) {
    CopyChunk(p, p_out, c);
    if (buf != nullptr) CopyChunk(buf, buf_out, c);
    return;
  }
  const math::SgdScalars s = math::SgdScalarsFor(attrs, *lr, *first);
  switch (t.type[i]) {
    case ElemType::kFloat:
      SgdChunk<FloatIn>(s, p, grad, buf, p_out, buf_out, c);
      break;
    case ElemType::kFloat16:
      SgdChunk<HalfIn>(s, p, grad, buf, p_out, buf_out, c);
      break;
    case ElemType::kBFloat16:
      SgdChunk<BFloat16In>(s, p, grad, buf, p_out, buf_out, c);
      break;
    default:
      break;  // rejected on the host
  }
}

// ---- Adam ----

template <typename In>
__device__ void AdamChunk(const math::AdamScalars& s, const float* p, const void* grad,
                          const float* m, const float* v, float* p_out, float* m_out, float* v_out,
                          const Chunk& c) {
  const typename In::T* g = static_cast<const typename In::T*>(grad);
  for (int64_t k = c.begin + threadIdx.x; k < c.end; k += blockDim.x) {
    const math::AdamElementResult r = math::AdamElement(s, p[k], In::Widen(g[k]), m[k], v[k]);
    p_out[k] = r.p;
    m_out[k] = r.m;
    v_out[k] = r.v;
  }
}

__global__ void __launch_bounds__(kThreads)
    AdamKernel(const __grid_constant__ AdamTable t, math::AdamAttrs attrs, const bool* skip,
               const float* lr, const int64_t* step) {
  const Chunk c = ChunkOfBlock(t);
  const int i = c.tensor;
  const float* p = static_cast<const float*>(t.ptr[0][i]);
  const void* grad = t.ptr[1][i];
  const float* m = static_cast<const float*>(t.ptr[2][i]);
  const float* v = static_cast<const float*>(t.ptr[3][i]);
  float* p_out = static_cast<float*>(t.ptr[4][i]);
  float* m_out = static_cast<float*>(t.ptr[5][i]);
  float* v_out = static_cast<float*>(t.ptr[6][i]);
  const int64_t n = *step;
  if (*skip || n < 1) {  // the same for every thread of the block
    CopyChunk(p, p_out, c);
    CopyChunk(m, m_out, c);
    CopyChunk(v, v_out, c);
    return;
  }
  // The scalars need pow in double: once per block.
  __shared__ math::AdamScalars shared;
  if (threadIdx.x == 0) shared = math::AdamScalarsFor(attrs, *lr, n);
  __syncthreads();
  const math::AdamScalars s = shared;
  switch (t.type[i]) {
    case ElemType::kFloat:
      AdamChunk<FloatIn>(s, p, grad, m, v, p_out, m_out, v_out, c);
      break;
    case ElemType::kFloat16:
      AdamChunk<HalfIn>(s, p, grad, m, v, p_out, m_out, v_out, c);
      break;
    case ElemType::kBFloat16:
      AdamChunk<BFloat16In>(s, p, grad, m, v, p_out, m_out, v_out, c);
      break;
    default:
      break;  // rejected on the host
  }
}

}  // namespace

size_t UnscaleScratchBytes(const std::vector<GradientRef>& grads) {
  int64_t blocks = 0;
  for (const GradientRef& g : grads) blocks += g.count > 0 ? (g.count + kChunk - 1) / kChunk : 0;
  return kScratchHeader + static_cast<size_t>(blocks) * sizeof(Partial);
}

cudaError_t CheckUnscaleClip(const std::vector<GradientRef>& grads, const std::vector<float*>& outs,
                             const float* d_scale, float max_norm, bool* d_found, float* d_norm,
                             void* d_scratch, size_t scratch_bytes, cudaStream_t stream) {
  const bool write = !outs.empty();
  if ((write && outs.size() != grads.size()) || (max_norm > 0.0f && !write)) {
    return cudaErrorInvalidValue;
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    const GradientRef& g = grads[i];
    if (g.count < 0 || !IsGradientType(g.type, true)) return cudaErrorInvalidValue;
    if (g.count > 0 && (g.data == nullptr || (write && outs[i] == nullptr))) {
      return cudaErrorInvalidValue;
    }
  }
  if (d_scratch == nullptr || scratch_bytes < UnscaleScratchBytes(grads) ||
      reinterpret_cast<uintptr_t>(d_scratch) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  std::vector<UnscaleTable> tables;
  int64_t blocks = 0;
  const bool packed = PackTables(
      grads.size(), [&](size_t i) { return grads[i].count; },
      [&](UnscaleTable& t, int slot, size_t i) {
        t.ptr[0][slot] = Mutable(grads[i].data);
        t.ptr[1][slot] = write ? outs[i] : nullptr;
        t.type[slot] = grads[i].type;
      },
      tables, blocks);
  if (!packed) return cudaErrorInvalidValue;
  float* norm_slot = static_cast<float*>(d_scratch);
  Partial* partials = reinterpret_cast<Partial*>(static_cast<char*>(d_scratch) + kScratchHeader);
  for (const UnscaleTable& t : tables) {
    UnscaleKernel<<<Blocks(t), kThreads, 0, stream>>>(t, d_scale, partials);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  FinalizeKernel<<<1, kThreads, 0, stream>>>(partials, blocks, norm_slot, d_norm, d_found);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (max_norm > 0.0f) {
    for (const UnscaleTable& t : tables) {
      ClipKernel<<<Blocks(t), kThreads, 0, stream>>>(t, norm_slot, max_norm);
      if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    }
  }
  return cudaSuccess;
}

cudaError_t UpdateScale(const float* d_scale, const int64_t* d_tracker,
                        const int64_t* d_hysteresis_left, const bool* d_found,
                        const bool* d_loss_bad, const math::ScaleAttrs& attrs, float* d_scale_out,
                        int64_t* d_tracker_out, int64_t* d_hysteresis_left_out,
                        cudaStream_t stream) {
  if (d_scale == nullptr || d_tracker == nullptr || d_hysteresis_left == nullptr ||
      d_found == nullptr || d_scale_out == nullptr || d_tracker_out == nullptr ||
      d_hysteresis_left_out == nullptr) {
    return cudaErrorInvalidValue;
  }
  UpdateScaleKernel<<<1, 1, 0, stream>>>(d_scale, d_tracker, d_hysteresis_left, d_found, d_loss_bad,
                                         attrs, d_scale_out, d_tracker_out, d_hysteresis_left_out);
  return cudaGetLastError();
}

cudaError_t LearningRate(const double* d_words, const int64_t* d_step, float* d_rate_out,
                         cudaStream_t stream) {
  if (d_words == nullptr || d_step == nullptr || d_rate_out == nullptr)
    return cudaErrorInvalidValue;
  LearningRateKernel<<<1, 1, 0, stream>>>(d_words, d_step, d_rate_out);
  return cudaGetLastError();
}

cudaError_t MultiTensorSgd(const std::vector<SgdTensor>& tensors, const math::SgdAttrs& attrs,
                           const bool* d_skip, const float* d_lr, const bool* d_first,
                           cudaStream_t stream) {
  const bool has_buf = attrs.momentum != 0.0f;
  if (d_skip == nullptr || d_lr == nullptr || d_first == nullptr) return cudaErrorInvalidValue;
  for (const SgdTensor& x : tensors) {
    if (x.count < 0 || !IsGradientType(x.grad_type, false)) return cudaErrorInvalidValue;
    if ((x.buf != nullptr) != has_buf || (x.buf_out != nullptr) != has_buf) {
      return cudaErrorInvalidValue;
    }
    if (x.count > 0 && (x.param == nullptr || x.grad == nullptr || x.param_out == nullptr)) {
      return cudaErrorInvalidValue;
    }
  }
  std::vector<SgdTable> tables;
  int64_t blocks = 0;
  const bool packed = PackTables(
      tensors.size(), [&](size_t i) { return tensors[i].count; },
      [&](SgdTable& t, int slot, size_t i) {
        const SgdTensor& x = tensors[i];
        t.ptr[0][slot] = Mutable(x.param);
        t.ptr[1][slot] = Mutable(x.grad);
        t.ptr[2][slot] = Mutable(x.buf);
        t.ptr[3][slot] = x.param_out;
        t.ptr[4][slot] = x.buf_out;
        t.type[slot] = x.grad_type;
      },
      tables, blocks);
  if (!packed) return cudaErrorInvalidValue;
  for (const SgdTable& t : tables) {
    SgdKernel<<<Blocks(t), kThreads, 0, stream>>>(t, attrs, d_skip, d_lr, d_first);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t MultiTensorAdam(const std::vector<AdamTensor>& tensors, const math::AdamAttrs& attrs,
                            const bool* d_skip, const float* d_lr, const int64_t* d_step,
                            cudaStream_t stream) {
  if (d_skip == nullptr || d_lr == nullptr || d_step == nullptr) return cudaErrorInvalidValue;
  for (const AdamTensor& x : tensors) {
    if (x.count < 0 || !IsGradientType(x.grad_type, false)) return cudaErrorInvalidValue;
    if (x.count > 0 &&
        (x.param == nullptr || x.grad == nullptr || x.m == nullptr || x.v == nullptr ||
         x.param_out == nullptr || x.m_out == nullptr || x.v_out == nullptr)) {
      return cudaErrorInvalidValue;
    }
  }
  std::vector<AdamTable> tables;
  int64_t blocks = 0;
  const bool packed = PackTables(
      tensors.size(), [&](size_t i) { return tensors[i].count; },
      [&](AdamTable& t, int slot, size_t i) {
        const AdamTensor& x = tensors[i];
        t.ptr[0][slot] = Mutable(x.param);
        t.ptr[1][slot] = Mutable(x.grad);
        t.ptr[2][slot] = Mutable(x.m);
        t.ptr[3][slot] = Mutable(x.v);
        t.ptr[4][slot] = x.param_out;
        t.ptr[5][slot] = x.m_out;
        t.ptr[6][slot] = x.v_out;
        t.type[slot] = x.grad_type;
      },
      tables, blocks);
  if (!packed) return cudaErrorInvalidValue;
  for (const AdamTable& t : tables) {
    AdamKernel<<<Blocks(t), kThreads, 0, stream>>>(t, attrs, d_skip, d_lr, d_step);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace ampc::cuda
