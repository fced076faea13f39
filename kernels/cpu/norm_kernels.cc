// Normalization ops: LayerNormalization, BatchNormalization, InstanceNormalization,
// LpNormalization and MeanVarianceNormalization (Dropout: dropout_kernels.cc). Statistics
// accumulate in FP32 (chunked, reduce::ChunkedSum; MeanVarianceNormalization's in FP64) and every
// output is rounded once to its element type. Pooling lives in norm_pool_kernels.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/lane_sums.h"
#include "kernels/cpu/norm_common.h"
#include "kernels/cpu/reduce_common.h"
#include "kernels/cpu/scratch_arena.h"

namespace ampc {
namespace {

absl::Status UnsupportedType(const KernelContext& context, const Tensor& tensor,
                             absl::string_view what) {
  return NodeError(context, absl::StrCat(what, " has element type ", DTypeName(tensor.dtype()),
                                         ", which is not supported"));
}

// Rows of about kElementwiseGrain elements per parallel chunk.
int64_t RowGrain(int64_t row_length) {
  return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, row_length));
}

// A Scale or B input of LayerNormalization expanded (broadcast) to the normalized shape; `fill`
// where the input is omitted.
template <typename C>
absl::Status ExpandToShape(const KernelContext& context, const Tensor* param,
                           absl::string_view name, const Shape& target, C fill,
                           std::vector<C>& out) {
  const int64_t count = ElementCount(target);
  if (param == nullptr) {
    out.assign(static_cast<size_t>(count), fill);
    return absl::OkStatus();
  }
  std::vector<C> values;
  if (!LoadWidened(*param, values)) return UnsupportedType(context, *param, name);
  std::optional<Shape> shape = BroadcastShapes(target, param->shape());
  if (!shape.has_value() || *shape != target) {
    return NodeError(
        context, absl::StrCat(name, " of shape ", ShapeString(param->shape()),
                              " does not broadcast to the normalized shape ", ShapeString(target)));
  }
  const Shape* inputs[] = {&param->shape()};
  BroadcastIndex index(target, inputs);
  out.resize(static_cast<size_t>(count));
  index.ForRange(0, count,
                 [&](int64_t i, std::span<const int64_t> offsets) { out[i] = values[offsets[0]]; });
  return absl::OkStatus();
}

// Writes per-row statistics (Mean, InvStdDev) to output i if the node asks for it.
template <typename C>
absl::Status StoreStatistic(KernelContext& context, int i, const Shape& shape,
                            const std::vector<C>& values) {
  if (!WantsOutput(context, i)) return absl::OkStatus();
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(i, shape));
  if (!StoreRounded(values, *out)) return UnsupportedType(context, *out, "a statistics output");
  return absl::OkStatus();
}

absl::StatusOr<int64_t> NormalizeAxis(const KernelContext& context, int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) {
    return NodeError(context,
                     absl::StrCat("axis ", axis, " is out of range for an input of rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

// Mean and population variance of n elements in the compute type (sums chunked as
// reduce::ChunkedSum); two passes, so no cancellation as in E[x^2] - E[x]^2.
template <typename T, typename C = typename Compute<T>::type>
std::pair<C, C> Moments(const T* x, int64_t n) {
  const C mean = reduce::ChunkedSum<C>(n, [&](int64_t j) { return Compute<T>::Load(x[j]); }) /
                 static_cast<C>(n);
  const C squares = reduce::ChunkedSum<C>(n, [&](int64_t j) {
    const C d = Compute<T>::Load(x[j]) - mean;
    return d * d;
  });
  return {mean, squares / static_cast<C>(n)};
}

template <typename T>
absl::Status LayerNormTyped(KernelContext& context, int64_t axis, float epsilon) {
  using C = typename Compute<T>::type;
  const Tensor& x = context.in(0);
  const Shape normalized(x.shape().begin() + axis, x.shape().end());
  const int64_t cols = ElementCount(normalized);
  const int64_t rows = cols == 0 ? 0 : x.size() / cols;
  std::vector<C> scale, bias;
  AMPC_RETURN_IF_ERROR(
      ExpandToShape<C>(context, context.input(1), "Scale", normalized, C{1}, scale));
  AMPC_RETURN_IF_ERROR(ExpandToShape<C>(context, context.input(2), "B", normalized, C{0}, bias));
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, x.shape()));
  const T* px = x.data<T>();
  T* py = y->data<T>();
  std::vector<C> mean(static_cast<size_t>(rows)), inv_std(static_cast<size_t>(rows));
  CpuOf(context.backend())
      .pool()
      .ParallelFor(rows, RowGrain(cols), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const T* xr = px + r * cols;
          const auto [m, var] = Moments(xr, cols);
          const C inv = C{1} / std::sqrt(var + static_cast<C>(epsilon));
          for (int64_t j = 0; j < cols; ++j) {
            py[r * cols + j] =
                Compute<T>::Store((Compute<T>::Load(xr[j]) - m) * inv * scale[j] + bias[j]);
          }
          mean[r] = m;
          inv_std[r] = inv;
        }
      });
  Shape stat_shape = x.shape();
  for (size_t d = static_cast<size_t>(axis); d < stat_shape.size(); ++d) stat_shape[d] = 1;
  AMPC_RETURN_IF_ERROR(StoreStatistic(context, 1, stat_shape, mean));
  return StoreStatistic(context, 2, stat_shape, inv_std);
}

