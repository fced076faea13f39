// ReduceSum ... ReduceLogSumExp. The input's axes are coalesced (reduce_math.h) into an
// [outer, n, inner] view when the reduced dims are one run: rows of n contiguous elements get a
// warp or a block each, strided rows (inner > 1) go 32 to a block so loads coalesce. Any other
// pattern takes the general path: a warp per output, offsets decoded from the coalesced dims.
// Few long rows are cut into chunks instead (ReduceWorkspaceBytes), strided ones 32 to a block.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/cuda/reduce.h"
#include "kernels/cuda/reduce_device.cuh"

namespace ampc::cuda {
namespace {

using detail::BlockRows;
using detail::ColumnRows;
using detail::ComputeOf;
using detail::Io;
using detail::WarpRows;

// Rows over any coalesced layout: a row is one output (the kept dims, row-major), its elements
// the reduced dims in row-major order.
struct GeneralRows {
  int64_t n = 1;
  int kept_rank = 0, reduced_rank = 0;
  int64_t kept_sizes[kMaxReduceDims] = {}, kept_strides[kMaxReduceDims] = {};
  int64_t reduced_sizes[kMaxReduceDims] = {}, reduced_strides[kMaxReduceDims] = {};

  __device__ int64_t Base(int64_t r) const {
    int64_t offset = 0;
    for (int d = kept_rank - 1; d >= 0; --d) {
      offset += (r % kept_sizes[d]) * kept_strides[d];
      r /= kept_sizes[d];
    }
    return offset;
  }
  __device__ int64_t At(int64_t base, int64_t k) const {
    for (int d = reduced_rank - 1; d >= 0; --d) {
      base += (k % reduced_sizes[d]) * reduced_strides[d];
      k /= reduced_sizes[d];
    }
    return base;
  }
};

GeneralRows GeneralRowsOf(const ReduceLayout& layout) {
  GeneralRows rows;
  int64_t stride = 1;
  for (int d = layout.rank - 1; d >= 0; --d) {
    if (layout.reduced[d]) {
      rows.reduced_sizes[rows.reduced_rank] = layout.sizes[d];
      rows.reduced_strides[rows.reduced_rank++] = stride;
      rows.n *= layout.sizes[d];
    } else {
      rows.kept_sizes[rows.kept_rank] = layout.sizes[d];
      rows.kept_strides[rows.kept_rank++] = stride;
    }
    stride *= layout.sizes[d];
  }
  // Collected innermost first; the decoders want outermost first.
  for (int i = 0, j = rows.kept_rank - 1; i < j; ++i, --j) {
    std::swap(rows.kept_sizes[i], rows.kept_sizes[j]);
    std::swap(rows.kept_strides[i], rows.kept_strides[j]);
  }
  for (int i = 0, j = rows.reduced_rank - 1; i < j; ++i, --j) {
    std::swap(rows.reduced_sizes[i], rows.reduced_sizes[j]);
    std::swap(rows.reduced_strides[i], rows.reduced_strides[j]);
  }
  return rows;
}

template <typename Op>
constexpr bool kIsLogSumExp = false;
template <typename C>
constexpr bool kIsLogSumExp<LogSumExpReduce<C>> = true;

// y[r] = Op over row r of x, for `rows` rows laid out by `index`.
template <typename T, typename Op, typename Group, typename Index>
__global__ void __launch_bounds__(detail::kThreads)
    ReduceKernel(const T* x, T* y, int64_t rows, Index index) {
  using C = ComputeOf<T>;
  const int64_t n = index.n;
  for (int64_t r0 = detail::FirstRow<Group>(); r0 < rows; r0 += detail::RowStride<Group>()) {
    const int64_t r = r0 + Group::Slot();
    const bool active = r < rows;
    const int64_t base = active ? index.Base(r) : 0;
    const int64_t first = active ? Group::Lane() : n;  // an inactive thread reads nothing
    if constexpr (kIsLogSumExp<Op>) {
      using Max = MaxReduce<C>;
      C max = Max::Identity();
      for (int64_t k = first; k < n; k += Group::kSize) {
        max = Max::Combine(max, Io<T>::Load(x[index.At(base, k)]));
      }
      max = Group::AllReduce(max, detail::CombineOp<Max>());
      typename Op::A sum = Op::Identity();
      for (int64_t k = first; k < n; k += Group::kSize) {
        sum = Op::Combine(sum, Op::Map(Io<T>::Load(x[index.At(base, k)]), max));
      }
      sum = Group::AllReduce(sum, detail::CombineOp<Op>());
      if (active && Group::Lane() == 0) y[r] = Io<T>::Store(Op::Finish(max, sum));
    } else {
      typename Op::A acc = Op::Identity();
      for (int64_t k = first; k < n; k += Group::kSize) {
        acc = Op::Combine(acc, Op::Map(Io<T>::Load(x[index.At(base, k)])));
      }
      acc = Group::AllReduce(acc, detail::CombineOp<Op>());
      if (active && Group::Lane() == 0) y[r] = Io<T>::Store(Op::Finish(acc, n));
    }
  }
}

template <typename T, typename Op, typename Group, typename Index>
cudaError_t LaunchReduce(const T* x, T* y, int64_t rows, const Index& index, cudaStream_t stream) {
  ReduceKernel<T, Op, Group, Index>
      <<<detail::BlocksFor<Group>(rows), Group::Block(), 0, stream>>>(x, y, rows, index);
  return cudaGetLastError();
}

// ---- Few long rows: chunks of a row a block each, then the partials in a fixed order ----

constexpr int64_t kSplitChunk = 16 * detail::kThreads;  // elements per block, at least
// Blocks to aim for: rows * splits stays within it, so only up to 1024 rows split (more rows
// fill the GPU as they are).
constexpr int64_t kSplitBlocks = 2048;
constexpr size_t kPartialBytes = 8;  // every Op::A but LogSumExp's fits
// Strided rows (columns of a [n, inner] view, inner >= 32) split 32 columns to a block, so loads
// coalesce: chunks of this many elements per column, while there are few enough column groups.
// Narrower views split a row to a block: 32-column blocks would leave most threads idle.
constexpr int64_t kColumnChunk = 512;
constexpr int64_t kMaxColumnGroups = kSplitBlocks / 8;

struct SplitPlan {
  int64_t splits = 1;    // chunks per row; 1: no split
  bool columns = false;  // 32 strided rows to a block (ColumnRows), else one row (BlockRows)
  int64_t partials = 0;  // rows * splits when split: the workspace holds this many
};

// LogSumExp (two passes over a row) never splits.
SplitPlan PlanSplit(ReduceOp op, const ReduceLayout& layout) {
  int64_t rows = 1, n = 1;
  for (int d = 0; d < layout.rank; ++d) (layout.reduced[d] ? n : rows) *= layout.sizes[d];
  if (op == ReduceOp::kLogSumExp || rows == 0) return {};
  SplitPlan plan;
  OuterReduceInner view;
  const int64_t groups = (rows + ColumnRows::kRowsPerBlock - 1) / ColumnRows::kRowsPerBlock;
  if (AsOuterReduceInner(layout, &view) && view.inner >= ColumnRows::kColumns &&
      groups <= kMaxColumnGroups && n >= 2 * kColumnChunk) {
    plan.columns = true;
    plan.splits = std::min((n + kColumnChunk - 1) / kColumnChunk,
                           std::max<int64_t>(1, kSplitBlocks / groups));
  } else if (n >= 2 * kSplitChunk) {
    plan.splits =
        std::min((n + kSplitChunk - 1) / kSplitChunk, std::max<int64_t>(1, kSplitBlocks / rows));
  }
  if (plan.splits > 1) plan.partials = rows * plan.splits;
  return plan;
}

// partials[r * splits + s] = Op over chunk s of row r; block (s, g) takes chunk s of the rows of
// group g (Group::kRowsPerBlock rows).
template <typename T, typename Op, typename Group, typename Index>
__global__ void __launch_bounds__(detail::kThreads)
    ChunkKernel(const T* x, typename Op::A* partials, int64_t rows, int64_t chunk, Index index) {
  const int64_t r = int64_t{blockIdx.y} * Group::kRowsPerBlock + Group::Slot();
  const int64_t s = blockIdx.x;
  const bool active = r < rows;
  const int64_t begin = s * chunk, end = begin + chunk < index.n ? begin + chunk : index.n;
  const int64_t base = active ? index.Base(r) : 0;
  typename Op::A acc = Op::Identity();
  for (int64_t k = active ? begin + Group::Lane() : end; k < end; k += Group::kSize) {
    acc = Op::Combine(acc, Op::Map(Io<T>::Load(x[index.At(base, k)])));
  }
  acc = Group::AllReduce(acc, detail::CombineOp<Op>());
  if (active && Group::Lane() == 0) partials[r * gridDim.x + s] = acc;
}

// y[r] = Op's result from row r's `splits` partials, a warp per row.
template <typename T, typename Op>
__global__ void __launch_bounds__(detail::kThreads)
    FinishKernel(const typename Op::A* partials, int64_t splits, T* y, int64_t rows, int64_t n) {
  for (int64_t r0 = detail::FirstRow<WarpRows>(); r0 < rows; r0 += detail::RowStride<WarpRows>()) {
    const int64_t r = r0 + WarpRows::Slot();
    const bool active = r < rows;
    typename Op::A acc = Op::Identity();
    for (int64_t s = active ? WarpRows::Lane() : splits; s < splits; s += WarpRows::kSize) {
      acc = Op::Combine(acc, partials[r * splits + s]);
    }
    acc = WarpRows::AllReduce(acc, detail::CombineOp<Op>());
    if (active && WarpRows::Lane() == 0) y[r] = Io<T>::Store(Op::Finish(acc, n));
  }
}

template <typename T, typename Op, typename Group, typename Index>
cudaError_t LaunchSplit(const T* x, T* y, int64_t rows, int64_t splits, const Index& index,
                        void* workspace, cudaStream_t stream) {
  static_assert(sizeof(typename Op::A) <= kPartialBytes);
  if (workspace == nullptr) return cudaErrorMissingConfiguration;  // a caller's bug
  auto* partials = static_cast<typename Op::A*>(workspace);
  const int64_t chunk = (index.n + splits - 1) / splits;
  const int64_t groups = (rows + Group::kRowsPerBlock - 1) / Group::kRowsPerBlock;
  ChunkKernel<T, Op, Group, Index>
      <<<dim3(static_cast<unsigned>(splits), static_cast<unsigned>(groups)), Group::Block(), 0,
         stream>>>(x, partials, rows, chunk, index);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  FinishKernel<T, Op><<<detail::BlocksFor<WarpRows>(rows), WarpRows::Block(), 0, stream>>>(
      partials, splits, y, rows, index.n);
  return cudaGetLastError();
}

template <typename T, typename Op>
cudaError_t ReduceTyped(const void* d_x, void* d_y, const ReduceLayout& layout, void* workspace,
                        cudaStream_t stream) {
  const T* x = static_cast<const T*>(d_x);
  T* y = static_cast<T*>(d_y);
  int64_t rows = 1;
  for (int d = 0; d < layout.rank; ++d) rows *= layout.reduced[d] ? 1 : layout.sizes[d];
  if (rows == 0) return cudaSuccess;
  const SplitPlan plan = kIsLogSumExp<Op> ? SplitPlan{} : PlanSplit(ReduceOp::kSum, layout);
  const auto launch = [&](auto group, const auto& index) {
    if constexpr (!kIsLogSumExp<Op>) {
      // Columns split only for strided rows (no kernels for the other index types).
      if constexpr (std::is_same_v<std::decay_t<decltype(index)>, detail::StridedRows>) {
        if (plan.splits > 1 && plan.columns) {
          return LaunchSplit<T, Op, ColumnRows>(x, y, rows, plan.splits, index, workspace, stream);
        }
      }
      if (plan.splits > 1) {
        return LaunchSplit<T, Op, BlockRows>(x, y, rows, plan.splits, index, workspace, stream);
      }
    }
    return LaunchReduce<T, Op, decltype(group)>(x, y, rows, index, stream);
  };
  OuterReduceInner view;
  if (AsOuterReduceInner(layout, &view)) return detail::ForRows(rows, view.n, view.inner, launch);
  const GeneralRows general = GeneralRowsOf(layout);
  return general.n >= detail::kBlockRowLength ? launch(BlockRows{}, general)
                                              : launch(WarpRows{}, general);
}

template <template <typename> class OpOf>
struct ForOp {
  template <typename T>
  static cudaError_t Run(const void* x, void* y, const ReduceLayout& layout, void* workspace,
                         cudaStream_t stream) {
    return ReduceTyped<T, OpOf<ComputeOf<T>>>(x, y, layout, workspace, stream);
  }
};

// The typed launcher of ForOp over `type`: float types and int32/int64, and int8/uint8 too when
// kSmallInts.
template <typename Launch, bool kSmallInts>
cudaError_t DispatchReduce(ElemType type, const void* x, void* y, const ReduceLayout& layout,
                           void* workspace, cudaStream_t stream) {
  switch (type) {
    case ElemType::kFloat:
      return Launch::template Run<float>(x, y, layout, workspace, stream);
    case ElemType::kFloat16:
      return Launch::template Run<__half>(x, y, layout, workspace, stream);
    case ElemType::kBFloat16:
      return Launch::template Run<__nv_bfloat16>(x, y, layout, workspace, stream);
    case ElemType::kDouble:
      return Launch::template Run<double>(x, y, layout, workspace, stream);
    case ElemType::kInt32:
      return Launch::template Run<int32_t>(x, y, layout, workspace, stream);
    case ElemType::kInt64:
      return Launch::template Run<int64_t>(x, y, layout, workspace, stream);
    case ElemType::kInt8:
      if constexpr (kSmallInts)
        return Launch::template Run<int8_t>(x, y, layout, workspace, stream);
      return cudaErrorNotSupported;
    case ElemType::kUint8:
      if constexpr (kSmallInts)
        return Launch::template Run<uint8_t>(x, y, layout, workspace, stream);
      return cudaErrorNotSupported;
    default:
      return cudaErrorNotSupported;
  }
}

}  // namespace

size_t ReduceWorkspaceBytes(ReduceOp op, const int64_t* dims, int rank, const int* axes,
                            int num_axes) {
  ReduceLayout layout;
  if (!CoalesceReduce(dims, rank, axes, num_axes, &layout)) return 0;
  return static_cast<size_t>(PlanSplit(op, layout).partials) * kPartialBytes;
}

cudaError_t Reduce(ReduceOp op, ElemType type, const void* d_x, void* d_y, const int64_t* dims,
                   int rank, const int* axes, int num_axes, void* d_workspace,
                   cudaStream_t stream) {
  if (rank < 0 || num_axes < 0) return cudaErrorInvalidValue;
  for (int d = 0; d < rank; ++d) {
    if (dims[d] < 0) return cudaErrorInvalidValue;
  }
  for (int a = 0; a < num_axes; ++a) {
    if (axes[a] < 0 || axes[a] >= rank) return cudaErrorInvalidValue;
  }
  ReduceLayout layout;
  if (!CoalesceReduce(dims, rank, axes, num_axes, &layout)) return cudaErrorInvalidValue;
  switch (op) {
    case ReduceOp::kSum:
      return DispatchReduce<ForOp<SumReduce>, false>(type, d_x, d_y, layout, d_workspace, stream);
    case ReduceOp::kSumSquare:
      return DispatchReduce<ForOp<SumSquareReduce>, false>(type, d_x, d_y, layout, d_workspace,
                                                           stream);
    case ReduceOp::kMean:
      return DispatchReduce<ForOp<MeanReduce>, false>(type, d_x, d_y, layout, d_workspace, stream);
    case ReduceOp::kProd:
      return DispatchReduce<ForOp<ProdReduce>, false>(type, d_x, d_y, layout, d_workspace, stream);
    case ReduceOp::kL1:
      return DispatchReduce<ForOp<L1Reduce>, false>(type, d_x, d_y, layout, d_workspace, stream);
    case ReduceOp::kL2:
      return DispatchReduce<ForOp<L2Reduce>, false>(type, d_x, d_y, layout, d_workspace, stream);
    case ReduceOp::kLogSum:
      return DispatchReduce<ForOp<LogSumReduce>, false>(type, d_x, d_y, layout, d_workspace,
                                                        stream);
    case ReduceOp::kLogSumExp:
      return DispatchReduce<ForOp<LogSumExpReduce>, false>(type, d_x, d_y, layout, d_workspace,
                                                           stream);
    case ReduceOp::kMax:
      return DispatchReduce<ForOp<MaxReduce>, true>(type, d_x, d_y, layout, d_workspace, stream);
    case ReduceOp::kMin:
      return DispatchReduce<ForOp<MinReduce>, true>(type, d_x, d_y, layout, d_workspace, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace ampc::cuda
