// The windows of the pooling ops (MaxPool, AveragePool, LpPool): output sizes from the attributes
// and, per output element, the input elements its window covers. Shared by the forward kernels
// (norm_pool_kernels.cc) and the gradient kernels (grad_pool.h). The windows are the same for
// every (n, c) plane, so they are worked out once per call.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/kernel.h"

namespace ampc::pool {

// Where the window of one output coordinate reads along one spatial axis: the first input
// coordinate inside the input, how many of its taps (a dilation apart) lie inside the input, and
// how many inside the padded input (for count_include_pad).
struct AxisWindow {
  int64_t first = 0;
  int64_t count = 0;
  int64_t padded = 0;
};

// The windows of one (n, c) plane; the same for every plane, so computed once per call.
struct PoolPlan {
  int64_t planes = 0;                         // N * C
  Shape in, out;                              // spatial dims
  int64_t in_size = 1;                        // elements per input plane
  int64_t out_size = 1;                       // elements per output plane
  int64_t window_size = 1;                    // taps per window, padding included
  std::vector<int64_t> dilations;             // per spatial dim
  std::vector<std::vector<AxisWindow>> axes;  // [dim][out coord]
  // The attributes the windows come from, auto_pad resolved: for a kernel that works out each
  // window itself (kernels/cuda/pool_ops.cc). pads: 2 * dims values, begin... then end...
  std::vector<int64_t> kernel, strides, pads;
};

// A pooled output's shape: x's N and C, then the `spatial` dims.
inline Shape PooledShape(const Tensor& x, const Shape& spatial) {
  Shape shape = {x.dim(0), x.dim(1)};
  shape.insert(shape.end(), spatial.begin(), spatial.end());
  return shape;
}

// A global pool's output shape (x's, spatial dims 1) and the elements of one (n, c) plane.
struct GlobalPoolShape {
  Shape output;
  int64_t inner = 1;
};

inline absl::StatusOr<GlobalPoolShape> PlanGlobalPool(const KernelContext& context,
                                                      const Tensor& x) {
  if (x.rank() < 2) {
    return NodeError(context, absl::StrCat("input must be N x C x ... (rank 2 or more), got ",
                                           ShapeString(x.shape())));
  }
  GlobalPoolShape s{x.shape()};
  for (int d = 2; d < x.rank(); ++d) {
    s.inner *= x.dim(d);
    s.output[d] = 1;
  }
  return s;
}

struct PoolOptions {
  bool dilations = false;  // the op has a dilations attribute (MaxPool 10+)
  bool ceil_mode = false;  // the op has ceil_mode (MaxPool, AveragePool 10+)
};

inline absl::StatusOr<PoolPlan> MakePlan(const KernelContext& context, const Tensor& x,
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
  plan.dilations = dilations;
  plan.kernel = kernel;
  plan.strides = strides;
  plan.axes.resize(dims);
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
    plan.window_size *= k;
    for (int64_t o = 0; o < out; ++o) {
      AxisWindow window;
      for (int64_t t = 0; t < k; ++t) {
        const int64_t i = o * s - pads[d] + t * dil;
        if (i >= 0 && i < in && window.count++ == 0) window.first = i;
        if (i < in + pads[d + dims]) ++window.padded;
      }
      plan.axes[d].push_back(window);
    }
  }
  plan.pads = pads;
  return plan;
}

// The window of one output element of a 1-D or 2-D pool: the taps inside the input, row by row
// (1-D: one row). kDense: no dilation, so each row's taps are contiguous.
template <bool kDense>
struct Window2D {
  const AxisWindow& rows;
  const AxisWindow& cols;
  int64_t row_step, col_step, width;

  int64_t count() const { return rows.count * cols.count; }
  int64_t padded() const { return rows.padded * cols.padded; }
  int64_t first() const { return count() == 0 ? 0 : rows.first * width + cols.first; }
  // Calls visit(in-plane offset) for each tap inside the input, in row-major order.
  template <typename Visit>
  void ForEach(Visit&& visit) const {
    const int64_t rs = kDense ? 1 : row_step, cs = kDense ? 1 : col_step;
    for (int64_t r = 0; r < rows.count; ++r) {
      const int64_t row = (rows.first + r * rs) * width + cols.first;
      for (int64_t c = 0; c < cols.count; ++c) visit(row + c * cs);
    }
  }
};

// The window of one output element of a pool over 3 or more spatial dims: its in-plane offsets.
struct ListWindow {
  std::span<const int64_t> offsets;
  int64_t padding_count;

  int64_t count() const { return static_cast<int64_t>(offsets.size()); }
  int64_t padded() const { return padding_count; }
  int64_t first() const { return offsets.empty() ? 0 : offsets[0]; }
  template <typename Visit>
  void ForEach(Visit&& visit) const {
    for (int64_t offset : offsets) visit(offset);
  }
};

// Every output element's window offsets (row-major, taps inside the input) for the N-d path.
struct WindowLists {
  std::vector<int64_t> offsets, begin, padded;  // begin: out_size + 1 entries into offsets
};

inline WindowLists MakeWindowLists(const PoolPlan& plan) {
  const int dims = static_cast<int>(plan.in.size());
  std::vector<int64_t> in_stride(dims, 1);
  for (int d = dims - 2; d >= 0; --d) in_stride[d] = in_stride[d + 1] * plan.in[d + 1];
  WindowLists lists;
  lists.begin.reserve(plan.out_size + 1);
  lists.padded.reserve(plan.out_size);
  std::vector<int64_t> out(dims, 0), tap(dims, 0);
  for (int64_t o = 0; o < plan.out_size; ++o) {
    lists.begin.push_back(static_cast<int64_t>(lists.offsets.size()));
    int64_t padded = 1;
    bool empty = false;
    for (int d = 0; d < dims; ++d) {
      padded *= plan.axes[d][out[d]].padded;
      empty = empty || plan.axes[d][out[d]].count == 0;
      tap[d] = 0;
    }
    lists.padded.push_back(padded);
    while (!empty) {
      int64_t offset = 0;
      for (int d = 0; d < dims; ++d) {
        const AxisWindow& w = plan.axes[d][out[d]];
        offset += (w.first + tap[d] * plan.dilations[d]) * in_stride[d];
      }
      lists.offsets.push_back(offset);
      int d = dims - 1;
      for (; d >= 0; --d) {
        if (++tap[d] < plan.axes[d][out[d]].count) break;
        tap[d] = 0;
      }
      if (d < 0) break;
    }
    for (int d = dims - 1; d >= 0; --d) {
      if (++out[d] < plan.out[d]) break;
      out[d] = 0;
    }
  }
  lists.begin.push_back(static_cast<int64_t>(lists.offsets.size()));
  return lists;
}

// Calls fn(out_index, offsets, padded_count) for every output element of a plane, with offsets the
// in-plane (row-major) input offsets of the window's elements that lie inside the input.
template <typename Fn>
void ForEachWindow(const PoolPlan& plan, Fn&& fn) {
  const WindowLists lists = MakeWindowLists(plan);
  for (int64_t o = 0; o < plan.out_size; ++o) {
    fn(o,
       std::span<const int64_t>(lists.offsets.data() + lists.begin[o],
                                lists.offsets.data() + lists.begin[o + 1]),
       lists.padded[o]);
  }
}

}  // namespace ampc::pool