// Opset 17: Y = (X - mean) / sqrt(var + epsilon) * Scale + B over the dimensions from `axis` on;
// optional outputs Mean and InvStdDev have X's shape with those dimensions set to 1.
absl::Status LayerNormalization(KernelContext& context) {
  const Tensor& x = context.in(0);
  const Attributes attributes = context.attributes();
  AMPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(context, attributes.Int("axis", -1), x.rank()));
  const int64_t stash_type = attributes.Int("stash_type", 1);
  if (stash_type != static_cast<int64_t>(DType::kFloat)) {
    // FP32 statistics are what this runtime computes (FP64 for double inputs).
    return NodeError(
        context, absl::StrCat("stash_type ", stash_type, " is not supported (only 1, float32)"));
  }
  const float epsilon = attributes.Float("epsilon", 1e-5f);
  absl::Status status;
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(
      x.dtype(), [&]<typename T>() { status = LayerNormTyped<T>(context, axis, epsilon); });
  return handled ? status : UnsupportedType(context, x, "X");
}

// Per-channel (or, for spatial=0 before opset 9, per-element) affine normalization of planes.
struct BatchNormShape {
  int64_t batch, channels, inner, params;
};

// Mean and population variance of channels [c0, c0 + kLanes): two passes, so no cancellation as
// in E[x^2] - E[x]^2.
template <int kLanes, typename T, typename C>
void ChannelMoments(const T* px, const BatchNormShape& s, int64_t c0, C* mean, C* var) {
  const C count = static_cast<C>(s.batch * s.inner);
  const RowBlock block{s.batch, s.channels, s.inner};
  SumRows<kLanes>(
      px, block, c0, [](int, C v) { return v; }, mean + c0);
  for (int k = 0; k < kLanes; ++k) mean[c0 + k] /= count;
  SumRows<kLanes>(
      px, block, c0,
      [&](int k, C v) {
        const C d = v - mean[c0 + k];
        return d * d;
      },
      var + c0);
  for (int k = 0; k < kLanes; ++k) var[c0 + k] /= count;
}

// The batch statistics sum as ReduceSum over N and the spatial axes does (the step's
// BatchNormalizationGrad gets them from there): the same order and chunks, bit for bit, whatever
// the thread count (each channel is summed by one thread).
template <typename T, typename C>
void BatchMoments(const KernelContext& context, const T* px, const BatchNormShape& s, C* mean,
                  C* var) {
  const int64_t groups = s.channels / kRowLanes, rest = s.channels % kRowLanes;
  ParallelFor(context, groups + rest, kRowLanes * 2 * s.batch * s.inner,
              [&](int64_t begin, int64_t end) {
                for (int64_t g = begin; g < end; ++g) {
                  if (g < groups) {
                    ChannelMoments<kRowLanes>(px, s, g * kRowLanes, mean, var);
                  } else {
                    ChannelMoments<1>(px, s, groups * kRowLanes + (g - groups), mean, var);
                  }
                }
              });
}

