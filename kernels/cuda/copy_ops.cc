// The CUDA kernels that convert or move elements: Cast, CastLike, ConstantOfShape, Transpose and
// Expand, from KernelContext to the launchers of kernels/cuda/cast.h and elementwise.h. Checks
// and messages are the CPU kernels' own (kernels/cpu/math_ops.h, tensor_ops.h). Shapes
// (ConstantOfShape's input, Expand's) are host inputs.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/math_ops.h"
#include "kernels/cpu/tensor_ops.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/op_support.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

using cuda::ElemOf;
using cuda::IndexPlan;
using cuda::Launched;
using cuda::StreamOf;

// The element types the launchers convert between (ElemType's).
bool Convertible(DType dtype) { return cuda::ElemSize(ElemOf(dtype)) != 0; }

// ---- Cast, CastLike ----

// `rounding` only matters for the low-bit types, which the launchers do not convert.
absl::Status CastTo(KernelContext& context, const Tensor& input, DType to,
                    const LowBitRounding& /*rounding*/) {
  if (input.dtype() == to) {
    context.SetOutput(0, input);  // no conversion: share the buffer
    return absl::OkStatus();
  }
  if (!Convertible(input.dtype()) || !Convertible(to)) {
    return NodeError(context, absl::StrCat("cast from ", DTypeName(input.dtype()), " to ",
                                           DTypeName(to), " is not supported"));
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, input.shape(), to));
  return Launched(context, cuda::Cast(ElemOf(input.dtype()), ElemOf(to), input.raw(), out->raw(),
                                      input.size(), StreamOf(context)));
}

// Cast; a target type outside the launchers' has no CUDA kernel (the node may run on the CPU).
absl::StatusOr<std::unique_ptr<OpKernel>> CreateCast(const KernelInfo& info) {
  AMPC_ASSIGN_OR_RETURN(DType to, math_ops::CastTarget(info));
  if (!Convertible(to)) {
    return absl::UnimplementedError(absl::StrCat("cast to ", DTypeName(to), " has no CUDA kernel"));
  }
  AMPC_ASSIGN_OR_RETURN(LowBitRounding rounding, math_ops::CastRounding(info));
  return std::make_unique<math_ops::CastKernel>(to, rounding, CastTo);
}

absl::Status CastLike(KernelContext& context) {
  return CastTo(context, context.in(0), context.in(1).dtype(), LowBitRounding{});
}

// ---- ConstantOfShape, Transpose, Expand ----

absl::Status StridedCopy(KernelContext& context, const Tensor& input, Tensor& out,
                         const IndexPlan& plan) {
  return Launched(context, cuda::StridedCopy(DTypeSize(input.dtype()), input.raw(), out.raw(), plan,
                                             StreamOf(context)));
}

absl::Status ConstantOfShape(KernelContext& context) {
  AMPC_ASSIGN_OR_RETURN(tensor_ops::ConstantFill fill, tensor_ops::ReadConstantOfShape(context));
  const Tensor& value = fill.value;
  const size_t size = DTypeSize(value.dtype());
  uint64_t bits = 0;  // the element's bytes, little-endian
  std::memcpy(&bits, value.raw(), size);
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, std::move(fill.shape), value.dtype()));
  return Launched(context, cuda::Fill(out->raw(), out->size(), size, bits, StreamOf(context)));
}

absl::Status Transpose(KernelContext& context) {
  const Tensor& input = context.in(0);
  const int rank = input.rank();
  AMPC_ASSIGN_OR_RETURN(const std::vector<int64_t> perm, tensor_ops::TransposePerm(context, rank));
  const std::vector<int64_t> in_strides = tensor_ops::Strides(input.shape());
  Shape shape;
  std::vector<int64_t> strides;
  for (int64_t p : perm) {
    shape.push_back(input.dim(static_cast<int>(p)));
    strides.push_back(in_strides[p]);
  }
  IndexPlan plan;
  if (!cuda::PlanStrided(shape, {strides}, &plan)) {
    return NodeError(context, absl::StrCat("transpose of ", ShapeString(input.shape()),
                                           " needs more than ", cuda::kMaxDims, " dims"));
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, shape, input.dtype()));
  return StridedCopy(context, input, *out, plan);
}

absl::Status Expand(KernelContext& context) {
  const Tensor& input = context.in(0);
  AMPC_ASSIGN_OR_RETURN(const Shape shape, tensor_ops::ExpandShape(context));
  IndexPlan plan;
  if (!cuda::PlanBroadcast(shape, {input.shape()}, &plan)) {
    return NodeError(context, absl::StrCat("expanding to ", ShapeString(shape), " needs more than ",
                                           cuda::kMaxDims, " dims"));
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, shape, input.dtype()));
  return StridedCopy(context, input, *out, plan);
}

}  // namespace

void RegisterCudaCopyKernels(KernelRegistry& r) {
  const std::vector<DType> convertible = {DType::kFloat,  DType::kFloat16, DType::kBFloat16,
                                          DType::kDouble, DType::kInt8,    DType::kUint8,
                                          DType::kInt32,  DType::kInt64,   DType::kBool};
  const std::vector<DType> all = {AMPC_ALL_TYPES};  // moved as bytes: any element type
  const std::vector<DType> int64 = {DType::kInt64};
  const std::string cuda = "cuda";
  r.Register(KernelDef{"", "Cast", cuda, {{0, convertible}}, CreateCast});
  r.Register(cuda, "", "CastLike", {{0, convertible}, {1, convertible}}, CastLike);
  r.Register(cuda, "", "ConstantOfShape", {{0, int64}}, ConstantOfShape, {.host = {0}});
  r.Register(cuda, "", "Transpose", {{0, all}}, Transpose);
  r.Register(cuda, "", "Expand", {{0, all}, {1, int64}}, Expand, {.host = {1}});
}

}  // namespace ampc
