// GridSample (opsets 16, 20 and 22) for resample_kernels.cc, and the attribute tables both use.
// Y[n, c, o...] samples X[n, c] at the point grid[n, o...], whose k coordinates are normalised to
// [-1, 1] and list the last spatial axis first. As ONNX's reference (op_grid_sample.py): the
// coordinate is un-normalised in the grid's arithmetic (FP32 for FP16/BF16/FP32 grids), moved into
// the input by the padding mode (zeros: outside reads 0; border: clamped; reflection: mirrored at
// the borders), and interpolated per axis (nearest rounds half to even; linear; cubic with Keys'
// a = -0.75); the tap weights of the axes multiply. Any number of spatial axes (2-D and 3-D in
// the spec).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/resample_common.h"
#include "kernels/cpu/tensor_ops.h"
#include "passes/graph/status_macros.h"

namespace ampc::resample {

enum class GridMode { kNearest, kLinear, kCubic };
enum class Padding { kZeros, kBorder, kReflection };

// Opset 16 names the modes bilinear and bicubic, 20 on linear and cubic; both are accepted.
inline constexpr Named<GridMode> kGridModes[] = {{"nearest", GridMode::kNearest},
                                                 {"linear", GridMode::kLinear},
                                                 {"bilinear", GridMode::kLinear},
                                                 {"cubic", GridMode::kCubic},
                                                 {"bicubic", GridMode::kCubic}};
inline constexpr Named<Padding> kPaddings[] = {
    {"zeros", Padding::kZeros}, {"border", Padding::kBorder}, {"reflection", Padding::kReflection}};

struct GridOptions {
  GridMode mode = GridMode::kLinear;
  Padding padding = Padding::kZeros;
  bool align_corners = false;
};

// x mirrored at lo and hi until it lies between them.
inline double Reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if ((x >= lo && x <= hi) || !(range > 0)) return x < lo || x > hi ? lo : x;
  const double dx = x < lo ? lo - x : x - hi;
  const double n = std::trunc(dx / range);
  const double r = dx - n * range;
  const bool even = std::fmod(n, 2.0) == 0;
  return (x < lo) == even ? lo + r : hi - r;
}

// The taps of one axis at one point: index -1 reads zero.
struct AxisSample {
  int count = 0;
  int64_t index[4];
  double weight[4];
};

// One axis of `length` elements, the point's un-normalised coordinate x.
class GridAxis {
 public:
  GridAxis(const GridOptions& o, int64_t length)
      : o_(o),
        length_(length),
        lo_(o.align_corners ? 0.0 : -0.5),
        hi_(static_cast<double>(length) - (o.align_corners ? 1.0 : 0.5)) {}

  template <typename G>
  AxisSample Sample(G x) const {
    if (o_.mode == GridMode::kNearest) x = std::nearbyint(x);  // half to even, as PyTorch
    if (x < lo_ || x > hi_) {
      if (o_.padding == Padding::kBorder) {
        x = std::clamp(x, G{0}, static_cast<G>(length_ - 1));
      } else if (o_.padding == Padding::kReflection) {
        x = static_cast<G>(Reflect(x, lo_, hi_));
      }
    }
    AxisSample s;
    if (std::isnan(x)) return Tap(s, 0, std::numeric_limits<double>::quiet_NaN());
    const int64_t i = FloorIndex(x);
    if (o_.mode == GridMode::kNearest) return Tap(s, i, 1);
    const double t = static_cast<double>(x) - static_cast<double>(i);
    if (o_.mode == GridMode::kLinear) return Tap(Tap(s, i, 1 - t), i + 1, t);
    constexpr double kA = -0.75;
    Tap(Tap(s, i - 1, CubicWeight(t + 1, kA)), i, CubicWeight(t, kA));
    return Tap(Tap(s, i + 1, CubicWeight(1 - t, kA)), i + 2, CubicWeight(2 - t, kA));
  }

 private:
  AxisSample& Tap(AxisSample& s, int64_t i, double weight) const {
    s.index[s.count] = Pixel(i);
    s.weight[s.count++] = weight;
    return s;
  }

  int64_t Pixel(int64_t i) const {
    switch (o_.padding) {
      case Padding::kZeros:
        return i >= 0 && i < length_ ? i : -1;
      case Padding::kBorder:
        break;
      case Padding::kReflection:
        i = FloorIndex(std::trunc(Reflect(static_cast<double>(i), lo_, hi_)));
        break;
    }
    return std::clamp<int64_t>(i, 0, length_ - 1);
  }

  GridOptions o_;
  int64_t length_;
  double lo_, hi_;
};