// y = (x - mean) * inv_std * scale + B over one plane of n values, with per-element parameters
// (kPerElement) or one set; a block at a time through float for FP16/BF16.
template <bool kPerElement, typename T, typename C>
void NormalizePlane(const T* x, int64_t n, const C* mean, const C* inv, const C* scale,
                    const C* bias, T* y) {
  const auto affine = [&](C v, int64_t j) {
    const int64_t p = kPerElement ? j : 0;
    return (v - mean[p]) * inv[p] * scale[p] + bias[p];
  };
  if constexpr (kBlocked<T, T>) {
    float a[kElementwiseBlock];
    for (int64_t i = 0; i < n; i += kElementwiseBlock) {
      const int64_t m = std::min(kElementwiseBlock, n - i);
      WidenToAcc(x + i, m, a);
      for (int64_t j = 0; j < m; ++j) a[j] = affine(a[j], i + j);
      NarrowFromAcc(a, m, y + i);
    }
  } else {
    for (int64_t j = 0; j < n; ++j) y[j] = Compute<T>::Store(affine(Compute<T>::Load(x[j]), j));
  }
}

template <typename T>
absl::Status BatchNormTyped(KernelContext& context, const BatchNormShape& s, bool training) {
  using C = typename Compute<T>::type;
  const Attributes attributes = context.attributes();
  const C epsilon = static_cast<C>(attributes.Float("epsilon", 1e-5f));
  const C momentum = static_cast<C>(attributes.Float("momentum", 0.9f));
  std::vector<C> params[4];  // scale, B, mean, var
  const char* names[4] = {"scale", "B", "input_mean", "input_var"};
  for (int i = 0; i < 4; ++i) {
    const Tensor& p = context.in(i + 1);
    if (!LoadWidened(p, params[i])) return UnsupportedType(context, p, names[i]);
    if (p.size() != s.params) {
      return NodeError(context, absl::StrCat(names[i], " has ", p.size(), " elements (shape ",
                                             ShapeString(p.shape()), "), expected ", s.params));
    }
  }
  const T* px = context.in(0).data<T>();
  std::vector<C>& mean = params[2];
  std::vector<C>& var = params[3];
  if (training) {  // batch statistics (population variance) replace the inputs for Y
    std::vector<C> running_mean = mean, running_var = var;
    BatchMoments(context, px, s, mean.data(), var.data());
    for (int64_t c = 0; c < s.channels; ++c) {
      running_mean[c] = running_mean[c] * momentum + mean[c] * (C{1} - momentum);
      running_var[c] = running_var[c] * momentum + var[c] * (C{1} - momentum);
    }
    AMPC_RETURN_IF_ERROR(StoreStatistic(context, 1, {s.channels}, running_mean));
    AMPC_RETURN_IF_ERROR(StoreStatistic(context, 2, {s.channels}, running_var));
  }
  std::vector<C> inv_std(static_cast<size_t>(s.params));
  for (int64_t p = 0; p < s.params; ++p) inv_std[p] = C{1} / std::sqrt(var[p] + epsilon);
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, context.in(0).shape()));
  T* py = y->data<T>();
  const bool per_channel = s.params == s.channels;
  ParallelFor(context, s.batch * s.channels, s.inner, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t c = plane % s.channels, p = per_channel ? c : c * s.inner;
      const T* x = px + plane * s.inner;
      T* out = py + plane * s.inner;
      if (per_channel) {
        NormalizePlane<false>(x, s.inner, &mean[p], &inv_std[p], &params[0][p], &params[1][p], out);
      } else {
        NormalizePlane<true>(x, s.inner, &mean[p], &inv_std[p], &params[0][p], &params[1][p], out);
      }
    }
  });
  return absl::OkStatus();
}

