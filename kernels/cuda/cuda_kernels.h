// The CUDA backend's kernels: one Register* function per family (kernels/cuda/<family>_ops.cc),
// all called by RegisterCudaKernels. The launchers they call are in the .cu files beside them.
#pragma once

#include "runtime/core/kernel_registry.h"

namespace ampc {

void RegisterCudaKernels(KernelRegistry& registry);

void RegisterCudaLinalgKernels(KernelRegistry& registry);  // Gemm, MatMul (cuBLASLt)
void RegisterCudaScalerKernels(KernelRegistry& registry);  // ai.ampc loss scaling, optimizers
// Reductions, Softmax/LogSoftmax and their grads (reduce_ops.cc); it also registers
// SoftmaxCrossEntropyLoss, LayerNormalization and their grads (reduce_loss_norm_ops.cc).
void RegisterCudaReduceKernels(KernelRegistry& registry);
void RegisterCudaLossAndNormKernels(KernelRegistry& registry);
// Broadcasting binary ops, unary ops, Where (elementwise_ops.cc).
void RegisterCudaElementwiseKernels(KernelRegistry& registry);
// Cast, CastLike, ConstantOfShape, Transpose, Expand (copy_ops.cc).
void RegisterCudaCopyKernels(KernelRegistry& registry);
// Conv, FusedConv, ConvGrad, pooling, BatchNormalization and their gradients (conv_ops.cc).
void RegisterCudaConvKernels(KernelRegistry& registry);
// Gather, ScatterND, Sum (index_ops.cc).
void RegisterCudaIndexKernels(KernelRegistry& registry);
// ai.ampc.Dropout (dropout_ops.cc).
void RegisterCudaDropoutKernels(KernelRegistry& registry);

}  // namespace ampc
