// The CUDA kernels that convert or move elements: Cast, CastLike, ConstantOfShape, Transpose and
// Expand, from KernelContext to the launchers of kernels/cuda/cast.h and elementwise.h. Checks
// and messages follow the CPU kernels (kernels/cpu/math_kernels.cc, tensor_kernels.cc,
// tensor_layout_kernels.cc). Shapes (ConstantOfShape's input, Expand's) are host inputs.
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/math_ops.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/op_support.h"
#include "runtime/status_macros.h"
#include "runtime/tensor_proto.h"

namespace ampc {
namespace {

using cuda::ElemOf;
using cuda::IndexPlan;
using cuda::Launched;
using cuda::StreamOf;

// The element types the launchers convert between (ElemType's).
bool Convertible(DType dtype) { return cuda::ElemSize(ElemOf(dtype)) != 0; }

// ---- Cast, CastLike ----

absl::Status CastTo(KernelContext& context, const Tensor& input, DType to) {
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
  return std::make_unique<math_ops::CastKernel>(to, CastTo);
}

absl::Status CastLike(KernelContext& context) {
  return CastTo(context, context.in(0), context.in(1).dtype());
}

// ---- ConstantOfShape, Transpose, Expand ----

// A host int64 tensor's values (ConstantOfShape's and Expand's shapes).
absl::StatusOr<std::vector<int64_t>> HostInts(const KernelContext& context, const Tensor& tensor,
                                              const char* what) {
  if (tensor.dtype() != DType::kInt64) {
    return NodeError(context,
                     absl::StrCat(what, " must be int64, got ", DTypeName(tensor.dtype())));
  }
  const int64_t* data = tensor.data<int64_t>();
  return std::vector<int64_t>(data, data + tensor.size());
}

absl::Status StridedCopy(KernelContext& context, const Tensor& input, Tensor& out,
                         const IndexPlan& plan) {
  return Launched(context, cuda::StridedCopy(DTypeSize(input.dtype()), input.raw(), out.raw(), plan,
                                             StreamOf(context)));
}

absl::Status ConstantOfShape(KernelContext& context) {
  AMPC_ASSIGN_OR_RETURN(Shape shape, HostInts(context, context.in(0), "shape"));
  for (int64_t d : shape) {
    if (d < 0)
      return NodeError(context, absl::StrCat("shape ", ShapeString(shape), " is negative"));
  }
  Tensor value = Tensor::Host(DType::kFloat, {1});  // default: float 0
  if (const onnx::AttributeProto* attribute = context.attributes().Find("value")) {
    absl::StatusOr<Tensor> parsed = TensorFromProto(attribute->t());
    if (!parsed.ok()) return NodeError(context, parsed.status().message());
    if (parsed->size() != 1) return NodeError(context, "value must hold one element");
    value = *std::move(parsed);
  }
  const size_t size = DTypeSize(value.dtype());
  uint64_t bits = 0;  // the element's bytes, little-endian
  std::memcpy(&bits, value.raw(), size);
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, std::move(shape), value.dtype()));
  return Launched(context, cuda::Fill(out->raw(), out->size(), size, bits, StreamOf(context)));
}

absl::Status Transpose(KernelContext& context) {
  const Tensor& input = context.in(0);
  const int rank = input.rank();
  std::vector<int64_t> perm = context.attributes().Ints("perm");
  if (perm.empty()) {
    for (int d = rank - 1; d >= 0; --d) perm.push_back(d);
  }
  std::vector<bool> seen(rank, false);
  bool valid = static_cast<int>(perm.size()) == rank;
  for (int64_t p : perm) {
    valid = valid && p >= 0 && p < rank && !seen[p];
    if (valid) seen[p] = true;
  }
  if (!valid) {
    return NodeError(context, absl::StrCat("perm [", absl::StrJoin(perm, ","),
                                           "] is not a permutation of ", rank, " axes"));
  }
  std::vector<int64_t> in_strides(rank, 1);
  for (int d = rank - 2; d >= 0; --d) in_strides[d] = in_strides[d + 1] * input.dim(d + 1);
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
  AMPC_ASSIGN_OR_RETURN(const Shape target, HostInts(context, context.in(1), "shape"));
  Shape shape;
  bool valid = cuda::BroadcastDims({input.shape(), target}, &shape);
  for (int64_t d : target) valid = valid && d >= 0;
  if (!valid) {
    return NodeError(context, absl::StrCat("cannot expand ", ShapeString(input.shape()), " to ",
                                           ShapeString(target)));
  }
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
