// What the ai.ampc gradient kernels share (grad_kernels.cc and its grad_*.h headers): the
// type checks, widening to the compute type and rounding once on the way out.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/reduce_common.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/dtype.h"
#include "runtime/core/kernel.h"

namespace ampc::grad {

inline constexpr char kDomain[] = "ai.ampc";

// Whether the node names output i (an omitted optional output is not computed).
inline bool Wants(const KernelContext& context, int i) {
  return i < context.num_outputs() && !context.info().node.output(i).empty();
}

// Inputs listed must be present and have input 0's element type.
inline absl::Status CheckSameType(const KernelContext& context, std::initializer_list<int> inputs,
                                  std::initializer_list<const char*> names) {
  auto name = names.begin();
  for (int i : inputs) {
    const Tensor* t = context.input(i);
    const char* label = *name++;
    if (t == nullptr) return NodeError(context, absl::StrCat("input ", label, " is required"));
    if (t->dtype() != context.in(0).dtype()) {
      return NodeError(context, absl::StrCat("input ", label, " is ", DTypeName(t->dtype()),
                                             " but ", DTypeName(context.in(0).dtype()),
                                             " is expected (the type of input 0)"));
    }
  }
  return absl::OkStatus();
}

inline absl::Status CheckShape(const KernelContext& context, const Tensor& t, const char* name,
                               const Shape& expected) {
  if (t.shape() == expected) return absl::OkStatus();
  return NodeError(context, absl::StrCat(name, " has shape ", ShapeString(t.shape()), ", expected ",
                                         ShapeString(expected)));
}

// SoftmaxGrad/LogSoftmaxGrad's rows: dy (input 0) and y (input 1) of one type and shape, seen
// around attribute `axis` (opset 13 semantics: one axis, default -1).
inline absl::StatusOr<reduce::AxisLayout> SoftmaxGradLayout(const KernelContext& context) {
  AMPC_RETURN_IF_ERROR(CheckSameType(context, {1}, {"y"}));
  const Tensor& y = context.in(1);
  AMPC_RETURN_IF_ERROR(CheckShape(context, context.in(0), "dy", y.shape()));
  const int rank = y.rank();
  AMPC_ASSIGN_OR_RETURN(
      const int axis,
      reduce::NormalizeAxis(context, context.attributes().Int("axis", -1), std::max(rank, 1)));
  return rank == 0 ? reduce::AxisLayout{} : reduce::LayoutAround(y.shape(), axis);
}

inline absl::Status Unsupported(const KernelContext& context) {
  return NodeError(context, absl::StrCat("element type ", DTypeName(context.in(0).dtype()),
                                         " is not supported"));
}

// A float tensor of any float dtype widened to C (the stored statistics may be FP32 beside FP16
// data); false for a non-float dtype.
template <typename C>
bool Widen(const Tensor& tensor, std::vector<C>& values) {
  return Dispatch<AMPC_FLOAT_TYPES>(tensor.dtype(), [&]<typename T>() {
    const T* p = tensor.data<T>();
    values.resize(static_cast<size_t>(tensor.size()));
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<C>(Compute<T>::Load(p[i]));
  });
}

// Values of storage type T as C (its compute type).
template <typename T, typename C = typename Compute<T>::type>
std::vector<C> Load(const Tensor& tensor) {
  std::vector<C> values(static_cast<size_t>(tensor.size()));
  const T* p = tensor.data<T>();
  for (size_t i = 0; i < values.size(); ++i) values[i] = Compute<T>::Load(p[i]);
  return values;
}

// Rounds computed values once into output i of `shape`.
template <typename T, typename C>
absl::Status Store(KernelContext& context, int i, const Shape& shape, const std::vector<C>& v) {
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(i, shape));
  T* p = out->data<T>();
  for (size_t j = 0; j < v.size(); ++j) p[j] = Compute<T>::Store(v[j]);
  return absl::OkStatus();
}

}  // namespace ampc::grad
