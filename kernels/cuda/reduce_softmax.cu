// Softmax, LogSoftmax, their ai.ampc gradients, SoftmaxCrossEntropyLoss and its ai.ampc
// gradient. Rows of the [outer, n, inner] view: contiguous rows (inner 1) get a warp or a block
// each, strided rows go 32 to a block (reduce_device.cuh).
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
using detail::ComputeOf;
using detail::Io;
using detail::Tag;

// The max and sum(exp(x - max)) of row r (every thread of the group gets them). A NaN in the row
// makes the sum NaN, and with it every output of the row, as on the CPU.
template <typename T, typename Group, typename Index>
struct RowStats {
  using F = FloatOf<ComputeOf<T>>;
  F max, sum;
  __device__ RowStats(const T* x, const Index& index, int64_t base, int64_t first) {
    using Max = MaxReduce<F>;
    const int64_t n = index.n;
    F m = Max::Identity();
    for (int64_t k = first; k < n; k += Group::kSize) {
      m = Max::Combine(m, static_cast<F>(Io<T>::Load(x[index.At(base, k)])));
    }
    max = Group::AllReduce(m, detail::CombineOp<Max>());
    F s = 0;
    for (int64_t k = first; k < n; k += Group::kSize) {
      s += Exp(static_cast<F>(Io<T>::Load(x[index.At(base, k)])) - max);
    }
    sum = Group::AllReduce(s, AddOp());
  }
};

template <typename T, SoftmaxKind kKind, typename Group, typename Index>
__global__ void __launch_bounds__(detail::kThreads)
    SoftmaxKernel(const T* x, T* y, int64_t rows, Index index) {
  using F = FloatOf<ComputeOf<T>>;
  for (int64_t r0 = detail::FirstRow<Group>(); r0 < rows; r0 += detail::RowStride<Group>()) {
    const int64_t r = r0 + Group::Slot();
    const bool active = r < rows;
    const int64_t base = active ? index.Base(r) : 0;
    const int64_t first = active ? Group::Lane() : index.n;  // an inactive thread reads nothing
    const RowStats<T, Group, Index> stats(x, index, base, first);
    const F log_sum = Log(stats.sum);
    for (int64_t k = first; k < index.n; k += Group::kSize) {
      const int64_t i = index.At(base, k);
      const F v = Io<T>::Load(x[i]);
      y[i] = Io<T>::Store(kKind == SoftmaxKind::kSoftmax ? SoftmaxValue(v, stats.max, stats.sum)
                                                         : LogSoftmaxValue(v, stats.max, log_sum));
    }
  }
}

template <typename T, SoftmaxKind kKind, typename Group, typename Index>
__global__ void __launch_bounds__(detail::kThreads)
    SoftmaxGradKernel(const T* dy, const T* y, T* dx, int64_t rows, Index index) {
  using F = ComputeOf<T>;
  for (int64_t r0 = detail::FirstRow<Group>(); r0 < rows; r0 += detail::RowStride<Group>()) {
    const int64_t r = r0 + Group::Slot();
    const bool active = r < rows;
    const int64_t base = active ? index.Base(r) : 0;
    const int64_t first = active ? Group::Lane() : index.n;
    F sum = 0;
    for (int64_t k = first; k < index.n; k += Group::kSize) {
      const int64_t i = index.At(base, k);
      const F g = Io<T>::Load(dy[i]);
      sum += kKind == SoftmaxKind::kSoftmax ? SoftmaxGradTerm(g, F(Io<T>::Load(y[i]))) : g;
    }
    sum = Group::AllReduce(sum, AddOp());
    for (int64_t k = first; k < index.n; k += Group::kSize) {
      const int64_t i = index.At(base, k);
      const F g = Io<T>::Load(dy[i]), v = Io<T>::Load(y[i]);
      dx[i] = Io<T>::Store(kKind == SoftmaxKind::kSoftmax ? SoftmaxGradValue(g, v, sum)
                                                          : LogSoftmaxGradValue(g, v, sum));
    }
  }
}

bool ValidView(int64_t outer, int64_t n, int64_t inner) {
  return outer >= 0 && n >= 0 && inner >= 0;
}

// ---- SoftmaxCrossEntropyLoss -------------------------------------------------------------------

