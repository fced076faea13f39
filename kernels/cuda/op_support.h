// What every CUDA kernel (kernels/cuda/*_ops.cc) needs around its launchers: the backend's
// stream, element types as the launchers name them, and launch errors as node errors.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/elem_type.h"
#include "runtime/core/cuda_backend.h"
#include "runtime/core/kernel.h"

namespace ampc::cuda {

inline CudaBackend& BackendOf(const KernelContext& context) { return CudaOf(context.backend()); }

inline cudaStream_t StreamOf(const KernelContext& context) { return BackendOf(context).stream(); }

inline ElemType ElemOf(DType dtype) { return static_cast<ElemType>(dtype); }

// OK for cudaSuccess; else the node's error with CUDA's message.
inline absl::Status Launched(const KernelContext& context, cudaError_t error) {
  if (error == cudaSuccess) return absl::OkStatus();
  return NodeError(context, absl::StrCat("CUDA launch failed: ", cudaGetErrorString(error)));
}

// A status from below (cuDNN, an allocation, a plan) as the node's error; OK stays OK.
inline absl::Status Labeled(const KernelContext& context, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(context.info().label(), ": ", status.message()));
}

}  // namespace ampc::cuda
