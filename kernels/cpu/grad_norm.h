// LayerNormalizationGrad and BatchNormalizationGrad (ai.ampc): the backward of norm_kernels.cc's
// forward given the statistics it saved. With xhat = (x - mean) * inv_std and g = dy * scale:
// dx = inv_std * (g - mean(g) - xhat * mean(g * xhat)) over the normalized elements,
// dscale = sum(dy * xhat) and dbias = sum(dy) over the others.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/elementwise_convert.h"
#include "kernels/cpu/grad_common.h"
#include "kernels/cpu/scratch_arena.h"

namespace ampc::grad {

// n values of T from `in` as C: in place for T == C, else widened into `buffer`.
template <typename T, typename C>
const C* WidenedRow(const T* in, int64_t n, C* buffer) {
  if constexpr (std::is_same_v<T, C>) {
    return in;
  } else {
    WidenToAcc(in, n, buffer);
    return buffer;
  }
}

// The statistics input i (mean or inverse standard deviation, any float type) as `count` values.
template <typename C>
absl::Status LoadStatistic(const KernelContext& context, int i, const char* name, int64_t count,
                           std::vector<C>& values) {
  const Tensor* t = context.input(i);
  if (t == nullptr) return NodeError(context, absl::StrCat("input ", name, " is required"));
  if (!Widen(*t, values)) {
    return NodeError(context,
                     absl::StrCat(name, " must be a float tensor, got ", DTypeName(t->dtype())));
  }
  if (t->size() != count) {
    return NodeError(context, absl::StrCat(name, " has shape ", ShapeString(t->shape()),
                                           ", expected ", count, " values"));
  }
  return absl::OkStatus();
}

// Scale broadcast to the normalized shape, as LayerNormalization reads it.
template <typename T, typename C = typename Compute<T>::type>
absl::StatusOr<std::vector<C>> ExpandScale(const KernelContext& context, const Tensor& scale,
                                           const Shape& target) {
  std::optional<Shape> shape = BroadcastShapes(target, scale.shape());
  if (!shape.has_value() || *shape != target) {
    return NodeError(
        context, absl::StrCat("scale of shape ", ShapeString(scale.shape()),
                              " does not broadcast to the normalized shape ", ShapeString(target)));
  }
  const std::vector<C> values = Load<T>(scale);
  std::vector<C> out(static_cast<size_t>(ElementCount(target)));
  const Shape* inputs[] = {&scale.shape()};
  BroadcastIndex index(target, inputs);
  index.ForRange(0, static_cast<int64_t>(out.size()),
                 [&](int64_t i, std::span<const int64_t> offsets) { out[i] = values[offsets[0]]; });
  return out;
}

// LayerNormalizationGrad(dy, x, scale, mean, inv_std) -> dx, dscale, dbias; `axis` as the
// forward's. dscale and dbias have the normalized shape x.shape[axis:] (the autodiff pass reduces
// them to Scale's and B's shapes where those broadcast).
template <typename T>
absl::Status LayerNormGradTyped(KernelContext& context, int axis) {
  using C = typename Compute<T>::type;
  const Tensor& x = context.in(1);
  const Shape normalized(x.shape().begin() + axis, x.shape().end());
  const int64_t cols = ElementCount(normalized);
  const int64_t rows = cols == 0 ? 0 : x.size() / cols;
  AMPC_ASSIGN_OR_RETURN(std::vector<C> scale, ExpandScale<T>(context, context.in(2), normalized));
  std::vector<C> mean, inv;
  AMPC_RETURN_IF_ERROR(LoadStatistic(context, 3, "mean", rows, mean));
  AMPC_RETURN_IF_ERROR(LoadStatistic(context, 4, "inv_std_dev", rows, inv));
  const T* pdy = context.in(0).data<T>();
  const T* px = x.data<T>();
  const auto xhat = [&](int64_t r, int64_t j) {
    return (static_cast<C>(Compute<T>::Load(px[r * cols + j])) - mean[r]) * inv[r];
  };
  if (Wants(context, 0)) {
    AMPC_ASSIGN_OR_RETURN(Tensor * dx, context.Output(0, x.shape()));
    T* pdx = dx->data<T>();
    ParallelFor(context, rows, cols, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        C sum_g = 0, sum_gx = 0;
        for (int64_t j = 0; j < cols; ++j) {
          const C g = Compute<T>::Load(pdy[r * cols + j]) * scale[j];
          sum_g += g;
          sum_gx += g * xhat(r, j);
        }
        const C mean_g = sum_g / static_cast<C>(cols), mean_gx = sum_gx / static_cast<C>(cols);
        for (int64_t j = 0; j < cols; ++j) {
          const C g = Compute<T>::Load(pdy[r * cols + j]) * scale[j];
          pdx[r * cols + j] = Compute<T>::Store(inv[r] * (g - mean_g - xhat(r, j) * mean_gx));
        }
      }
    });
  }
  std::vector<C> dscale(static_cast<size_t>(cols)), dbias(static_cast<size_t>(cols));
  ParallelFor(context, cols, rows, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      C s = 0, b = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const C g = Compute<T>::Load(pdy[r * cols + j]);
        s += g * xhat(r, j);
        b += g;
      }
      dscale[j] = s;
      dbias[j] = b;
    }
  });
  if (Wants(context, 1)) AMPC_RETURN_IF_ERROR(Store<T>(context, 1, normalized, dscale));
  if (Wants(context, 2)) AMPC_RETURN_IF_ERROR(Store<T>(context, 2, normalized, dbias));
  return absl::OkStatus();
}

