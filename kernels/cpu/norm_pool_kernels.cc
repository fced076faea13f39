// Pooling ops: MaxPool (with optional Indices), AveragePool, LpPool, GlobalAveragePool,
// GlobalMaxPool and GlobalLpPool over N x C x D1 x ... x Dk inputs. Sums accumulate in FP32 (FP64
// for double) and each output is rounded once. Registered from RegisterNormKernels.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/norm_common.h"

namespace ampc {
namespace {

// Where every output element of one (n, c) plane reads: per spatial dimension and output
// coordinate, the input coordinates its window covers inside the input, and how many window
// positions lie inside the padded input (for count_include_pad).
struct PoolPlan {
  int64_t planes = 0;                                   // N * C
  Shape in, out;                                        // spatial dims
  int64_t in_size = 1;                                  // elements per input plane
  int64_t out_size = 1;                                 // elements per output plane
  std::vector<std::vector<std::vector<int64_t>>> taps;  // [dim][out coord] -> input coords
  std::vector<std::vector<int64_t>> padded;             // [dim][out coord] -> count with pads
};

struct PoolOptions {
  bool dilations = false;  // the op has a dilations attribute (MaxPool 10+)
  bool ceil_mode = false;  // the op has ceil_mode (MaxPool, AveragePool 10+)
};

absl::StatusOr<PoolPlan> MakePlan(const KernelContext& context, const Tensor& x,
                                  PoolOptions options) {
  const int dims = x.rank() - 2;
  if (dims < 1) {
    return NodeError(context, absl::StrCat("input must be N x C x D1 x ... (rank 3 or more), got ",
                                           ShapeString(x.shape())));
  }
  const Attributes attributes = context.attributes();
  const auto ints = [&](const std::string& name, int64_t fallback, size_t count) {
    std::vector<int64_t> v = attributes.Ints(name);
    return v.empty() ? std::vector<int64_t>(count, fallback) : v;
  };
  const std::vector<int64_t> kernel = attributes.Ints("kernel_shape");
  const std::vector<int64_t> strides = ints("strides", 1, dims);
  const std::vector<int64_t> dilations =
      options.dilations ? ints("dilations", 1, dims) : std::vector<int64_t>(dims, 1);
  std::vector<int64_t> pads = ints("pads", 0, 2 * dims);
  const bool ceil_mode = options.ceil_mode && attributes.Int("ceil_mode", 0) != 0;
  const std::string auto_pad = attributes.String("auto_pad", "NOTSET");
  if (static_cast<int>(kernel.size()) != dims || static_cast<int>(strides.size()) != dims ||
      static_cast<int>(dilations.size()) != dims || static_cast<int>(pads.size()) != 2 * dims) {
    return NodeError(
        context,
        absl::StrCat("for an input of shape ", ShapeString(x.shape()),
                     " kernel_shape, strides and dilations need ", dims, " values and pads ",
                     2 * dims, "; got [", absl::StrJoin(kernel, ","), "], [",
                     absl::StrJoin(strides, ","), "], [", absl::StrJoin(dilations, ","), "], [",
                     absl::StrJoin(pads, ","), "]"));
  }
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER") {
    return NodeError(context, absl::StrCat("auto_pad '", auto_pad,
                                           "' is not one of NOTSET, "
                                           "VALID, SAME_UPPER, SAME_LOWER"));
  }
  PoolPlan plan;
  plan.planes = x.dim(0) * x.dim(1);
  plan.taps.resize(dims);
  plan.padded.resize(dims);
  for (int d = 0; d < dims; ++d) {
    const int64_t in = x.dim(d + 2), k = kernel[d], s = strides[d], dil = dilations[d];
    if (k < 1 || s < 1 || dil < 1 || pads[d] < 0 || pads[d + dims] < 0) {
      return NodeError(context, absl::StrCat("spatial dimension ", d, ": kernel ", k, ", stride ",
                                             s, ", dilation ", dil, " must be positive and pads ",
                                             pads[d], ", ", pads[d + dims], " not negative"));
    }
    const int64_t extent = (k - 1) * dil + 1;
    int64_t out = 0;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + extent - in);
      pads[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[d + dims] = total - pads[d];
    } else {
      if (auto_pad == "VALID") pads[d] = pads[d + dims] = 0;
      const int64_t span = in + pads[d] + pads[d + dims] - extent;
      if (span < 0) {
        return NodeError(context, absl::StrCat("spatial dimension ", d, ": the window (", extent,
                                               ") is larger than the padded input (",
                                               in + pads[d] + pads[d + dims], ")"));
      }
      out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
      // With ceil_mode a last window that would start inside the end padding is dropped.
      if (ceil_mode && (out - 1) * s >= in + pads[d]) --out;
    }
    plan.in.push_back(in);
    plan.out.push_back(out);
    plan.in_size *= in;
    plan.out_size *= out;
    for (int64_t o = 0; o < out; ++o) {
      std::vector<int64_t> coords;
      int64_t inside_padding = 0;
      for (int64_t t = 0; t < k; ++t) {
        const int64_t i = o * s - pads[d] + t * dil;
        if (i >= 0 && i < in) coords.push_back(i);
        if (i < in + pads[d + dims]) ++inside_padding;
      }
      plan.taps[d].push_back(std::move(coords));
      plan.padded[d].push_back(inside_padding);
    }
  }
  return plan;
}