// The (offset into one X plane, weight) of every tap combination at the point `coords` (k grid
// values, last axis first); taps reading zero are left out.
template <typename G>
void PointTaps(const std::vector<GridAxis>& axes, const std::vector<int64_t>& strides,
               const std::vector<int64_t>& lengths, const G* coords, bool align_corners,
               std::vector<std::pair<int64_t, double>>& taps,
               std::vector<std::pair<int64_t, double>>& scratch) {
  using GC = typename Compute<G>::type;
  const size_t k = axes.size();
  taps.assign(1, {0, 1.0});
  for (size_t j = 0; j < k; ++j) {
    const GC n = Compute<G>::Load(coords[k - 1 - j]);
    const GC d = static_cast<GC>(lengths[j]);
    const GC x = align_corners ? (n + 1) / 2 * (d - 1) : ((n + 1) * d - 1) / 2;
    const AxisSample s = axes[j].Sample(x);
    scratch.clear();
    for (const auto& [offset, weight] : taps) {
      for (int t = 0; t < s.count; ++t) {
        if (s.index[t] >= 0)
          scratch.push_back({offset + s.index[t] * strides[j], weight * s.weight[t]});
      }
    }
    std::swap(taps, scratch);
  }
}

template <typename T, typename G>
void SampleGrid(KernelContext& context, const GridOptions& o, const Tensor& x, const Tensor& grid,
                Tensor& y) {
  using C = typename Compute<T>::type;
  const Shape spatial(x.shape().begin() + 2, x.shape().end());
  const std::vector<int64_t> strides = tensor_ops::Strides(spatial);
  std::vector<GridAxis> axes;
  for (int64_t length : spatial) axes.emplace_back(o, length);
  const int64_t channels = x.dim(1), plane = ElementCount(spatial);
  const int64_t points = y.size() / std::max<int64_t>(1, x.dim(0) * channels);
  const T* px = x.data<T>();
  const G* pg = grid.data<G>();
  T* py = y.data<T>();
  const int64_t work = channels << std::min<size_t>(2 * spatial.size(), 20);
  CpuOf(context.backend())
      .pool()
      .ParallelFor(x.dim(0) * points,
                   std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, work)),
                   [&](int64_t begin, int64_t end) {
                     std::vector<std::pair<int64_t, double>> taps, scratch;
                     for (int64_t q = begin; q < end; ++q) {
                       const int64_t n = q / points, p = q % points;
                       PointTaps(axes, strides, spatial, pg + q * static_cast<int64_t>(axes.size()),
                                 o.align_corners, taps, scratch);
                       const T* xn = px + n * channels * plane;
                       T* yn = py + n * channels * points + p;
                       for (int64_t c = 0; c < channels; ++c) {
                         C sum = 0;
                         for (const auto& [offset, weight] : taps) {
                           sum += static_cast<C>(weight) * Compute<T>::Load(xn[c * plane + offset]);
                         }
                         yn[c * points] = Compute<T>::Store(sum);
                       }
                     }
                   });
}

// X [N, C, D1...Dk] and grid [N, O1...Ok, k] give Y [N, C, O1...Ok].
inline absl::StatusOr<Shape> GridOutputShape(const KernelContext& context, const Tensor& x,
                                             const Tensor& grid) {
  const int k = x.rank() - 2;
  if (k < 1 || grid.rank() != x.rank() || grid.dim(0) != x.dim(0) || grid.dim(k + 1) != k) {
    return NodeError(
        context, absl::StrCat("X ", ShapeString(x.shape()), " and grid ", ShapeString(grid.shape()),
                              " do not match (X [N, C, D1...Dk], grid [N, ..., k])"));
  }
  Shape output = {x.dim(0), x.dim(1)};
  for (int d = 1; d <= k; ++d) output.push_back(grid.dim(d));
  if (ElementCount(output) > 0) {
    for (int d = 2; d < x.rank(); ++d) {
      if (x.dim(d) == 0) return NodeError(context, "X has an empty spatial axis to sample from");
    }
  }
  return output;
}

inline absl::Status GridSample(KernelContext& context) {
  const Tensor& x = context.in(0);
  const Tensor& grid = context.in(1);
  const Attributes attributes = context.attributes();
  GridOptions o;
  AMPC_ASSIGN_OR_RETURN(
      o.mode,
      Lookup(context, kGridModes, "mode",
             attributes.String("mode", context.info().opset >= 20 ? "linear" : "bilinear")));
  AMPC_ASSIGN_OR_RETURN(o.padding, Lookup(context, kPaddings, "padding_mode",
                                          attributes.String("padding_mode", "zeros")));
  o.align_corners = attributes.Int("align_corners", 0) != 0;
  AMPC_ASSIGN_OR_RETURN(const Shape output, GridOutputShape(context, x, grid));
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, output, x.dtype()));
  if (y->size() == 0) return absl::OkStatus();
  bool handled = false;
  Dispatch<AMPC_FLOAT_TYPES>(x.dtype(), [&]<typename T>() {
    handled = Dispatch<AMPC_FLOAT_TYPES>(
        grid.dtype(), [&]<typename G>() { SampleGrid<T, G>(context, o, x, grid, *y); });
  });
  return handled ? absl::OkStatus()
                 : NodeError(context, absl::StrCat("element types ", DTypeName(x.dtype()), " and ",
                                                   DTypeName(grid.dtype()), " are not supported"));
}

}  // namespace ampc::resample
