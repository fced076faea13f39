// Resampling ops: Resize (opsets 10-19), Upsample (7, 9) and GridSample (16-22, in resample_grid.h)
// over FP32, FP16, BF16 and FP64. The formulas are those of ONNX's reference
// (onnx/reference/ops/op_resize.py): Resize is separable, one 1-D pass per resized axis whose taps
// (source index, weight) are computed in double; values accumulate in the compute type (FP32 for
// FP16/BF16) between passes and are rounded once to the storage type at the end.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/resample_grid.h"
#include "kernels/cpu/resize_plan.h"
#include "kernels/cpu/tensor_ops.h"

namespace ampc {
namespace {

using resample::AxisResize;
using resample::Coordinate;
using resample::CubicWeight;
using resample::FloorIndex;
using resample::Mode;
using resample::Nearest;
using resample::PlanResize;
using resample::ResizeOptions;
using resample::ResizePlan;

// The source coordinate of output index y along one axis (the reference's x_ori). `width` is the
// output width the scale implies, which the reference compares with 1.
double SourceCoordinate(Coordinate mode, const AxisResize& a, double y) {
  const double in = static_cast<double>(a.in);
  const double width = a.scale * in;
  switch (mode) {
    case Coordinate::kAlignCorners:
      return width == 1 ? 0.0 : y * (in - 1) / (width - 1);
    case Coordinate::kAsymmetric:
      return y / a.scale;
    case Coordinate::kTfHalfPixelForNn:
      return (y + 0.5) / a.scale;
    case Coordinate::kTfCropAndResize: {
      const double span = a.roi_end - a.roi_start;
      const double x = width == 1 ? span * (in - 1) / 2 : y * span * (in - 1) / (width - 1);
      return x + a.roi_start * (in - 1);
    }
    case Coordinate::kPytorchHalfPixel:
      return width == 1 ? -0.5 : (y + 0.5) / a.scale - 0.5;
    case Coordinate::kHalfPixelSymmetric: {
      const double adjustment = static_cast<double>(a.out) / width;
      return in / 2 * (1 - adjustment) + (y + 0.5) / a.scale - 0.5;
    }
    case Coordinate::kHalfPixel:
      break;
  }
  return (y + 0.5) / a.scale - 0.5;
}

// Nearest's two taps (floor and floor + 1): which one the rounding picks at ratio in (0, 1].
std::vector<double> NearestWeights(Nearest nearest, double ratio) {
  bool right = true;  // an integer x (ratio 1), or ceil
  if (ratio != 1) {
    switch (nearest) {
      case Nearest::kRoundPreferFloor:
        right = ratio > 0.5;
        break;
      case Nearest::kRoundPreferCeil:
        right = ratio >= 0.5;
        break;
      case Nearest::kFloor:
      case Nearest::kSimple:
        right = false;
        break;
      case Nearest::kCeil:
        break;
    }
  }
  return {right ? 0.0 : 1.0, right ? 1.0 : 0.0};
}

// Weights of the taps first + k (k < size) around x = floor + ratio, ratio in (0, 1] (1 at an
// integer x, so the pixel left of x is preferred), first = 1 - size / 2. Antialiasing widens the
// kernel by 1 / scale when downsampling and normalises its weights.
std::vector<double> TapWeights(const ResizeOptions& o, double ratio, double scale) {
  if (o.mode == Mode::kNearest) return NearestWeights(o.nearest, ratio);
  const bool cubic = o.mode == Mode::kCubic;
  if (!o.antialias) {
    if (!cubic) return {1 - ratio, ratio};
    const double a = o.cubic_a;
    return {CubicWeight(ratio + 1, a), CubicWeight(ratio, a), CubicWeight(1 - ratio, a),
            CubicWeight(2 - ratio, a)};
  }
  const double s = std::min(scale, 1.0);
  const int64_t first = static_cast<int64_t>(std::floor((cubic ? -2 : -1) / s)) + 1;
  std::vector<double> weights;
  double sum = 0;
  for (int64_t i = first; i < 2 - first; ++i) {
    const double arg = s * (static_cast<double>(i) - ratio);
    const double w = cubic ? CubicWeight(arg, o.cubic_a) : std::clamp(1 - std::abs(arg), 0.0, 1.0);
    weights.push_back(w);
    sum += w;
  }
  for (double& w : weights) w /= sum;
  return weights;
}

// The taps of every output index along one axis: output o reads index[k] * weight[k] for k in
// [begin[o], begin[o + 1]); an extrapolated output (tf_crop_and_resize outside the input) is the
// extrapolation value. Indices are clamped into the input (the reference's edge padding).
struct AxisTaps {
  std::vector<int64_t> begin, index;
  std::vector<double> weight;
  std::vector<bool> extrapolated;
};

void AddTaps(const ResizeOptions& o, const AxisResize& a, double x, AxisTaps& taps) {
  if (o.nearest == Nearest::kSimple && o.mode == Mode::kNearest) {
    const int64_t i = a.scale < 1 ? FloorIndex(std::ceil(x)) : FloorIndex(x);
    taps.index.push_back(std::clamp<int64_t>(i, 0, a.in - 1));
    taps.weight.push_back(1);
    return;
  }
  const int64_t floor = FloorIndex(x);
  const bool integer = static_cast<double>(floor) == x;
  std::vector<double> weights =
      TapWeights(o, integer ? 1.0 : x - static_cast<double>(floor), a.scale);
  const int64_t n = static_cast<int64_t>(weights.size());
  const int64_t first = (integer ? floor - 1 : floor) + 1 - n / 2;
  if (o.exclude_outside) {
    double sum = 0;
    for (int64_t k = 0; k < n; ++k) {
      if (first + k < 0 || first + k >= a.in) weights[k] = 0;
      sum += weights[k];
    }
    for (double& w : weights) w /= sum == 0 ? 1 : sum;
  }
  for (int64_t k = 0; k < n; ++k) {
    if (o.mode == Mode::kNearest && weights[k] == 0) continue;  // nearest selects, never blends
    taps.index.push_back(std::clamp<int64_t>(first + k, 0, a.in - 1));
    taps.weight.push_back(weights[k]);
  }
}

AxisTaps MakeTaps(const ResizeOptions& o, const AxisResize& a) {
  AxisTaps taps;
  taps.begin.push_back(0);
  taps.extrapolated.assign(a.out, false);
  for (int64_t y = 0; y < a.out; ++y) {
    const double x = SourceCoordinate(o.coordinate, a, static_cast<double>(y));
    if (o.coordinate == Coordinate::kTfCropAndResize &&
        (x < 0 || x > static_cast<double>(a.in - 1))) {
      taps.extrapolated[y] = true;
    } else {
      AddTaps(o, a, x, taps);
    }
    taps.begin.push_back(static_cast<int64_t>(taps.index.size()));
  }
  return taps;
}

// One pass: `in` (row-major over `shape`) resampled along `a.axis` into `out`; `shape` becomes the
// output's. Rows (outer index, output index) in parallel.
template <typename C>
void ResizeAxis(KernelContext& context, const AxisResize& a, const ResizeOptions& o,
                const std::vector<C>& in, Shape& shape, std::vector<C>& out) {
  const AxisTaps taps = MakeTaps(o, a);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < a.axis; ++d) outer *= shape[d];
  for (size_t d = a.axis + 1; d < shape.size(); ++d) inner *= shape[d];
  shape[a.axis] = a.out;
  out.assign(static_cast<size_t>(outer * a.out * inner), C{0});
  const int64_t per_row =
      inner * std::max<int64_t>(1, taps.index.size() / std::max<int64_t>(1, a.out));
  const C fill = static_cast<C>(o.extrapolation);
  CpuOf(context.backend())
      .pool()
      .ParallelFor(outer * a.out,
                   std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, per_row)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t row = begin; row < end; ++row) {
                       const int64_t p = row / a.out, y = row % a.out;
                       C* dst = out.data() + row * inner;
                       if (taps.extrapolated[y]) {
                         std::fill(dst, dst + inner, fill);
                         continue;
                       }
                       for (int64_t k = taps.begin[y]; k < taps.begin[y + 1]; ++k) {
                         const C* src = in.data() + (p * a.in + taps.index[k]) * inner;
                         const C w = static_cast<C>(taps.weight[k]);
                         for (int64_t i = 0; i < inner; ++i) dst[i] += w * src[i];
                       }
                     }
                   });
}