// All opsets in inference form; training_mode=1 (opset 14+) normalizes with the batch statistics
// and outputs running_mean = input_mean * momentum + batch_mean * (1 - momentum) (same for var).
absl::Status BatchNormalization(KernelContext& context) {
  const Tensor& x = context.in(0);
  AMPC_RETURN_IF_ERROR(CheckBatchChannels(context, x));
  for (int i = 1; i <= 4; ++i) {
    if (context.input(i) == nullptr) {
      return NodeError(context, absl::StrCat("input ", i, " is required"));
    }
  }
  AMPC_ASSIGN_OR_RETURN(const bool training, BatchNormTraining(context));
  const Attributes attributes = context.attributes();
  const int opset = context.info().opset;
  BatchNormShape s{x.dim(0), x.dim(1), 1, x.dim(1)};
  for (int d = 2; d < x.rank(); ++d) s.inner *= x.dim(d);
  if (opset < 9 && attributes.Int("spatial", 1) == 0) s.params = s.channels * s.inner;
  absl::Status status;
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(
      x.dtype(), [&]<typename T>() { status = BatchNormTyped<T>(context, s, training); });
  return handled ? status : UnsupportedType(context, x, "X");
}

template <typename T>
absl::Status InstanceNormTyped(KernelContext& context, int64_t channels, int64_t inner) {
  using C = typename Compute<T>::type;
  const Tensor& x = context.in(0);
  const C epsilon = static_cast<C>(context.attributes().Float("epsilon", 1e-5f));
  std::vector<C> scale, bias;
  if (!LoadWidened(context.in(1), scale)) return UnsupportedType(context, context.in(1), "scale");
  if (!LoadWidened(context.in(2), bias)) return UnsupportedType(context, context.in(2), "B");
  if (static_cast<int64_t>(scale.size()) != channels ||
      static_cast<int64_t>(bias.size()) != channels) {
    return NodeError(context,
                     absl::StrCat("scale and B must have C = ", channels, " elements, got shapes ",
                                  ShapeString(context.in(1).shape()), " and ",
                                  ShapeString(context.in(2).shape())));
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, x.shape()));
  const T* px = x.data<T>();
  T* py = y->data<T>();
  const int64_t planes = inner == 0 ? 0 : x.size() / inner;
  CpuOf(context.backend()).pool().ParallelFor(planes, RowGrain(inner), [&](int64_t b, int64_t e) {
    for (int64_t plane = b; plane < e; ++plane) {
      const T* xp = px + plane * inner;
      const auto [m, var] = Moments(xp, inner);
      const C inv = C{1} / std::sqrt(var + epsilon);
      const int64_t c = plane % channels;
      for (int64_t j = 0; j < inner; ++j) {
        py[plane * inner + j] =
            Compute<T>::Store((Compute<T>::Load(xp[j]) - m) * inv * scale[c] + bias[c]);
      }
    }
  });
  return absl::OkStatus();
}

// Y = (X - mean) / sqrt(var + epsilon) * scale[c] + B[c], statistics per (n, c) plane.
absl::Status InstanceNormalization(KernelContext& context) {
  const Tensor& x = context.in(0);
  AMPC_RETURN_IF_ERROR(CheckBatchChannels(context, x));
  int64_t inner = 1;
  for (int d = 2; d < x.rank(); ++d) inner *= x.dim(d);
  absl::Status status;
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(
      x.dtype(), [&]<typename T>() { status = InstanceNormTyped<T>(context, x.dim(1), inner); });
  return handled ? status : UnsupportedType(context, x, "input");
}

// Y = X / ||X||_p along `axis` (p = 1 or 2); a zero norm gives 0, as ONNX's reference (not 0/0).
absl::Status LpNormalization(KernelContext& context) {
  const Tensor& x = context.in(0);
  const Attributes attributes = context.attributes();
  AMPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(context, attributes.Int("axis", -1), x.rank()));
  const int64_t p = attributes.Int("p", 2);
  if (p != 1 && p != 2) return NodeError(context, absl::StrCat("p must be 1 or 2, got ", p));
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x.dim(static_cast<int>(d));
  for (int d = static_cast<int>(axis) + 1; d < x.rank(); ++d) inner *= x.dim(d);
  const int64_t length = x.dim(static_cast<int>(axis));
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, x.shape()));
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(x.dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    const T* px = x.data<T>();
    T* py = y->data<T>();
    CpuOf(context.backend())
        .pool()
        .ParallelFor(outer * inner, RowGrain(length), [&](int64_t b, int64_t e) {
          for (int64_t line = b; line < e; ++line) {
            const int64_t base = (line / inner) * length * inner + line % inner;
            C norm = 0;
            for (int64_t k = 0; k < length; ++k) {
              const C v = Compute<T>::Load(px[base + k * inner]);
              norm += p == 1 ? std::abs(v) : v * v;
            }
            if (p == 2) norm = std::sqrt(norm);
            for (int64_t k = 0; k < length; ++k) {
              const C v = Compute<T>::Load(px[base + k * inner]);
              py[base + k * inner] = Compute<T>::Store(norm == C{0} ? C{0} : v / norm);
            }
          }
        });
  });
  return handled ? absl::OkStatus() : UnsupportedType(context, x, "input");
}

