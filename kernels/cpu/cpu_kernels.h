// The CPU backend's kernels, and the registry of every backend built into this binary.
#pragma once

#include "runtime/core/kernel_registry.h"

namespace ampc {

// One per kernel family (kernels/cpu/<family>_kernels.cc).
void RegisterElementwiseKernels(KernelRegistry& registry);
void RegisterLinalgKernels(KernelRegistry& registry);
void RegisterReduceKernels(KernelRegistry& registry);
void RegisterNormKernels(KernelRegistry& registry);
void RegisterTensorKernels(KernelRegistry& registry);
void RegisterMathKernels(KernelRegistry& registry);
void RegisterControlFlowKernels(KernelRegistry& registry);
void RegisterScalerKernels(KernelRegistry& registry);  // ai.ampc loss scaling and optimizers
void RegisterGradKernels(KernelRegistry& registry);
void RegisterResampleKernels(KernelRegistry& registry);   // Resize, Upsample, GridSample
void RegisterRecurrentKernels(KernelRegistry& registry);  // RNN, GRU, LSTM
void RegisterBitwiseKernels(KernelRegistry& registry);
void RegisterSelectionKernels(KernelRegistry& registry);  // Unique, NonMaxSuppression
void RegisterAttentionKernels(KernelRegistry& registry);
void RegisterLrnKernels(KernelRegistry& registry);
void RegisterUnpoolKernels(KernelRegistry& registry);  // MaxUnpool
void RegisterDropoutKernels(KernelRegistry& registry);  // Dropout, ai.ampc.Dropout

void RegisterCpuKernels(KernelRegistry& registry);

// CPU kernels (and CUDA kernels when that backend is built), registered once
// (kernels/default_registry.cc, library ampc_kernels).
const KernelRegistry& DefaultRegistry();

}  // namespace ampc
