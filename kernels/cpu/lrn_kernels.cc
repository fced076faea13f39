// LRN (local response normalization across channels): y = x / (bias + alpha / size * s)^beta,
// s the sum of x^2 over the channels c - floor((size - 1) / 2) to c + ceil((size - 1) / 2) that
// exist, computed in FP32 (FP64 for double) and rounded once.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

struct LrnParams {
  float alpha, beta, bias;
  int64_t size;
};

template <typename T>
void LrnTyped(KernelContext& context, const LrnParams& p, const Tensor& x, Tensor& y) {
  using C = typename Compute<T>::type;
  const int64_t channels = x.dim(1), inner = x.size() / std::max<int64_t>(1, x.dim(0) * channels);
  const int64_t below = (p.size - 1) / 2, above = p.size - 1 - below;
  const C alpha = static_cast<C>(p.alpha) / static_cast<C>(p.size);
  const T* px = x.data<T>();
  T* py = y.data<T>();
  CpuOf(context.backend())
      .pool()
      .ParallelFor(x.size(), kElementwiseGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const int64_t c = (i / inner) % channels, base = i - c * inner;
          C sum = 0;
          for (int64_t k = std::max<int64_t>(0, c - below); k <= std::min(channels - 1, c + above);
               ++k) {
            const C v = Compute<T>::Load(px[base + k * inner]);
            sum += v * v;
          }
          const C v = Compute<T>::Load(px[i]);
          py[i] = Compute<T>::Store(
              v / std::pow(static_cast<C>(p.bias) + alpha * sum, static_cast<C>(p.beta)));
        }
      });
}

absl::Status Lrn(KernelContext& context) {
  const Tensor& x = context.in(0);
  const Attributes attributes = context.attributes();
  AMPC_ASSIGN_OR_RETURN(const int64_t size, attributes.RequiredInt("size"));
  if (size <= 0) return NodeError(context, absl::StrCat("size must be positive, got ", size));
  if (x.rank() < 2) {
    return NodeError(context,
                     absl::StrCat("input must be N x C x ..., got shape ", ShapeString(x.shape())));
  }
  const LrnParams p{attributes.Float("alpha", 1e-4f), attributes.Float("beta", 0.75f),
                    attributes.Float("bias", 1.0f), size};
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, x.shape()));
  const bool handled =
      Dispatch<AMPC_FLOAT_TYPES>(x.dtype(), [&]<typename T>() { LrnTyped<T>(context, p, x, *y); });
  return handled ? absl::OkStatus()
                 : NodeError(context, absl::StrCat("element type ", DTypeName(x.dtype()),
                                                   " is not supported"));
}

}  // namespace

void RegisterLrnKernels(KernelRegistry& r) { r.Register("cpu", "LRN", {AMPC_FLOAT_TYPES}, Lrn); }

}  // namespace ampc