// Calls fn(out_index, offsets, padded_count) for every output element of a plane, with offsets the
// in-plane (row-major) input offsets of the window's elements that lie inside the input.
template <typename Fn>
void ForEachWindow(const PoolPlan& plan, Fn&& fn) {
  const int dims = static_cast<int>(plan.in.size());
  std::vector<int64_t> in_stride(dims, 1);
  for (int d = dims - 2; d >= 0; --d) in_stride[d] = in_stride[d + 1] * plan.in[d + 1];
  std::vector<int64_t> out(dims, 0), tap(dims, 0), offsets;
  for (int64_t o = 0; o < plan.out_size; ++o) {
    offsets.clear();
    int64_t padded = 1;
    bool empty = false;
    for (int d = 0; d < dims; ++d) {
      padded *= plan.padded[d][out[d]];
      empty = empty || plan.taps[d][out[d]].empty();
      tap[d] = 0;
    }
    while (!empty) {
      int64_t offset = 0;
      for (int d = 0; d < dims; ++d) offset += plan.taps[d][out[d]][tap[d]] * in_stride[d];
      offsets.push_back(offset);
      int d = dims - 1;
      for (; d >= 0; --d) {
        if (++tap[d] < static_cast<int64_t>(plan.taps[d][out[d]].size())) break;
        tap[d] = 0;
      }
      if (d < 0) break;
    }
    fn(o, std::span<const int64_t>(offsets), padded);
    for (int d = dims - 1; d >= 0; --d) {
      if (++out[d] < plan.out[d]) break;
      out[d] = 0;
    }
  }
}

Shape OutputShape(const Tensor& x, const Shape& spatial) {
  Shape shape = {x.dim(0), x.dim(1)};
  shape.insert(shape.end(), spatial.begin(), spatial.end());
  return shape;
}

// Runs fn(plane_in, plane_out_index, window offsets, padded count) over all planes in parallel.
template <typename Fn>
void ForEachPlaneWindow(KernelContext& context, const PoolPlan& plan, Fn&& fn) {
  int64_t work = plan.out_size;
  for (const auto& dim : plan.taps) work *= dim.empty() ? 1 : dim[0].size();
  CpuOf(context.backend())
      .pool()
      .ParallelFor(plan.planes,
                   std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, work)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t p = begin; p < end; ++p) {
                       ForEachWindow(plan, [&](int64_t o, std::span<const int64_t> offsets,
                                               int64_t padded) { fn(p, o, offsets, padded); });
                     }
                   });
}

