// Ops whose output size depends on the data: Unique (11) and NonMaxSuppression
// (10, 11).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/reduce_common.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

using reduce::AxisLayout;
using reduce::LessNanLast;

// ---- Unique ----

// Unique's slices: the input seen as [outer, n, inner] around the axis
// (flattened: [1, size, 1]); slice k is every element whose axis index is k, in
// row-major order.
struct UniqueGroups {
  std::vector<int64_t> first;    // per unique slice: where it first occurs
  std::vector<int64_t> count;    // per unique slice: how often it occurs
  std::vector<int64_t> inverse;  // per input slice: its unique slice
};

// Slice a before slice b, lexicographically (NaN after every number, equal to
// NaN, as numpy).
template <typename T>
bool SliceLess(const T *x, const AxisLayout &layout, int64_t a, int64_t b) {
  for (int64_t o = 0; o < layout.outer; ++o) {
    const T *row = x + o * layout.n * layout.inner;
    for (int64_t i = 0; i < layout.inner; ++i) {
      const auto va = Compute<T>::Load(row[a * layout.inner + i]);
      const auto vb = Compute<T>::Load(row[b * layout.inner + i]);
      if (LessNanLast(va, vb)) return true;
      if (LessNanLast(vb, va)) return false;
    }
  }
  return false;
}

// Groups equal slices: in sorted order, or (sorted = 0) in order of first
// occurrence.
template <typename T>
UniqueGroups GroupSlices(const T *x, const AxisLayout &layout, bool sorted) {
  std::vector<int64_t> order(layout.n);
  std::iota(order.begin(), order.end(), int64_t{0});
  auto less = [&](int64_t a, int64_t b) { return SliceLess(x, layout, a, b); };
  std::stable_sort(order.begin(), order.end(),
                   less);  // stable: a group starts at its first
  std::vector<int64_t> group_of(layout.n);
  UniqueGroups groups;
  for (int64_t j = 0; j < layout.n; ++j) {
    if (j == 0 || less(order[j - 1], order[j])) {
      groups.first.push_back(order[j]);
      groups.count.push_back(0);
    }
    group_of[order[j]] = static_cast<int64_t>(groups.first.size()) - 1;
    ++groups.count.back();
  }
  std::vector<int64_t> rank(groups.first.size());
  std::iota(rank.begin(), rank.end(), int64_t{0});
  if (!sorted) {
    std::sort(rank.begin(), rank.end(),
              [&](int64_t a, int64_t b) { return groups.first[a] < groups.first[b]; });
  }
  std::vector<int64_t> position(rank.size());
  for (size_t p = 0; p < rank.size(); ++p) position[rank[p]] = static_cast<int64_t>(p);
  UniqueGroups out;
  for (int64_t g : rank) {
    out.first.push_back(groups.first[g]);
    out.count.push_back(groups.count[g]);
  }
  for (int64_t k = 0; k < layout.n; ++k) out.inverse.push_back(position[group_of[k]]);
  return out;
}

// Unique's view of its input: around attribute `axis`, or the input flattened
// without one; and the shape of Y with the unique count at `axis` still to fill
// in.
struct UniquePlan {
  AxisLayout layout;
  Shape y_shape;
  int axis = 0;
};

absl::StatusOr<UniquePlan> PlanUnique(const KernelContext &context) {
  const Tensor &x = context.in(0);
  if (!context.attributes().Has("axis")) {
    return UniquePlan{.layout = {.outer = 1, .n = x.size(), .inner = 1}, .y_shape = {0}};
  }
  UniquePlan plan;
  AMPC_ASSIGN_OR_RETURN(
      plan.axis, reduce::NormalizeAxis(context, context.attributes().Int("axis", 0), x.rank()));
  plan.layout = reduce::LayoutAround(x.shape(), plan.axis);
  plan.y_shape = x.shape();
  return plan;
}

// Writes an int64 output of the node (when the node names it) holding `values`.
absl::Status WriteInts(KernelContext &context, int output, const std::vector<int64_t> &values) {
  if (!reduce::WantsOutput(context, output)) return absl::OkStatus();
  AMPC_ASSIGN_OR_RETURN(
      Tensor * out, context.Output(output, {static_cast<int64_t>(values.size())}, DType::kInt64));
  if (!values.empty()) std::memcpy(out->raw(), values.data(), values.size() * sizeof(int64_t));
  return absl::OkStatus();
}

