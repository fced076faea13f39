// Helpers shared by the normalization and pooling kernels (norm_kernels.cc, norm_pool_kernels.cc,
// and the CUDA family's kernels/cuda/conv_family.h).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/dtype.h"
#include "runtime/core/kernel.h"
#include "runtime/core/kernel_registry.h"

namespace ampc {

// Pooling ops: MaxPool, AveragePool, LpPool and the global pools (norm_pool_kernels.cc).
void RegisterPoolKernels(KernelRegistry& registry);

// Whether the node names output i (an optional output left out, or named "", is not computed).
inline bool WantsOutput(const KernelContext& context, int i) {
  return i < context.num_outputs() && !context.info().node.output(i).empty();
}

// Batch-like inputs are N x C x D1 x ... (rank 2 or more).
inline absl::Status CheckBatchChannels(const KernelContext& context, const Tensor& x) {
  if (x.rank() >= 2) return absl::OkStatus();
  return NodeError(context, absl::StrCat("input must have rank 2 or more (N x C x ...), got shape ",
                                         ShapeString(x.shape())));
}

// BatchNormalization's training_mode (opset 14+): outputs 1 and up (the statistics) are computed
// only in training.
inline absl::StatusOr<bool> BatchNormTraining(const KernelContext& context) {
  const bool training =
      context.info().opset >= 14 && context.attributes().Int("training_mode", 0) != 0;
  for (int i = 1; i < context.num_outputs() && !training; ++i) {
    if (WantsOutput(context, i)) {
      return NodeError(context, absl::StrCat("output ", i,
                                             " (a training statistic) is only computed with "
                                             "training_mode=1, opset 14 or later"));
    }
  }
  return training;
}

// The elements of a float tensor of any float dtype, widened to C; false for another dtype.
template <typename C>
bool LoadWidened(const Tensor& tensor, std::vector<C>& values) {
  return Dispatch<AMPC_FLOAT_TYPES>(tensor.dtype(), [&]<typename T>() {
    const T* p = tensor.data<T>();
    values.resize(static_cast<size_t>(tensor.size()));
    for (size_t i = 0; i < values.size(); ++i) {
      values[i] = static_cast<C>(Compute<T>::Load(p[i]));
    }
  });
}

// Rounds values once into a float tensor of any float dtype; false for another dtype.
template <typename C>
bool StoreRounded(const std::vector<C>& values, Tensor& tensor) {
  return Dispatch<AMPC_FLOAT_TYPES>(tensor.dtype(), [&]<typename T>() {
    using W = typename Compute<T>::type;
    T* p = tensor.data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = Compute<T>::Store(static_cast<W>(values[i]));
  });
}

}  // namespace ampc