// Row-major in-plane offset to the column-major one (storage_order=1).
int64_t ColumnMajor(const PoolPlan& plan, int64_t offset) {
  int64_t result = 0, stride = 1;
  std::vector<int64_t> index(plan.in.size());
  for (int d = static_cast<int>(plan.in.size()) - 1; d >= 0; --d) {
    index[d] = offset % plan.in[d];
    offset /= plan.in[d];
  }
  for (size_t d = 0; d < plan.in.size(); ++d) {
    result += index[d] * stride;
    stride *= plan.in[d];
  }
  return result;
}

// MaxPool: the largest element of each window (NaNs are skipped); Indices (int64) are offsets
// into the flattened input, the spatial part row-major or, with storage_order=1, column-major.
absl::Status MaxPool(KernelContext& context) {
  const Tensor& x = context.in(0);
  const int opset = context.info().opset;
  AMPC_ASSIGN_OR_RETURN(PoolPlan plan, MakePlan(context, x, {opset >= 10, opset >= 10}));
  const bool column_major = context.attributes().Int("storage_order", 0) != 0;
  const bool want_indices = WantsOutput(context, 1);
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, OutputShape(x, plan.out)));
  int64_t* indices = nullptr;
  if (want_indices) {
    AMPC_ASSIGN_OR_RETURN(Tensor * t, context.Output(1, OutputShape(x, plan.out), DType::kInt64));
    indices = t->data<int64_t>();
  }
  const bool handled =
      Dispatch<AMPC_FLOAT_TYPES, DType::kInt8, DType::kUint8>(x.dtype(), [&]<typename T>() {
        using C = typename Compute<T>::type;
        const T* px = x.data<T>();
        T* py = y->data<T>();
        ForEachPlaneWindow(context, plan,
                           [&](int64_t p, int64_t o, std::span<const int64_t> offsets, int64_t) {
                             const T* xp = px + p * plan.in_size;
                             C best = std::numeric_limits<C>::lowest();
                             if constexpr (std::numeric_limits<C>::has_infinity) {
                               best = -std::numeric_limits<C>::infinity();
                             }
                             int64_t best_offset = offsets.empty() ? 0 : offsets[0];
                             for (int64_t offset : offsets) {
                               const C v = Compute<T>::Load(xp[offset]);
                               if (v > best) {
                                 best = v;
                                 best_offset = offset;
                               }
                             }
                             py[p * plan.out_size + o] = Compute<T>::Store(best);
                             if (indices != nullptr) {
                               indices[p * plan.out_size + o] =
                                   p * plan.in_size +
                                   (column_major ? ColumnMajor(plan, best_offset) : best_offset);
                             }
                           });
      });
  return handled ? absl::OkStatus()
                 : NodeError(context, absl::StrCat("element type ", DTypeName(x.dtype()),
                                                   " is not supported"));
}

// AveragePool (count_include_pad: divide by the window positions inside the padded input, else by
// those inside the input) and LpPool ((sum |x|^p)^(1/p), padding contributing 0).
template <bool kLp>
absl::Status SumPool(KernelContext& context) {
  const Tensor& x = context.in(0);
  const int opset = context.info().opset;
  const Attributes attributes = context.attributes();
  AMPC_ASSIGN_OR_RETURN(PoolPlan plan, MakePlan(context, x, {false, !kLp && opset >= 10}));
  const bool include_pad = attributes.Int("count_include_pad", 0) != 0;
  const float p =
      kLp ? (opset >= 2 ? static_cast<float>(attributes.Int("p", 2)) : attributes.Float("p", 2.0f))
          : 1.0f;
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, OutputShape(x, plan.out)));
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(x.dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    const T* px = x.data<T>();
    T* py = y->data<T>();
    const C cp = static_cast<C>(p);
    ForEachPlaneWindow(
        context, plan,
        [&](int64_t plane, int64_t o, std::span<const int64_t> offsets, int64_t padded) {
          const T* xp = px + plane * plan.in_size;
          C sum = 0;
          for (int64_t offset : offsets) {
            const C v = Compute<T>::Load(xp[offset]);
            if constexpr (kLp) {
              sum += cp == C{2} ? v * v : std::pow(std::abs(v), cp);
            } else {
              sum += v;
            }
          }
          C result;
          if constexpr (kLp) {
            result = cp == C{2} ? std::sqrt(sum) : std::pow(sum, C{1} / cp);
          } else {
            result = sum / static_cast<C>(include_pad ? padded : offsets.size());
          }
          py[plane * plan.out_size + o] = Compute<T>::Store(result);
        });
  });
  return handled ? absl::OkStatus()
                 : NodeError(context, absl::StrCat("element type ", DTypeName(x.dtype()),
                                                   " is not supported"));
}

