// Convolutions through cuDNN 9's legacy convolution API (cudnnConvolutionForward, BackwardData,
// BackwardFilter; deprecated in cuDNN 9 but present, and warned about only under
// CUDNN_WARN_DEPRECATED, which the build does not define). The tensors are NCHW / NCDHW, the ONNX
// layout. An FP16/BF16 convolution runs NHWC (tensor cores' order) on transposed copies where
// that is faster, the transposes counted: both layouts are timed once per shape, as the
// algorithms are. AMPC_CUDNN_LAYOUT=nchw or nhwc forces a layout.
//
// Precision: FP16 and BF16 tensors with FP32 compute (CUDNN_DATA_FLOAT), tensor cores allowed;
// FP32 with CUDNN_FMA_MATH, so never TF32. Algorithms: timed by cuDNN on the
// device (cudnnFind*Algorithm), the fastest deterministic one within kMaxCudnnWorkspace (the
// fastest other one only where there is none), chosen with the layout once per shape and cached in
// per-backend state with the cuDNN handle and one workspace buffer that grows to the largest need:
// no cudaMalloc per step once every shape has run.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/conv_geometry.h"
#include "kernels/cuda/elem_type.h"
#include "runtime/core/cuda_backend.h"

namespace ampc::cuda {

inline constexpr size_t kMaxCudnnWorkspace = size_t{256} << 20;

// One convolution as cuDNN is asked for it: 2 or 3 spatial dims, the same padding at both ends.
struct CudnnConvShape {
  ElemType type = ElemType::kFloat;
  int spatial = 2;
  std::array<int, 5> x{}, w{}, y{};  // the first spatial + 2 entries are used
  std::array<int, 3> pads{}, strides{}, dilations{};
  int group = 1;
};

// How a Conv node's geometry runs on cuDNN. A 1-D convolution becomes a 2-D one of height 1. An
// axis whose ONNX padding cuDNN's symmetric padding cannot give (pads that differ at the two
// ends, as SAME_UPPER often makes them) makes the plan pad X explicitly: X is copied into a
// zeroed buffer of cudnn.x's dims at offset `shift` (trailing elements no window reads are left
// out) and cuDNN pads nothing.
struct CudnnConvPlan {
  CudnnConvShape cudnn;
  bool explicit_pad = false;
  // With explicit_pad, per spatial dim as 3 (leading dims of size 1): X's dims, the padded
  // buffer's dims and X's offset in it.
  std::array<int64_t, 3> x_dims{1, 1, 1}, padded_dims{1, 1, 1}, shift{0, 0, 0};
};

// The plan for x, w of these shapes and geometry (from linalg::ConvShape); Unimplemented beyond 3
// spatial dims, InvalidArgument for a size cuDNN cannot index (a dim or a tensor of 2^31 or more).
absl::StatusOr<CudnnConvPlan> PlanCudnnConv(const Shape& x, const Shape& w,
                                            const linalg::ConvGeometry& g, ElemType type);

// y = conv(x, w); dx = the gradient of x for dy (given w); dw = the gradient of w for dy (given
// x). Every pointer is a device pointer of `shape`'s element type and dims; outputs are
// overwritten. Errors are Internal with cuDNN's message.
absl::Status CudnnConvForward(CudaBackend& backend, const CudnnConvShape& shape, const void* x,
                              const void* w, void* y);
absl::Status CudnnConvBackwardData(CudaBackend& backend, const CudnnConvShape& shape, const void* w,
                                   const void* dy, void* dx);
absl::Status CudnnConvBackwardFilter(CudaBackend& backend, const CudnnConvShape& shape,
                                     const void* x, const void* dy, void* dw);

}  // namespace ampc::cuda
