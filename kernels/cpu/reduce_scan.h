// CumSum and CumProd (running sums and products along an axis, accumulated in FP32/FP64/64-bit,
// each rounded once) and TopK (the k largest or smallest along an axis; equal values keep the
// lower index first).
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "kernels/cpu/reduce_common.h"
#include "passes/graph/status_macros.h"

namespace ampc::reduce {

// The running value of CumSum (kProduct false) or CumProd: in Acc<T>; integer products in
// uint64_t, whose low bits wrap as T's would (a signed overflow would be undefined).
template <typename T, bool kProduct>
using ScanAcc = std::conditional_t<kProduct && std::is_integral_v<Acc<T>>, uint64_t, Acc<T>>;

template <typename T, bool kProduct>
void ScanRow(const T* px, T* py, const AxisLayout& layout, int64_t start, bool exclusive,
             bool reverse) {
  using A = ScanAcc<T, kProduct>;
  A acc{kProduct ? 1 : 0};
  for (int64_t j = 0; j < layout.n; ++j) {
    const int64_t at = start + (reverse ? layout.n - 1 - j : j) * layout.inner;
    const A v = static_cast<A>(LoadAcc(px[at]));
    if (exclusive) py[at] = StoreAs<T>(acc);
    acc = kProduct ? static_cast<A>(acc * v) : static_cast<A>(acc + v);
    if (!exclusive) py[at] = StoreAs<T>(acc);
  }
}

// CumSum and CumProd: running sums (products) along the axis input, each rounded once;
// `exclusive` leaves out the element itself, `reverse` runs from the end.
template <bool kProduct>
absl::Status CumulativeScan(KernelContext& context) {
  const Tensor& x = context.in(0);
  const Tensor* axis_input = context.input(1);
  if (axis_input == nullptr) return NodeError(context, "the axis input is missing");
  AMPC_ASSIGN_OR_RETURN(int64_t axis_value, ReadScalarInt(context, *axis_input, "axis"));
  AMPC_ASSIGN_OR_RETURN(int axis, NormalizeAxis(context, axis_value, x.rank()));
  const bool exclusive = context.attributes().Int("exclusive", 0) != 0;
  const bool reverse = context.attributes().Int("reverse", 0) != 0;
  const AxisLayout layout = LayoutAround(x.shape(), axis);
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, x.shape()));
  const bool handled =
      Dispatch<AMPC_FLOAT_TYPES, DType::kInt32, DType::kInt64, DType::kUint32, DType::kUint64>(
          x.dtype(), [&]<typename T>() {
            const T* px = x.data<T>();
            T* py = out->data<T>();
            ParallelFor(context, layout.rows(), layout.n, [&](int64_t begin, int64_t end) {
              for (int64_t r = begin; r < end; ++r) {
                ScanRow<T, kProduct>(px, py, layout, layout.RowStart(r), exclusive, reverse);
              }
            });
          });
  return handled ? absl::OkStatus() : UnsupportedType(context);
}

inline absl::Status CumSum(KernelContext& context) { return CumulativeScan<false>(context); }
inline absl::Status CumProd(KernelContext& context) { return CumulativeScan<true>(context); }

// k: the attribute before opset 10, input 1 (a one-element int64 tensor) from opset 10.
inline absl::StatusOr<int64_t> TopKCount(const KernelContext& context) {
  if (context.info().opset < 10) return context.attributes().RequiredInt("k");
  const Tensor* k = context.input(1);
  if (k == nullptr) return NodeError(context, "the k input is missing");
  return ReadScalarInt(context, *k, "k");
}

inline absl::Status TopK(KernelContext& context) {
  const Tensor& x = context.in(0);
  const Attributes attributes = context.attributes();
  AMPC_ASSIGN_OR_RETURN(int axis, NormalizeAxis(context, attributes.Int("axis", -1), x.rank()));
  AMPC_ASSIGN_OR_RETURN(int64_t k, TopKCount(context));
  const bool largest = attributes.Int("largest", 1) != 0;
  // sorted=0 leaves the order unspecified; sorted order is one valid answer.
  const AxisLayout layout = LayoutAround(x.shape(), axis);
  if (k < 0 || k > layout.n) {
    return NodeError(context, absl::StrCat("k = ", k, " is out of range for axis ", axis,
                                           " of length ", layout.n));
  }
  Shape shape = x.shape();
  shape[axis] = k;
  AMPC_ASSIGN_OR_RETURN(Tensor * values, context.Output(0, shape));
  AMPC_ASSIGN_OR_RETURN(Tensor * indices, context.Output(1, shape, DType::kInt64));
  const AxisLayout out_layout{.outer = layout.outer, .n = k, .inner = layout.inner};
  const bool handled = Dispatch<AMPC_FLOAT_TYPES, AMPC_INT_TYPES>(x.dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    const T* px = x.data<T>();
    T* pv = values->data<T>();
    int64_t* pi = indices->data<int64_t>();
    ParallelFor(context, layout.rows(), layout.n, [&](int64_t begin, int64_t end) {
      std::vector<C> row(layout.n);
      std::vector<int64_t> order(layout.n);
      for (int64_t r = begin; r < end; ++r) {
        const int64_t in_start = layout.RowStart(r), out_start = out_layout.RowStart(r);
        for (int64_t j = 0; j < layout.n; ++j)
          row[j] = Compute<T>::Load(px[in_start + j * layout.inner]);
        std::iota(order.begin(), order.end(), int64_t{0});
        std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
          const bool before = largest ? LessNanLast(row[b], row[a]) : LessNanLast(row[a], row[b]);
          const bool after = largest ? LessNanLast(row[a], row[b]) : LessNanLast(row[b], row[a]);
          return before || (!after && a < b);
        });
        for (int64_t j = 0; j < k; ++j) {
          pv[out_start + j * layout.inner] = StoreAs<T>(row[order[j]]);
          pi[out_start + j * layout.inner] = order[j];
        }
      }
    });
  });
  return handled ? absl::OkStatus() : UnsupportedType(context);
}

}  // namespace ampc::reduce