// Per row (sample n, position d): log_prob when asked for, and the element loss and weight: to
// `loss` for reduction "none", else to `losses` and `weights_used` (F, one per row).
template <typename T, typename L, typename Group, typename Index>
__global__ void __launch_bounds__(detail::kThreads)
    CrossEntropyRowsKernel(const T* x, const L* labels, const T* weights, T* loss, T* log_prob,
                           FloatOf<ComputeOf<T>>* losses, FloatOf<ComputeOf<T>>* weights_used,
                           int64_t rows, Index index, bool has_ignore, int64_t ignore_index) {
  using F = FloatOf<ComputeOf<T>>;
  const int64_t classes = index.n;
  for (int64_t r0 = detail::FirstRow<Group>(); r0 < rows; r0 += detail::RowStride<Group>()) {
    const int64_t r = r0 + Group::Slot();
    const bool active = r < rows;
    const int64_t base = active ? index.Base(r) : 0;
    const int64_t first = active ? Group::Lane() : classes;
    const RowStats<T, Group, Index> stats(x, index, base, first);
    const F log_sum = Log(stats.sum);
    if (log_prob != nullptr) {
      for (int64_t k = first; k < classes; k += Group::kSize) {
        const int64_t i = index.At(base, k);
        log_prob[i] = Io<T>::Store(CrossEntropyLogProb(F(Io<T>::Load(x[i])), stats.max, log_sum));
      }
    }
    if (!active || Group::Lane() != 0) continue;
    const int64_t label = static_cast<int64_t>(labels[r]);
    F element = 0, weight = 0;
    if (!LabelIgnored(label, has_ignore, ignore_index)) {
      if (LabelValid(label, classes)) {
        weight = weights == nullptr ? F{1} : F(Io<T>::Load(weights[label]));
        const F x_label = Io<T>::Load(x[index.At(base, label)]);
        element = CrossEntropyElementLoss(weight, CrossEntropyLogProb(x_label, stats.max, log_sum));
      } else {
        element = QuietNan<F>();  // no valid class to score
      }
    }
    if (losses == nullptr) {
      loss[r] = Io<T>::Store(element);
    } else {
      losses[r] = element;
      weights_used[r] = weight;
    }
  }
}

// One block sums `count` values of a and b in a fixed order: thread t sums elements t, t + 256,
// ... in turn, then the block tree. The same bits every run.
template <typename F>
__device__ void SumTwoInOrder(const F* a, const F* b, int64_t count, F* sum_a, F* sum_b) {
  F sa = 0, sb = 0;
  for (int64_t i = threadIdx.x; i < count; i += detail::kThreads) {
    sa += a[i];
    sb += b[i];
  }
  *sum_a = BlockRows::AllReduce(sa, AddOp());
  *sum_b = BlockRows::AllReduce(sb, AddOp());
}

// Launched as one block of kThreads: loss = ReducedLoss(sum of losses, sum of weights).
template <typename T>
__global__ void __launch_bounds__(detail::kThreads)
    CrossEntropyReduceKernel(const FloatOf<ComputeOf<T>>* losses,
                             const FloatOf<ComputeOf<T>>* weights_used, int64_t rows,
                             LossReduction reduction, T* loss) {
  using F = FloatOf<ComputeOf<T>>;
  F loss_sum, weight_sum;
  SumTwoInOrder(losses, weights_used, rows, &loss_sum, &weight_sum);
  if (threadIdx.x == 0) loss[0] = Io<T>::Store(ReducedLoss(reduction, loss_sum, weight_sum));
}

// The weight each label applies: 0 where ignored or invalid.
template <typename T, typename L>
__device__ FloatOf<ComputeOf<T>> AppliedWeight(const L* labels, const T* weights, int64_t row,
                                               int64_t classes, bool has_ignore,
                                               int64_t ignore_index) {
  using F = FloatOf<ComputeOf<T>>;
  const int64_t label = static_cast<int64_t>(labels[row]);
  if (LabelIgnored(label, has_ignore, ignore_index) || !LabelValid(label, classes)) return F{0};
  return weights == nullptr ? F{1} : F(Io<T>::Load(weights[label]));
}

// Launched as one block of kThreads for "mean": weight_sum[0] = the sum of the applied weights.
template <typename T, typename L>
__global__ void __launch_bounds__(detail::kThreads)
    WeightSumKernel(const L* labels, const T* weights, int64_t rows, int64_t classes,
                    bool has_ignore, int64_t ignore_index, FloatOf<ComputeOf<T>>* weight_sum) {
  using F = FloatOf<ComputeOf<T>>;
  F sum = 0;
  for (int64_t i = threadIdx.x; i < rows; i += detail::kThreads) {
    sum += AppliedWeight(labels, weights, i, classes, has_ignore, ignore_index);
  }
  sum = BlockRows::AllReduce(sum, AddOp());
  if (threadIdx.x == 0) weight_sum[0] = sum;
}