// ONNX's function body: Y = (X - E[X]) / (sqrt(E[(X - E[X])^2]) + 1e-9) over `axes`.
absl::Status MeanVarianceNormalization(KernelContext& context) {
  const Tensor& x = context.in(0);
  const int rank = x.rank();
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t axis : context.attributes().Ints("axes", {0, 2, 3})) {
    AMPC_ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(context, axis, rank));
    if (reduced[a]) return NodeError(context, absl::StrCat("axis ", axis, " appears twice"));
    reduced[a] = true;
  }
  // Group of each element: its index with the reduced axes dropped.
  std::vector<int64_t> group(static_cast<size_t>(x.size()));
  int64_t groups = 1;
  std::vector<int64_t> group_stride(static_cast<size_t>(rank), 0);
  for (int d = rank - 1; d >= 0; --d) {
    if (!reduced[d]) {
      group_stride[d] = groups;
      groups *= x.dim(d);
    }
  }
  std::vector<int64_t> index(static_cast<size_t>(rank), 0);
  for (int64_t i = 0, g = 0; i < x.size(); ++i) {
    group[i] = g;
    for (int d = rank - 1; d >= 0; --d) {
      g += group_stride[d];
      if (++index[d] < x.dim(d)) break;
      g -= index[d] * group_stride[d];
      index[d] = 0;
    }
  }
  const int64_t per_group = groups == 0 ? 0 : x.size() / groups;
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, x.shape()));
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(x.dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    const T* px = x.data<T>();
    T* py = y->data<T>();
    // Statistics accumulate in double; each output is computed in C from them, as Moments.
    std::vector<double> sums(static_cast<size_t>(groups), 0), squares(sums);
    for (int64_t i = 0; i < x.size(); ++i) sums[group[i]] += Compute<T>::Load(px[i]);
    for (double& m : sums) m /= static_cast<double>(per_group);
    for (int64_t i = 0; i < x.size(); ++i) {
      const double d = Compute<T>::Load(px[i]) - sums[group[i]];
      squares[group[i]] += d * d;
    }
    std::vector<C> mean(sums.begin(), sums.end()), deviation(squares.size());
    for (size_t g = 0; g < squares.size(); ++g) {
      deviation[g] = std::sqrt(static_cast<C>(squares[g] / static_cast<double>(per_group))) +
                     static_cast<C>(1e-9);
    }
    for (int64_t i = 0; i < x.size(); ++i) {
      py[i] = Compute<T>::Store((Compute<T>::Load(px[i]) - mean[group[i]]) / deviation[group[i]]);
    }
  });
  return handled ? absl::OkStatus() : UnsupportedType(context, x, "input");
}

}  // namespace

void RegisterNormKernels(KernelRegistry& r) {
  const std::vector<DType> floats = {AMPC_FLOAT_TYPES};
  r.Register("cpu", "", "LayerNormalization", {{0, floats}, {1, floats}, {2, floats}},
             LayerNormalization);
  r.Register("cpu", "", "BatchNormalization",
             {{0, floats}, {1, floats}, {2, floats}, {3, floats}, {4, floats}}, BatchNormalization);
  r.Register("cpu", "", "InstanceNormalization", {{0, floats}, {1, floats}, {2, floats}},
             InstanceNormalization);
  r.Register("cpu", "LpNormalization", floats, LpNormalization);
  r.Register("cpu", "MeanVarianceNormalization", floats, MeanVarianceNormalization);
  RegisterPoolKernels(r);
}

}  // namespace ampc