// Y: the first occurrence of each unique slice, in the groups' order.
absl::Status WriteUniqueSlices(KernelContext &context, UniquePlan plan,
                               const std::vector<int64_t> &first) {
  const Tensor &x = context.in(0);
  const int64_t m = static_cast<int64_t>(first.size());
  plan.y_shape[plan.axis] = m;
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, plan.y_shape));
  const AxisLayout &layout = plan.layout;
  const size_t slice = static_cast<size_t>(layout.inner) * DTypeSize(x.dtype());
  const char *px = static_cast<const char *>(x.raw());
  char *py = static_cast<char *>(y->raw());
  for (int64_t o = 0; o < layout.outer; ++o) {
    for (int64_t g = 0; g < m; ++g) {
      std::memcpy(py + (o * m + g) * slice, px + (o * layout.n + first[g]) * slice, slice);
    }
  }
  return absl::OkStatus();
}

// Outputs Y, indices (first occurrences), inverse_indices and counts, as
// numpy.unique.
absl::Status Unique(KernelContext &context) {
  const Tensor &x = context.in(0);
  AMPC_ASSIGN_OR_RETURN(const UniquePlan plan, PlanUnique(context));
  const bool sorted = context.attributes().Int("sorted", 1) != 0;
  UniqueGroups groups;
  const bool handled = Dispatch<AMPC_ALL_TYPES>(
      x.dtype(), [&]<typename T>() { groups = GroupSlices(x.data<T>(), plan.layout, sorted); });
  if (!handled) return reduce::UnsupportedType(context);
  AMPC_RETURN_IF_ERROR(WriteUniqueSlices(context, plan, groups.first));
  AMPC_RETURN_IF_ERROR(WriteInts(context, 1, groups.first));
  AMPC_RETURN_IF_ERROR(WriteInts(context, 2, groups.inverse));
  return WriteInts(context, 3, groups.count);
}

// ---- NonMaxSuppression ----

// A box as its edges: corners [y1, x1, y2, x2] in either order (center_point_box 0), or
// [x_center, y_center, width, height] (1).
struct Box {
  float x_min, x_max, y_min, y_max;
};

Box ReadBox(const float *b, bool center_point) {
  if (center_point) {
    const float half_w = b[2] / 2, half_h = b[3] / 2;
    return {b[0] - half_w, b[0] + half_w, b[1] - half_h, b[1] + half_h};
  }
  return {std::min(b[1], b[3]), std::max(b[1], b[3]), std::min(b[0], b[2]), std::max(b[0], b[2])};
}

// Whether IoU(a, b) exceeds the threshold; boxes that do not overlap, or have no area, never do.
bool Suppresses(const Box &a, const Box &b, float iou_threshold) {
  const float x_lo = std::max(a.x_min, b.x_min), x_hi = std::min(a.x_max, b.x_max);
  const float y_lo = std::max(a.y_min, b.y_min), y_hi = std::min(a.y_max, b.y_max);
  if (x_hi <= x_lo || y_hi <= y_lo) return false;
  const float intersection = (x_hi - x_lo) * (y_hi - y_lo);
  const float area_a = (a.x_max - a.x_min) * (a.y_max - a.y_min);
  const float area_b = (b.x_max - b.x_min) * (b.y_max - b.y_min);
  const float union_area = area_a + area_b - intersection;
  if (intersection <= 0 || area_a <= 0 || area_b <= 0 || union_area <= 0) return false;
  return intersection / union_area > iou_threshold;
}

struct NmsOptions {
  int64_t max_per_class = 0;
  float iou_threshold = 0;
  bool has_score_threshold = false;
  float score_threshold = 0;
  bool center_point = false;
};

// A one-element float input (iou_threshold, score_threshold), or nothing when omitted or empty.
absl::StatusOr<std::optional<float>> ReadFloatOption(const KernelContext &context, int i,
                                                     absl::string_view what) {
  const Tensor *t = context.input(i);
  if (t == nullptr || t->size() == 0) return std::nullopt;
  if (t->dtype() != DType::kFloat)
    return NodeError(context, absl::StrCat(what, " must be float32"));
  return t->data<float>()[0];
}