// dscores[n, c, d] for every element (grid-stride).
template <typename T, typename L>
__global__ void __launch_bounds__(detail::kThreads)
    CrossEntropyGradKernel(const T* dloss, const T* log_prob, const L* labels, const T* weights,
                           const FloatOf<ComputeOf<T>>* weight_sum, T* dscores,
                           CrossEntropyArgs args) {
  using F = FloatOf<ComputeOf<T>>;
  const int64_t total = args.n * args.classes * args.d;
  const F sum_of_weights = weight_sum == nullptr ? F{1} : weight_sum[0];
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t j = i % args.d, c = (i / args.d) % args.classes, s = i / (args.d * args.classes);
    const int64_t row = s * args.d + j;
    const int64_t label = static_cast<int64_t>(labels[row]);
    F v = 0;
    if (!LabelIgnored(label, args.has_ignore_index, args.ignore_index)) {
      if (LabelValid(label, args.classes)) {
        const F weight = weights == nullptr ? F{1} : F(Io<T>::Load(weights[label]));
        const F g = Io<T>::Load(dloss[args.reduction == LossReduction::kNone ? row : 0]);
        const F k = LossGradFactor(args.reduction, weight, g, sum_of_weights);
        v = CrossEntropyGradValue(k, F(Io<T>::Load(log_prob[i])), c == label);
      } else {
        v = QuietNan<F>();  // no valid class
      }
    }
    dscores[i] = Io<T>::Store(v);
  }
}

bool ValidArgs(const CrossEntropyArgs& args) {
  return args.n >= 0 && args.classes >= 0 && args.d >= 0 &&
         (args.label_type == ElemType::kInt32 || args.label_type == ElemType::kInt64);
}

size_t AccSize(ElemType type) { return type == ElemType::kDouble ? sizeof(double) : sizeof(float); }

// fn(Tag<L>{}) with L the label type.
template <typename Fn>
cudaError_t DispatchLabels(ElemType type, Fn&& fn) {
  if (type == ElemType::kInt32) return fn(Tag<int32_t>{});
  return fn(Tag<int64_t>{});
}

}  // namespace

cudaError_t Softmax(SoftmaxKind kind, ElemType type, const void* d_x, void* d_y, int64_t outer,
                    int64_t n, int64_t inner, cudaStream_t stream) {
  if (!ValidView(outer, n, inner)) return cudaErrorInvalidValue;
  const int64_t rows = outer * inner;
  return detail::DispatchFloat(type, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    if (rows == 0 || n == 0) return cudaSuccess;
    return detail::ForRows(rows, n, inner, [&](auto group, auto index) -> cudaError_t {
      using Group = decltype(group);
      using Index = decltype(index);
      const auto x = static_cast<const T*>(d_x);
      const auto y = static_cast<T*>(d_y);
      const unsigned blocks = detail::BlocksFor<Group>(rows);
      if (kind == SoftmaxKind::kSoftmax) {
        SoftmaxKernel<T, SoftmaxKind::kSoftmax, Group, Index>
            <<<blocks, Group::Block(), 0, stream>>>(x, y, rows, index);
      } else {
        SoftmaxKernel<T, SoftmaxKind::kLogSoftmax, Group, Index>
            <<<blocks, Group::Block(), 0, stream>>>(x, y, rows, index);
      }
      return cudaGetLastError();
    });
  });
}

cudaError_t SoftmaxGrad(SoftmaxKind kind, ElemType type, const void* d_dy, const void* d_y,
                        void* d_dx, int64_t outer, int64_t n, int64_t inner, cudaStream_t stream) {
  if (!ValidView(outer, n, inner)) return cudaErrorInvalidValue;
  const int64_t rows = outer * inner;
  return detail::DispatchFloat(type, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    if (rows == 0 || n == 0) return cudaSuccess;
    return detail::ForRows(rows, n, inner, [&](auto group, auto index) -> cudaError_t {
      using Group = decltype(group);
      using Index = decltype(index);
      const auto dy = static_cast<const T*>(d_dy);
      const auto y = static_cast<const T*>(d_y);
      const auto dx = static_cast<T*>(d_dx);
      const unsigned blocks = detail::BlocksFor<Group>(rows);
      if (kind == SoftmaxKind::kSoftmax) {
        SoftmaxGradKernel<T, SoftmaxKind::kSoftmax, Group, Index>
            <<<blocks, Group::Block(), 0, stream>>>(dy, y, dx, rows, index);
      } else {
        SoftmaxGradKernel<T, SoftmaxKind::kLogSoftmax, Group, Index>
            <<<blocks, Group::Block(), 0, stream>>>(dy, y, dx, rows, index);
      }
      return cudaGetLastError();
    });
  });
}