template <typename T>
void RunResize(KernelContext& context, const ResizePlan& plan, const Tensor& x, Tensor& y) {
  using C = typename Compute<T>::type;
  std::vector<C> current(static_cast<size_t>(x.size())), next;
  const T* px = x.data<T>();
  for (int64_t i = 0; i < x.size(); ++i) current[i] = Compute<T>::Load(px[i]);
  Shape shape = x.shape();
  for (const AxisResize& a : plan.axes) {
    ResizeAxis(context, a, plan.options, current, shape, next);
    std::swap(current, next);
  }
  T* py = y.data<T>();
  for (int64_t i = 0; i < y.size(); ++i) py[i] = Compute<T>::Store(current[i]);
}

// Resize (and Upsample, Resize-10's semantics): every axis resampled by its scale or to its size.
absl::Status Resize(KernelContext& context) {
  const Tensor& x = context.in(0);
  AMPC_ASSIGN_OR_RETURN(const ResizePlan plan, PlanResize(context, x));
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, plan.output, x.dtype()));
  if (y->size() == 0) return absl::OkStatus();
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(
      x.dtype(), [&]<typename T>() { RunResize<T>(context, plan, x, *y); });
  return handled ? absl::OkStatus()
                 : NodeError(context, absl::StrCat("element type ", DTypeName(x.dtype()),
                                                   " is not supported"));
}

}  // namespace

void RegisterResampleKernels(KernelRegistry& r) {
  const std::vector<DType> floats = {AMPC_FLOAT_TYPES};
  const std::vector<DType> float32 = {DType::kFloat};
  const std::vector<DType> ints = {DType::kInt64};
  // Resize-10's input 1 is scales (float); from 11 on it is roi (any float type).
  r.Register("cpu", "", "Resize", {{0, floats}, {1, floats}, {2, float32}, {3, ints}}, Resize);
  r.Register("cpu", "", "Upsample", {{0, floats}, {1, float32}}, Resize);
  r.Restrict("", "Upsample", {7, kKernelsCheckedThroughOpset});  // Upsample-1 scales by attributes
  r.Register("cpu", "", "GridSample", {{0, floats}, {1, floats}}, resample::GridSample);
}

}  // namespace ampc