// The attribute and the optional inputs 2-4 (an omitted or empty one keeps its default).
absl::StatusOr<NmsOptions> ReadNmsOptions(const KernelContext &context) {
  NmsOptions options;
  options.center_point = context.attributes().Int("center_point_box", 0) != 0;
  const Tensor *max = context.input(2);
  if (max != nullptr && max->size() > 0) {
    if (max->dtype() != DType::kInt64) {
      return NodeError(context, "max_output_boxes_per_class must be int64");
    }
    options.max_per_class = std::max<int64_t>(0, max->data<int64_t>()[0]);
  }
  AMPC_ASSIGN_OR_RETURN(const std::optional<float> iou,
                        ReadFloatOption(context, 3, "iou_threshold"));
  AMPC_ASSIGN_OR_RETURN(const std::optional<float> score,
                        ReadFloatOption(context, 4, "score_threshold"));
  options.iou_threshold = iou.value_or(0.0f);
  options.has_score_threshold = score.has_value();
  options.score_threshold = score.value_or(0.0f);
  return options;
}

// One batch and class: candidates by descending score (the lower index first on ties), each kept
// unless a kept box suppresses it, up to max_per_class. Returns the kept box indices in order.
std::vector<int64_t> SelectBoxes(const float *boxes, const float *scores, int64_t n,
                                 const NmsOptions &options) {
  std::vector<int64_t> order;
  for (int64_t k = 0; k < n; ++k) {
    if (!options.has_score_threshold || scores[k] > options.score_threshold) order.push_back(k);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return LessNanLast(scores[b], scores[a]); });
  std::vector<int64_t> kept;
  std::vector<Box> kept_boxes;
  for (int64_t k : order) {
    if (static_cast<int64_t>(kept.size()) >= options.max_per_class) break;
    const Box box = ReadBox(boxes + 4 * k, options.center_point);
    if (std::none_of(kept_boxes.begin(), kept_boxes.end(), [&](const Box &other) {
          return Suppresses(box, other, options.iou_threshold);
        })) {
      kept.push_back(k);
      kept_boxes.push_back(box);
    }
  }
  return kept;
}

// boxes [B, N, 4] and scores [B, C, N] give selected_indices [M, 3]: (batch, class, box) rows, by
// batch, then class, then selection order.
absl::Status NonMaxSuppression(KernelContext &context) {
  const Tensor &boxes = context.in(0);
  const Tensor &scores = context.in(1);
  if (boxes.rank() != 3 || boxes.dim(2) != 4 || scores.rank() != 3 ||
      scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1)) {
    return NodeError(context,
                     absl::StrCat("boxes ", ShapeString(boxes.shape()), " and scores ",
                                  ShapeString(scores.shape()), " are not [B, N, 4] and [B, C, N]"));
  }
  AMPC_ASSIGN_OR_RETURN(const NmsOptions options, ReadNmsOptions(context));
  const int64_t batches = boxes.dim(0), n = boxes.dim(1), classes = scores.dim(1);
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t c = 0; c < classes; ++c) {
      const float *s = scores.data<float>() + (b * classes + c) * n;
      for (int64_t k : SelectBoxes(boxes.data<float>() + b * n * 4, s, n, options)) {
        rows.insert(rows.end(), {b, c, k});
      }
    }
  }
  const int64_t selected = static_cast<int64_t>(rows.size() / 3);
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, {selected, 3}, DType::kInt64));
  if (!rows.empty()) std::memcpy(out->raw(), rows.data(), rows.size() * sizeof(int64_t));
  return absl::OkStatus();
}

}  // namespace

void RegisterSelectionKernels(KernelRegistry &r) {
  r.Register("cpu", "Unique", {AMPC_ALL_TYPES}, Unique);
  r.Register("cpu", "", "NonMaxSuppression", {{0, {DType::kFloat}}, {1, {DType::kFloat}}},
             NonMaxSuppression);
}

}  // namespace ampc
