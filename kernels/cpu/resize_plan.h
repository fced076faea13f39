// Resize's and Upsample's plan for resample_kernels.cc: the attributes, the resized axes with their
// output sizes and coordinate scales (from scales, or from sizes and keep_aspect_ratio_policy), and
// roi, checked, as ONNX's reference reads them (op_resize.py). Upsample and Resize-10 resample with
// asymmetric coordinates and onnxruntime's rounding.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/resample_common.h"
#include "kernels/cpu/tensor_ops.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/kernel.h"

namespace ampc::resample {

enum class Mode { kNearest, kLinear, kCubic };
enum class Coordinate {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize,
};
// kSimple is Upsample's and Resize-10's rounding (onnxruntime's): ceil when downsampling, else
// floor.
enum class Nearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };
enum class AspectPolicy { kStretch, kNotLarger, kNotSmaller };

inline constexpr Named<Mode> kModes[] = {
    {"nearest", Mode::kNearest}, {"linear", Mode::kLinear}, {"cubic", Mode::kCubic}};
inline constexpr Named<Coordinate> kCoordinates[] = {
    {"half_pixel", Coordinate::kHalfPixel},
    {"half_pixel_symmetric", Coordinate::kHalfPixelSymmetric},
    {"pytorch_half_pixel", Coordinate::kPytorchHalfPixel},
    {"align_corners", Coordinate::kAlignCorners},
    {"asymmetric", Coordinate::kAsymmetric},
    {"tf_half_pixel_for_nn", Coordinate::kTfHalfPixelForNn},
    {"tf_crop_and_resize", Coordinate::kTfCropAndResize}};
inline constexpr Named<Nearest> kNearestModes[] = {
    {"round_prefer_floor", Nearest::kRoundPreferFloor},
    {"round_prefer_ceil", Nearest::kRoundPreferCeil},
    {"floor", Nearest::kFloor},
    {"ceil", Nearest::kCeil}};
inline constexpr Named<AspectPolicy> kAspectPolicies[] = {
    {"stretch", AspectPolicy::kStretch},
    {"not_larger", AspectPolicy::kNotLarger},
    {"not_smaller", AspectPolicy::kNotSmaller}};

struct ResizeOptions {
  Mode mode = Mode::kNearest;
  Coordinate coordinate = Coordinate::kAsymmetric;
  Nearest nearest = Nearest::kSimple;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0;
  bool antialias = false;
};

// One resized axis: `in` elements become `out`; `scale` is the one the coordinates use (the given
// scale, or out/in for sizes); roi_start/roi_end only for tf_crop_and_resize.
struct AxisResize {
  int axis = 0;
  int64_t in = 0, out = 0;
  double scale = 1, roi_start = 0, roi_end = 1;
};

struct ResizePlan {
  ResizeOptions options;
  Shape output;
  std::vector<AxisResize> axes;  // in the order the passes run; identity axes left out
};

// Whether the op is Upsample or Resize-10: asymmetric coordinates, the kSimple rounding.
inline bool IsLegacy(const KernelContext& context) {
  return context.info().node.op_type() == "Upsample" || context.info().opset < 11;
}

// Options from the attributes (Upsample and Resize-10 have only `mode`).
inline absl::StatusOr<ResizeOptions> ReadOptions(const KernelContext& context) {
  const Attributes attributes = context.attributes();
  ResizeOptions o;
  AMPC_ASSIGN_OR_RETURN(o.mode,
                        Lookup(context, kModes, "mode", attributes.String("mode", "nearest")));
  if (IsLegacy(context)) {
    if (o.mode == Mode::kCubic) return NodeError(context, "mode 'cubic' needs Resize-11 or later");
    return o;
  }
  AMPC_ASSIGN_OR_RETURN(o.coordinate,
                        Lookup(context, kCoordinates, "coordinate_transformation_mode",
                               attributes.String("coordinate_transformation_mode", "half_pixel")));
  AMPC_ASSIGN_OR_RETURN(o.nearest, Lookup(context, kNearestModes, "nearest_mode",
                                          attributes.String("nearest_mode", "round_prefer_floor")));
  o.cubic_a = attributes.Float("cubic_coeff_a", -0.75f);
  o.exclude_outside = attributes.Int("exclude_outside", 0) != 0;
  o.extrapolation = attributes.Float("extrapolation_value", 0.0f);
  // As in the spec, antialiasing filters linear and cubic only.
  o.antialias = attributes.Int("antialias", 0) != 0 && o.mode != Mode::kNearest;
  return o;
}

// A float tensor's values as double; none for an omitted or empty input.
inline std::vector<double> OptionalFloats(const KernelContext& context, int input) {
  std::vector<double> values;
  const Tensor* t = input < 0 ? nullptr : context.input(input);
  if (t == nullptr) return values;
  Dispatch<AMPC_FLOAT_TYPES>(t->dtype(), [&]<typename T>() {
    for (const T& v : t->span<T>()) values.push_back(static_cast<double>(Compute<T>::Load(v)));
  });
  return values;
}

// What the node asks for: the resized axes with their scales or sizes (one of the two) and roi.
struct ResizeTargets {
  std::vector<int> axes;
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
};

inline absl::StatusOr<std::vector<int>> ResizedAxes(const KernelContext& context, int rank) {
  std::vector<int> axes;
  const Attributes attributes = context.attributes();
  if (IsLegacy(context) || context.info().opset < 18 || !attributes.Has("axes")) {
    for (int d = 0; d < rank; ++d) axes.push_back(d);
    return axes;
  }
  std::vector<bool> seen(rank, false);
  for (int64_t a : attributes.Ints("axes")) {
    AMPC_ASSIGN_OR_RETURN(int axis, tensor_ops::NormalizeAxis(context, a, rank, "axes entry"));
    if (seen[axis]) return NodeError(context, absl::StrCat("axes repeats axis ", axis));
    seen[axis] = true;
    axes.push_back(axis);
  }
  return axes;
}

