// Reduce-family CUDA launchers: ReduceSum ... ReduceLogSumExp, Softmax/LogSoftmax and their
// gradients, SoftmaxCrossEntropyLoss and its gradient, LayerNormalization and its gradient. Their
// semantics are the CPU backend's (kernels/cpu/reduce_*.h, norm_kernels.cc, grad_*.h): FP16/BF16
// load to float, everything accumulates in FP32 (FP64 for FP64 inputs), each output is rounded
// once. Results differ from the CPU's only in summation order and the last bits of exp/log. Every
// result is the same run to run (no atomics). Plain C++ header: includable without nvcc.
//
// Pointers are device pointers; launches are asynchronous on `stream`; the result is the launch
// error, cudaErrorInvalidValue for bad sizes and cudaErrorNotSupported for an element type the op
// does not take (nothing is launched then).
#ifndef AMPC_KERNELS_CUDA_REDUCE_H_
#define AMPC_KERNELS_CUDA_REDUCE_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/elem_type.h"
#include "kernels/cuda/reduce_math.h"

namespace ampc::cuda {

// ---- Reductions --------------------------------------------------------------------------------

// y = op over the dims `axes` of x (row-major `dims`, `rank` of them; axes non-negative and
// distinct). y holds the kept dims in order (keepdims changes its shape, not its layout); no axes
// reduces nothing (each y is op of one element). Types: float, float16, bfloat16, double, int32,
// int64; kMax and kMin also int8 and uint8. cudaErrorInvalidValue when the dims, coalesced, still
// alternate between kept and reduced over more than kMaxReduceDims runs.
// Few long rows (a whole-tensor sum, per-channel statistics) are cut into chunks, a block each
// (32 columns to a block where the rows are columns of a wide enough view), whose partial
// results a second launch combines in a fixed order: d_workspace must then hold
// ReduceWorkspaceBytes(...) bytes (0: no workspace, d_workspace may be null;
// cudaErrorMissingConfiguration when it is null but needed).
size_t ReduceWorkspaceBytes(ReduceOp op, const int64_t* dims, int rank, const int* axes,
                            int num_axes);
cudaError_t Reduce(ReduceOp op, ElemType type, const void* d_x, void* d_y, const int64_t* dims,
                   int rank, const int* axes, int num_axes, void* d_workspace, cudaStream_t stream);

// ---- Softmax -----------------------------------------------------------------------------------

enum class SoftmaxKind { kSoftmax, kLogSoftmax };

// y = softmax (or log-softmax) of x along the middle axis of the [outer, n, inner] view (opset 13:
// the op's axis; before opset 13, inner = 1 and n the product of the dims from axis on). Float
// types.
cudaError_t Softmax(SoftmaxKind kind, ElemType type, const void* d_x, void* d_y, int64_t outer,
                    int64_t n, int64_t inner, cudaStream_t stream);

// ai.ampc SoftmaxGrad: dx = y * (dy - sum(dy * y)); LogSoftmaxGrad: dx = dy - exp(y) * sum(dy);
// sums along the middle axis of [outer, n, inner]. dy, y, dx of one float type.
cudaError_t SoftmaxGrad(SoftmaxKind kind, ElemType type, const void* d_dy, const void* d_y,
                        void* d_dx, int64_t outer, int64_t n, int64_t inner, cudaStream_t stream);

// ---- SoftmaxCrossEntropyLoss -------------------------------------------------------------------

struct CrossEntropyArgs {
  ElemType type = ElemType::kFloat;        // scores, weights, loss, log_prob, dloss, dscores
  ElemType label_type = ElemType::kInt64;  // kInt32 or kInt64
  int64_t n = 0, classes = 0, d = 1;       // scores [n, classes, d]; labels [n, d]
  bool has_ignore_index = false;
  int64_t ignore_index = 0;
  LossReduction reduction = LossReduction::kMean;
};

// Workspace for SoftmaxCrossEntropyLoss: the element losses and weights of "sum" and "mean",
// summed afterwards in a fixed order by one block (so the loss is the same bits every run).
size_t SoftmaxCrossEntropyLossWorkspaceBytes(const CrossEntropyArgs& args);

// loss ([n, d] for "none", else a scalar) and, when d_log_prob is not null, log_prob
// ([n, classes, d]) from scores [n, classes, d] and labels [n, d]; d_weights ([classes]) may be
// null. A label neither ignored nor in [0, classes) makes its loss NaN (the CPU backend fails the
// node instead).
cudaError_t SoftmaxCrossEntropyLoss(const CrossEntropyArgs& args, const void* d_scores,
                                    const void* d_labels, const void* d_weights, void* d_loss,
                                    void* d_log_prob, void* d_workspace, cudaStream_t stream);

// Workspace for SoftmaxCrossEntropyLossGrad: the sum of the applied weights ("mean" only).
size_t SoftmaxCrossEntropyLossGradWorkspaceBytes(const CrossEntropyArgs& args);

// ai.ampc SoftmaxCrossEntropyLossGrad: dscores [n, classes, d] from dloss (the loss's shape),
// log_prob [n, classes, d], labels and optional weights. An invalid label gives NaN in its row.
cudaError_t SoftmaxCrossEntropyLossGrad(const CrossEntropyArgs& args, const void* d_dloss,
                                        const void* d_log_prob, const void* d_labels,
                                        const void* d_weights, void* d_dscores, void* d_workspace,
                                        cudaStream_t stream);

// ---- LayerNormalization ------------------------------------------------------------------------

struct LayerNormArgs {
  ElemType type = ElemType::kFloat;       // x, y, scale, bias, dy, dx, dscale, dbias
  ElemType stat_type = ElemType::kFloat;  // mean, inv_std_dev: `type` or float
  int64_t rows = 0, cols = 0;             // x as [rows, cols]: cols the dims from axis on
  // Scale and bias are read at [j % size] for column j: each is the normalized shape, or a
  // suffix of it (leading dims 1 or absent), which is how they broadcast to it; a size
  // divides cols (cols where the input is absent).
  int64_t scale_size = 0, bias_size = 0;
  float epsilon = 1e-5f;
};

// Y = (x - mean) * inv_std_dev * scale + bias per row; mean and inv_std_dev ([rows]) are written
// when not null. d_scale or d_bias null stands for 1 or 0.
cudaError_t LayerNormalization(const LayerNormArgs& args, const void* d_x, const void* d_scale,
                               const void* d_bias, void* d_y, void* d_mean, void* d_inv_std_dev,
                               cudaStream_t stream);

// Workspace for LayerNormalizationGrad: per-chunk partial sums of dscale and dbias.
size_t LayerNormalizationGradWorkspaceBytes(const LayerNormArgs& args);

// ai.ampc LayerNormalizationGrad(dy, x, scale, mean, inv_std_dev) -> dx [rows, cols],
// dscale [cols], dbias [cols]; any output pointer may be null (not computed).
cudaError_t LayerNormalizationGrad(const LayerNormArgs& args, const void* d_dy, const void* d_x,
                                   const void* d_scale, const void* d_mean,
                                   const void* d_inv_std_dev, void* d_dx, void* d_dscale,
                                   void* d_dbias, void* d_workspace, cudaStream_t stream);

}  // namespace ampc::cuda

#endif  // AMPC_KERNELS_CUDA_REDUCE_H_