inline absl::Status LayerNormalizationGrad(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(CheckSameType(context, {1, 2}, {"x", "scale"}));
  const Tensor& x = context.in(1);
  AMPC_RETURN_IF_ERROR(CheckShape(context, context.in(0), "dy", x.shape()));
  const int64_t axis = context.attributes().Int("axis", -1);
  if (axis < -x.rank() || axis >= x.rank()) {
    return NodeError(context,
                     absl::StrCat("axis ", axis, " is out of range for x of rank ", x.rank()));
  }
  absl::Status status;
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(x.dtype(), [&]<typename T>() {
    status = LayerNormGradTyped<T>(context, static_cast<int>(axis < 0 ? axis + x.rank() : axis));
  });
  return handled ? status : Unsupported(context);
}

// The batch-norm gradient's view of x and dy: N x C planes of `inner` values.
struct BatchPlanes {
  int64_t batch, channels, inner;
};

// Channels whose gradient sums run side by side (two serial chains each, see kRowLanes in
// lane_sums.h).
inline constexpr int kGradLanes = 4;
inline constexpr int64_t kGradBlock = 512;  // values of a row widened at a time

// dscale[c] = sum(dy * xhat) and dbias[c] = sum(dy) for c in [c0, c0 + kLanes), each a running
// sum over (n, inner) in order.
template <int kLanes, typename T, typename C>
void ChannelGradSums(const T* pdy, const T* px, const BatchPlanes& s, int64_t c0, const C* mean,
                     const C* inv, C* dscale, C* dbias) {
  ScratchBuffer<C> buffer(2 * kLanes * kGradBlock);
  C m[kLanes], r[kLanes], ds[kLanes] = {}, db[kLanes] = {};
  const C* dy_rows[kLanes];
  const C* x_rows[kLanes];
  for (int k = 0; k < kLanes; ++k) m[k] = mean[c0 + k], r[k] = inv[c0 + k];
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t j0 = 0; j0 < s.inner; j0 += kGradBlock) {
      const int64_t count = std::min(kGradBlock, s.inner - j0);
      for (int k = 0; k < kLanes; ++k) {
        const int64_t at = (n * s.channels + c0 + k) * s.inner + j0;
        dy_rows[k] = WidenedRow(pdy + at, count, buffer.data() + 2 * k * kGradBlock);
        x_rows[k] = WidenedRow(px + at, count, buffer.data() + (2 * k + 1) * kGradBlock);
      }
      for (int64_t j = 0; j < count; ++j) {
        for (int k = 0; k < kLanes; ++k) {
          const C g = dy_rows[k][j];
          ds[k] += g * ((x_rows[k][j] - m[k]) * r[k]);
          db[k] += g;
        }
      }
    }
  }
  for (int k = 0; k < kLanes; ++k) dscale[c0 + k] = ds[k], dbias[c0 + k] = db[k];
}