size_t SoftmaxCrossEntropyLossWorkspaceBytes(const CrossEntropyArgs& args) {
  if (!ValidArgs(args) || args.reduction == LossReduction::kNone) return 0;
  return 2 * static_cast<size_t>(args.n * args.d) * AccSize(args.type);
}

cudaError_t SoftmaxCrossEntropyLoss(const CrossEntropyArgs& args, const void* d_scores,
                                    const void* d_labels, const void* d_weights, void* d_loss,
                                    void* d_log_prob, void* d_workspace, cudaStream_t stream) {
  if (!ValidArgs(args)) return cudaErrorInvalidValue;
  const int64_t rows = args.n * args.d;
  const bool none = args.reduction == LossReduction::kNone;
  return detail::DispatchFloat(args.type, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    using F = FloatOf<ComputeOf<T>>;
    F* losses = none ? nullptr : static_cast<F*>(d_workspace);
    F* weights_used = none ? nullptr : losses + rows;
    const cudaError_t status = DispatchLabels(args.label_type, [&](auto label_tag) -> cudaError_t {
      using L = typename decltype(label_tag)::type;
      if (rows == 0) return cudaSuccess;
      return detail::ForRows(
          rows, args.classes, args.d, [&](auto group, auto index) -> cudaError_t {
            using Group = decltype(group);
            CrossEntropyRowsKernel<T, L, Group, decltype(index)>
                <<<detail::BlocksFor<Group>(rows), Group::Block(), 0, stream>>>(
                    static_cast<const T*>(d_scores), static_cast<const L*>(d_labels),
                    static_cast<const T*>(d_weights), static_cast<T*>(d_loss),
                    static_cast<T*>(d_log_prob), losses, weights_used, rows, index,
                    args.has_ignore_index, args.ignore_index);
            return cudaGetLastError();
          });
    });
    if (status != cudaSuccess || none) return status;
    // Also with no rows: the loss of nothing is 0 ("sum") or 0/0 ("mean"), as on the CPU.
    CrossEntropyReduceKernel<T><<<1, detail::kThreads, 0, stream>>>(
        losses, weights_used, rows, args.reduction, static_cast<T*>(d_loss));
    return cudaGetLastError();
  });
}

size_t SoftmaxCrossEntropyLossGradWorkspaceBytes(const CrossEntropyArgs& args) {
  if (!ValidArgs(args) || args.reduction != LossReduction::kMean) return 0;
  return AccSize(args.type);
}

cudaError_t SoftmaxCrossEntropyLossGrad(const CrossEntropyArgs& args, const void* d_dloss,
                                        const void* d_log_prob, const void* d_labels,
                                        const void* d_weights, void* d_dscores, void* d_workspace,
                                        cudaStream_t stream) {
  if (!ValidArgs(args)) return cudaErrorInvalidValue;
  const int64_t rows = args.n * args.d, total = rows * args.classes;
  return detail::DispatchFloat(args.type, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    using F = FloatOf<ComputeOf<T>>;
    return DispatchLabels(args.label_type, [&](auto label_tag) -> cudaError_t {
      using L = typename decltype(label_tag)::type;
      if (total == 0) return cudaSuccess;
      const auto labels = static_cast<const L*>(d_labels);
      const auto weights = static_cast<const T*>(d_weights);
      F* weight_sum = nullptr;
      if (args.reduction == LossReduction::kMean) {
        weight_sum = static_cast<F*>(d_workspace);
        WeightSumKernel<T, L><<<1, detail::kThreads, 0, stream>>>(
            labels, weights, rows, args.classes, args.has_ignore_index, args.ignore_index,
            weight_sum);
        if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
      }
      const int64_t blocks = std::min<int64_t>((total + detail::kThreads - 1) / detail::kThreads,
                                               detail::kMaxBlocks * 16);
      CrossEntropyGradKernel<T, L><<<static_cast<unsigned>(blocks), detail::kThreads, 0, stream>>>(
          static_cast<const T*>(d_dloss), static_cast<const T*>(d_log_prob), labels, weights,
          weight_sum, static_cast<T*>(d_dscores), args);
      return cudaGetLastError();
    });
  });
}

}  // namespace ampc::cuda
