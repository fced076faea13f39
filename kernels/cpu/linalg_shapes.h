// MatMul's and Gemm's operand checks and shapes, shared by every backend's kernels so each
// accepts the same nodes with the same messages (defined in linalg_kernels.cc), and the index
// arithmetic of the patch kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/core/kernel.h"

namespace ampc::linalg {

// ONNX types every tensor input alike; a model that breaks this must not be read as another type.
absl::Status CheckSameTypes(const KernelContext& context);

// MatMul's shapes after numpy's rules: 1-D operands become a row (A) or a column (B) matrix,
// removed again from the output.
struct MatMulShape {
  int64_t m, k, n;
  Shape batch_a, batch_b, batch;
  Shape output;
};
absl::StatusOr<MatMulShape> InferMatMul(const KernelContext& context, const Shape& a,
                                        const Shape& b);

// Gemm's Y = alpha * op(A) * op(B) + beta * C: A and B (inputs 0, 1) 2-D with equal inner
// dimensions, the optional C (input 2) broadcasting to [m, n] unidirectionally.
struct GemmShape {
  bool trans_a, trans_b;
  int64_t m, k, n;
};
absl::StatusOr<GemmShape> InferGemm(const KernelContext& context);

// The row-major multi-index of `index` over `dims`.
inline void Unravel(int64_t index, const std::vector<int64_t>& dims, std::vector<int64_t>& out) {
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    out[d] = index % dims[d];
    index /= dims[d];
  }
}

// For each tap of a sliding window and each window position (both row-major), the row-major
// image position the tap reads there, or -1 in the padding (pad_begin: the first pads per axis).
inline std::vector<int64_t> WindowTargets(const std::vector<int64_t>& taps,
                                          const std::vector<int64_t>& windows,
                                          const std::vector<int64_t>& strides,
                                          const std::vector<int64_t>& dilations,
                                          const std::vector<int64_t>& pad_begin,
                                          const std::vector<int64_t>& image) {
  const int n = static_cast<int>(image.size());
  int64_t tap_count = 1, window_count = 1;
  for (int d = 0; d < n; ++d) {
    tap_count *= taps[d];
    window_count *= windows[d];
  }
  std::vector<int64_t> target;
  target.reserve(tap_count * window_count);
  std::vector<int64_t> tap(n), window(n);
  for (int64_t t = 0; t < tap_count; ++t) {
    Unravel(t, taps, tap);
    for (int64_t w = 0; w < window_count; ++w) {
      Unravel(w, windows, window);
      int64_t offset = 0;
      for (int d = 0; d < n && offset >= 0; ++d) {
        const int64_t i = window[d] * strides[d] - pad_begin[d] + tap[d] * dilations[d];
        offset = i >= 0 && i < image[d] ? offset * image[d] + i : -1;
      }
      target.push_back(offset);
    }
  }
  return target;
}

}  // namespace ampc::linalg
