// Softmax, LogSoftmax and Hardmax. Before opset 13 the input is coerced to 2-D at `axis` (default
// 1) and each row of prod(dims[axis:]) elements is normalised; from opset 13 the op runs along the
// single axis `axis` (default -1). The max is subtracted first, so large logits do not overflow.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cpu/reduce_common.h"
#include "passes/graph/status_macros.h"

namespace ampc::reduce {

enum class SoftmaxKind { kSoftmax, kLogSoftmax, kHardmax };

template <SoftmaxKind kKind, typename T>
void SoftmaxRows(const KernelContext& context, const AxisLayout& layout, const T* x, T* y) {
  using F = FloatAcc<T>;
  const int64_t n = layout.n, stride = layout.inner;
  ParallelFor(context, layout.rows(), n, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t start = layout.RowStart(r);
      const T* in = x + start;
      T* out = y + start;
      if (n == 0) continue;
      F max = Compute<T>::Load(in[0]);
      int64_t argmax = 0;
      for (int64_t k = 1; k < n; ++k) {
        const F v = Compute<T>::Load(in[k * stride]);
        if (v > max) {
          max = v;
          argmax = k;
        }
      }
      if constexpr (kKind == SoftmaxKind::kHardmax) {
        for (int64_t k = 0; k < n; ++k) out[k * stride] = StoreAs<T>(k == argmax ? F{1} : F{0});
        continue;
      }
      const F sum = ChunkedSum<F>(
          n, [&](int64_t k) { return std::exp(F(Compute<T>::Load(in[k * stride])) - max); });
      const F log_sum = std::log(sum);
      for (int64_t k = 0; k < n; ++k) {
        const F shifted = F(Compute<T>::Load(in[k * stride])) - max;
        if constexpr (kKind == SoftmaxKind::kSoftmax) {
          out[k * stride] = StoreAs<T>(std::exp(shifted) / sum);
        } else {
          out[k * stride] = StoreAs<T>(shifted - log_sum);
        }
      }
    }
  });
}

template <SoftmaxKind kKind>
absl::Status SoftmaxLike(KernelContext& context) {
  const Tensor& x = context.in(0);
  AMPC_ASSIGN_OR_RETURN(const AxisLayout layout, SoftmaxLayout(context));
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, x.shape()));
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(x.dtype(), [&]<typename T>() {
    SoftmaxRows<kKind, T>(context, layout, x.data<T>(), out->data<T>());
  });
  return handled ? absl::OkStatus() : UnsupportedType(context);
}

}  // namespace ampc::reduce