// dx over one plane of channel c: scale * inv * (dy - mean(dy) - xhat * mean(dy * xhat)).
template <typename T, typename C>
void BatchNormGradPlane(const T* dy, const T* x, int64_t n, C k, C mean, C inv, C ds, C db, C count,
                        T* dx) {
  ScratchBuffer<C> buffer(std::is_same_v<T, C> ? 0 : 3 * kGradBlock);
  for (int64_t i = 0; i < n; i += kGradBlock) {
    const int64_t m = std::min(kGradBlock, n - i);
    const C* g = WidenedRow(dy + i, m, buffer.data());
    const C* v = WidenedRow(x + i, m, buffer.data() + kGradBlock);
    C* out = std::is_same_v<T, C> ? reinterpret_cast<C*>(dx + i) : buffer.data() + 2 * kGradBlock;
    for (int64_t j = 0; j < m; ++j) {
      const C xhat = (v[j] - mean) * inv;
      out[j] = k * (g[j] - db / count - xhat * ds / count);
    }
    if constexpr (!std::is_same_v<T, C>) NarrowFromAcc(out, m, dx + i);
  }
}

// BatchNormalizationGrad(dy, x, scale, saved_mean, saved_inv_std) -> dx, dscale, dbias: the
// backward of training-mode BatchNormalization (batch statistics over N and the spatial axes, per
// channel). `epsilon` is the forward's; saved_inv_std already includes it.
template <typename T>
absl::Status BatchNormGradTyped(KernelContext& context) {
  using C = typename Compute<T>::type;
  const Tensor& x = context.in(1);
  const int64_t batch = x.dim(0), channels = x.dim(1);
  const BatchPlanes s{batch, channels, batch * channels == 0 ? 0 : x.size() / (batch * channels)};
  std::vector<C> scale, mean, inv;
  AMPC_RETURN_IF_ERROR(LoadStatistic(context, 2, "scale", channels, scale));
  AMPC_RETURN_IF_ERROR(LoadStatistic(context, 3, "saved_mean", channels, mean));
  AMPC_RETURN_IF_ERROR(LoadStatistic(context, 4, "saved_inv_std", channels, inv));
  const T* pdy = context.in(0).data<T>();
  const T* px = x.data<T>();
  std::vector<C> dscale(static_cast<size_t>(channels)), dbias(static_cast<size_t>(channels));
  const int64_t groups = channels / kGradLanes, rest = channels % kGradLanes;
  ParallelFor(
      context, groups + rest, kGradLanes * batch * s.inner, [&](int64_t begin, int64_t end) {
        for (int64_t g = begin; g < end; ++g) {
          const int64_t c0 = g < groups ? g * kGradLanes : groups * kGradLanes + (g - groups);
          g < groups ? ChannelGradSums<kGradLanes>(pdy, px, s, c0, mean.data(), inv.data(),
                                                   dscale.data(), dbias.data())
                     : ChannelGradSums<1>(pdy, px, s, c0, mean.data(), inv.data(), dscale.data(),
                                          dbias.data());
        }
      });
  if (Wants(context, 0)) {
    AMPC_ASSIGN_OR_RETURN(Tensor * dx, context.Output(0, x.shape()));
    T* pdx = dx->data<T>();
    const C count = static_cast<C>(batch * s.inner);
    ParallelFor(context, batch * channels, s.inner, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const int64_t c = p % channels, at = p * s.inner;
        BatchNormGradPlane(pdy + at, px + at, s.inner, scale[c] * inv[c], mean[c], inv[c],
                           dscale[c], dbias[c], count, pdx + at);
      }
    });
  }
  // dscale and dbias take the scale's type, which may be wider than x's (an FP32 scale).
  absl::Status status;
  Dispatch<AMPC_FLOAT_TYPES>(context.in(2).dtype(), [&]<typename S>() {
    if (status.ok() && Wants(context, 1)) status = Store<S>(context, 1, {channels}, dscale);
    if (status.ok() && Wants(context, 2)) status = Store<S>(context, 2, {channels}, dbias);
  });
  return status;
}

inline absl::Status BatchNormalizationGrad(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(CheckSameType(context, {0, 1}, {"dy", "x"}));
  const Tensor& x = context.in(1);
  if (x.rank() < 2) {
    return NodeError(context, absl::StrCat("x must be N x C x ... (rank 2 or more), got shape ",
                                           ShapeString(x.shape())));
  }
  AMPC_RETURN_IF_ERROR(CheckShape(context, context.in(0), "dy", x.shape()));
  AMPC_RETURN_IF_ERROR(CheckShape(context, context.in(2), "scale", {x.dim(1)}));
  absl::Status status;
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(
      x.dtype(), [&]<typename T>() { status = BatchNormGradTyped<T>(context); });
  return handled ? status : Unsupported(context);
}

}  // namespace ampc::grad