inline absl::StatusOr<ResizeTargets> ReadTargets(const KernelContext& context, int rank) {
  ResizeTargets t;
  AMPC_ASSIGN_OR_RETURN(t.axes, ResizedAxes(context, rank));
  const bool upsample = context.info().node.op_type() == "Upsample";
  if (upsample && context.info().opset < 9) {
    for (float s : context.attributes().Floats("scales")) t.scales.push_back(s);
  } else {
    const bool legacy = IsLegacy(context);
    t.scales = OptionalFloats(context, legacy ? 1 : 2);
    if (!legacy) t.roi = OptionalFloats(context, 1);
    if (!legacy && context.input(3) != nullptr) {
      AMPC_ASSIGN_OR_RETURN(t.sizes, tensor_ops::ReadInts(context, context.in(3), "sizes"));
    }
  }
  const size_t k = t.axes.size();
  if (t.scales.empty() == t.sizes.empty()) {
    return NodeError(context, "exactly one of scales and sizes must be given");
  }
  if (t.scales.size() + t.sizes.size() != k) {
    return NodeError(context, absl::StrCat(t.scales.empty() ? "sizes" : "scales", " has ",
                                           t.scales.size() + t.sizes.size(), " values for ", k,
                                           " resized axes"));
  }
  return t;
}

// Output sizes and coordinate scales of the resized axes, from scales or from sizes and
// keep_aspect_ratio_policy (whose common scale rounds each size half up).
inline absl::Status SizeAxes(const KernelContext& context, const Tensor& x, const ResizeTargets& t,
                             std::vector<AxisResize>& axes) {
  for (size_t i = 0; i < t.axes.size(); ++i) {
    AxisResize& a = axes[i];
    a.axis = t.axes[i];
    a.in = x.dim(a.axis);
    if (!t.scales.empty()) {
      a.scale = t.scales[i];
      if (!(a.scale > 0) || !std::isfinite(a.scale)) {
        return NodeError(context, absl::StrCat("scale ", a.scale, " must be positive"));
      }
      const double out = std::floor(a.scale * static_cast<double>(a.in));
      if (out > 0x1p62) return NodeError(context, absl::StrCat("scale ", a.scale, " is too large"));
      a.out = static_cast<int64_t>(out);
      continue;
    }
    a.out = t.sizes[i];
    if (a.out < 0) return NodeError(context, absl::StrCat("size ", a.out, " is negative"));
    if (a.in == 0 && a.out > 0) {
      return NodeError(context,
                       absl::StrCat("axis ", a.axis, " is empty; it cannot become ", a.out));
    }
    a.scale = a.in == 0 ? 1.0 : static_cast<double>(a.out) / static_cast<double>(a.in);
  }
  if (t.sizes.empty() || IsLegacy(context) || context.info().opset < 18) return absl::OkStatus();
  AMPC_ASSIGN_OR_RETURN(const AspectPolicy policy,
                        Lookup(context, kAspectPolicies, "keep_aspect_ratio_policy",
                               context.attributes().String("keep_aspect_ratio_policy", "stretch")));
  if (policy == AspectPolicy::kStretch || axes.empty()) return absl::OkStatus();
  double scale = axes[0].scale;
  for (const AxisResize& a : axes) {
    scale =
        policy == AspectPolicy::kNotLarger ? std::min(scale, a.scale) : std::max(scale, a.scale);
  }
  for (AxisResize& a : axes) {
    a.scale = scale;
    a.out = static_cast<int64_t>(scale * static_cast<double>(a.in) + 0.5);
  }
  return absl::OkStatus();
}

inline absl::StatusOr<ResizePlan> PlanResize(const KernelContext& context, const Tensor& x) {
  ResizePlan plan;
  AMPC_ASSIGN_OR_RETURN(plan.options, ReadOptions(context));
  AMPC_ASSIGN_OR_RETURN(const ResizeTargets t, ReadTargets(context, x.rank()));
  std::vector<AxisResize> axes(t.axes.size());
  AMPC_RETURN_IF_ERROR(SizeAxes(context, x, t, axes));
  const bool crop = plan.options.coordinate == Coordinate::kTfCropAndResize;
  if (crop && t.roi.size() != 2 * axes.size()) {
    return NodeError(context, absl::StrCat("tf_crop_and_resize needs roi of ", 2 * axes.size(),
                                           " values, got ", t.roi.size()));
  }
  plan.output = x.shape();
  for (size_t i = 0; i < axes.size(); ++i) {
    AxisResize& a = axes[i];
    plan.output[a.axis] = a.out;
    if (crop) {
      a.roi_start = t.roi[i];
      a.roi_end = t.roi[axes.size() + i];
    }
    // As the reference: an axis that keeps its size at scale 1 (and whole roi) is not resampled.
    const bool whole = !crop || (a.roi_start == 0 && std::abs(a.roi_end - 1) <= 1e-9);
    const bool identity = a.out == a.in && std::abs(a.scale - 1) <= 1e-9 && whole;
    if (!identity && a.in > 0) plan.axes.push_back(a);  // an empty input gives an empty output
  }
  // Shrinking axes first, so no intermediate holds more elements than the input or the output.
  std::stable_sort(plan.axes.begin(), plan.axes.end(),
                   [](const AxisResize& a, const AxisResize& b) {
                     return static_cast<double>(a.out) / static_cast<double>(a.in) <
                            static_cast<double>(b.out) / static_cast<double>(b.in);
                   });
  return plan;
}

}  // namespace ampc::resample