enum class GlobalKind { kAverage, kMax, kLp };

// Global pools: one value per (n, c) plane; the output keeps the rank with spatial dims 1.
template <GlobalKind kKind>
absl::Status GlobalPool(KernelContext& context) {
  const Tensor& x = context.in(0);
  if (x.rank() < 2) {
    return NodeError(context, absl::StrCat("input must be N x C x ... (rank 2 or more), got ",
                                           ShapeString(x.shape())));
  }
  Shape shape = x.shape();
  int64_t inner = 1;
  for (int d = 2; d < x.rank(); ++d) {
    inner *= x.dim(d);
    shape[d] = 1;
  }
  const Attributes attributes = context.attributes();
  const float p = context.info().opset >= 2 ? static_cast<float>(attributes.Int("p", 2))
                                            : attributes.Float("p", 2.0f);
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, shape));
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(x.dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    const T* px = x.data<T>();
    T* py = y->data<T>();
    const int64_t planes = x.dim(0) * x.dim(1);
    const C cp = static_cast<C>(p);
    CpuOf(context.backend())
        .pool()
        .ParallelFor(planes, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, inner)),
                     [&](int64_t begin, int64_t end) {
                       for (int64_t plane = begin; plane < end; ++plane) {
                         const T* xp = px + plane * inner;
                         C acc =
                             kKind == GlobalKind::kMax ? -std::numeric_limits<C>::infinity() : C{0};
                         for (int64_t j = 0; j < inner; ++j) {
                           const C v = Compute<T>::Load(xp[j]);
                           if constexpr (kKind == GlobalKind::kMax) {
                             if (v > acc) acc = v;
                           } else if constexpr (kKind == GlobalKind::kLp) {
                             acc += std::pow(std::abs(v), cp);
                           } else {
                             acc += v;
                           }
                         }
                         if constexpr (kKind == GlobalKind::kAverage) acc /= static_cast<C>(inner);
                         if constexpr (kKind == GlobalKind::kLp) acc = std::pow(acc, C{1} / cp);
                         py[plane] = Compute<T>::Store(acc);
                       }
                     });
  });
  return handled ? absl::OkStatus()
                 : NodeError(context, absl::StrCat("element type ", DTypeName(x.dtype()),
                                                   " is not supported"));
}

}  // namespace

void RegisterPoolKernels(KernelRegistry& r) {
  const std::vector<DType> floats = {AMPC_FLOAT_TYPES};
  r.Register("cpu", "MaxPool", {AMPC_FLOAT_TYPES, DType::kInt8, DType::kUint8}, MaxPool);
  r.Register("cpu", "AveragePool", floats, SumPool<false>);
  r.Register("cpu", "LpPool", floats, SumPool<true>);
  r.Register("cpu", "GlobalAveragePool", floats, GlobalPool<GlobalKind::kAverage>);
  r.Register("cpu", "GlobalMaxPool", floats, GlobalPool<GlobalKind::kMax>);
  r.Register("cpu", "GlobalLpPool", floats, GlobalPool<GlobalKind::kLp>);
}

}  // namespace ampc
