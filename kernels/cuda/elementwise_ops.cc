// The CUDA elementwise kernels: broadcasting binary ops, unary ops and Where, from KernelContext
// to the launchers of kernels/cuda/elementwise.h. Checks and messages follow the CPU kernels
// (kernels/cpu/elementwise_kernels.cc, math_kernels.cc); data-movement ops are in copy_ops.cc.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/op_support.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

using cuda::BinaryOp;
using cuda::ElemOf;
using cuda::IndexPlan;
using cuda::Launched;
using cuda::StreamOf;
using cuda::UnaryOp;

DType DTypeOf(cuda::ElemType type) { return static_cast<DType>(type); }

// The broadcast output shape and plan of `shapes`, or the node's error.
absl::Status PlanShapes(const KernelContext& context, const std::vector<Shape>& shapes, Shape* out,
                        IndexPlan* plan) {
  std::vector<const Shape*> pointers;
  for (const Shape& s : shapes) pointers.push_back(&s);
  std::optional<Shape> broadcast = BroadcastShapes(pointers);
  if (!broadcast.has_value()) {
    std::string list;
    for (const Shape& s : shapes)
      absl::StrAppend(&list, list.empty() ? "" : " and ", ShapeString(s));
    return NodeError(context, absl::StrCat("shapes ", list, " do not broadcast"));
  }
  *out = *std::move(broadcast);
  if (!cuda::PlanBroadcast(*out, shapes, plan)) {
    return NodeError(context, absl::StrCat("output ", ShapeString(*out), " needs more than ",
                                           cuda::kMaxDims, " dims after merging"));
  }
  return absl::OkStatus();
}

absl::Status RunBinary(KernelContext& context, BinaryOp op, const Tensor& a, const Tensor& b,
                       Tensor* out_tensor = nullptr) {
  if (op != BinaryOp::kPow && a.dtype() != b.dtype()) {
    return NodeError(context, absl::StrCat("inputs have different element types (",
                                           DTypeName(a.dtype()), ", ", DTypeName(b.dtype()), ")"));
  }
  Shape shape;
  IndexPlan plan;
  AMPC_RETURN_IF_ERROR(PlanShapes(context, {a.shape(), b.shape()}, &shape, &plan));
  Tensor* out = out_tensor;
  if (out == nullptr) {
    AMPC_ASSIGN_OR_RETURN(
        out, context.Output(0, shape, DTypeOf(cuda::BinaryOutputType(op, ElemOf(a.dtype())))));
  }
  return Launched(context, cuda::Binary(op, ElemOf(a.dtype()), ElemOf(b.dtype()), a.raw(), b.raw(),
                                        out->raw(), plan, StreamOf(context)));
}

template <BinaryOp kOp>
absl::Status Binary(KernelContext& context) {
  return RunBinary(context, kOp, context.in(0), context.in(1));
}

absl::Status Mod(KernelContext& context) {
  const bool fmod = context.attributes().Int("fmod", 0) != 0;
  return RunBinary(context, fmod ? BinaryOp::kFmod : BinaryOp::kMod, context.in(0), context.in(1));
}

// Max and Min are variadic: folded pairwise (exact: each step picks one of its inputs).
template <BinaryOp kOp>
absl::Status Variadic(KernelContext& context) {
  const int n = context.num_inputs();
  for (int k = 0; k < n; ++k) {
    if (context.input(k) == nullptr)
      return NodeError(context, absl::StrCat("input ", k, " is missing"));
  }
  if (n == 0) return NodeError(context, "needs at least one input");
  if (n == 1) {
    context.SetOutput(0, context.in(0));
    return absl::OkStatus();
  }
  Tensor acc = context.in(0);
  for (int k = 1; k < n; ++k) {
    const Tensor& next = context.in(k);
    if (k == n - 1) return RunBinary(context, kOp, acc, next);
    Shape shape;
    IndexPlan plan;
    AMPC_RETURN_IF_ERROR(PlanShapes(context, {acc.shape(), next.shape()}, &shape, &plan));
    AMPC_ASSIGN_OR_RETURN(Tensor partial, context.backend().NewTensor(acc.dtype(), shape));
    AMPC_RETURN_IF_ERROR(RunBinary(context, kOp, acc, next, &partial));
    acc = std::move(partial);
  }
  return absl::OkStatus();
}

template <UnaryOp kOp>
absl::Status Unary(KernelContext& context) {
  const Tensor& in = context.in(0);
  cuda::UnaryParams params;
  if constexpr (kOp == UnaryOp::kIsInf) {
    params.detect_positive = context.attributes().Int("detect_positive", 1) != 0;
    params.detect_negative = context.attributes().Int("detect_negative", 1) != 0;
  }
  AMPC_ASSIGN_OR_RETURN(
      Tensor * out,
      context.Output(0, in.shape(), DTypeOf(cuda::UnaryOutputType(kOp, ElemOf(in.dtype())))));
  return Launched(context, cuda::Unary(kOp, ElemOf(in.dtype()), in.raw(), out->raw(), in.size(),
                                       StreamOf(context), params));
}

absl::Status Where(KernelContext& context) {
  const Tensor &cond = context.in(0), &x = context.in(1), &y = context.in(2);
  if (x.dtype() != y.dtype()) {
    return NodeError(
        context, absl::StrCat("X is ", DTypeName(x.dtype()), " but Y is ", DTypeName(y.dtype())));
  }
  Shape shape;
  IndexPlan plan;
  AMPC_RETURN_IF_ERROR(PlanShapes(context, {cond.shape(), x.shape(), y.shape()}, &shape, &plan));
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, shape, x.dtype()));
  return Launched(context, cuda::Where(ElemOf(x.dtype()), cond.data<bool>(), x.raw(), y.raw(),
                                       out->raw(), plan, StreamOf(context)));
}

}  // namespace

void RegisterCudaElementwiseKernels(KernelRegistry& r) {
  const std::vector<DType> floats = {DType::kFloat, DType::kFloat16, DType::kBFloat16,
                                     DType::kDouble};
  std::vector<DType> numeric = floats;
  for (DType d : {DType::kInt8, DType::kUint8, DType::kInt32, DType::kInt64}) numeric.push_back(d);
  std::vector<DType> all = numeric;
  all.push_back(DType::kBool);
  const std::vector<DType> logical = {DType::kBool};
  const std::string cuda = "cuda";

  r.Register(cuda, "Add", numeric, Binary<BinaryOp::kAdd>);
  r.Register(cuda, "Sub", numeric, Binary<BinaryOp::kSub>);
  r.Register(cuda, "Mul", numeric, Binary<BinaryOp::kMul>);
  r.Register(cuda, "Div", numeric, Binary<BinaryOp::kDiv>);
  r.Register(cuda, "Mod", numeric, Mod);
  r.Register(cuda, "", "Pow",
             {{0,
               {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble, DType::kInt32,
                DType::kInt64}},
              {1, numeric}},
             Binary<BinaryOp::kPow>);
  r.Register(cuda, "Max", numeric, Variadic<BinaryOp::kMax>);
  r.Register(cuda, "Min", numeric, Variadic<BinaryOp::kMin>);
  r.Register(cuda, "Equal", all, Binary<BinaryOp::kEqual>);
  r.Register(cuda, "Less", numeric, Binary<BinaryOp::kLess>);
  r.Register(cuda, "LessOrEqual", numeric, Binary<BinaryOp::kLessOrEqual>);
  r.Register(cuda, "Greater", numeric, Binary<BinaryOp::kGreater>);
  r.Register(cuda, "GreaterOrEqual", numeric, Binary<BinaryOp::kGreaterOrEqual>);
  r.Register(cuda, "And", logical, Binary<BinaryOp::kAnd>);
  r.Register(cuda, "Or", logical, Binary<BinaryOp::kOr>);
  r.Register(cuda, "Xor", logical, Binary<BinaryOp::kXor>);

  r.Register(cuda, "Neg", numeric, Unary<UnaryOp::kNeg>);
  r.Register(cuda, "Abs", numeric, Unary<UnaryOp::kAbs>);
  r.Register(cuda, "Relu", numeric, Unary<UnaryOp::kRelu>);
  r.Register(cuda, "Sign", numeric, Unary<UnaryOp::kSign>);
  r.Register(cuda, "Sqrt", floats, Unary<UnaryOp::kSqrt>);
  r.Register(cuda, "Reciprocal", floats, Unary<UnaryOp::kReciprocal>);
  r.Register(cuda, "Exp", floats, Unary<UnaryOp::kExp>);
  r.Register(cuda, "Log", floats, Unary<UnaryOp::kLog>);
  r.Register(cuda, "Erf", floats, Unary<UnaryOp::kErf>);
  r.Register(cuda, "Tanh", floats, Unary<UnaryOp::kTanh>);
  r.Register(cuda, "Sigmoid", floats, Unary<UnaryOp::kSigmoid>);
  r.Register(cuda, "Floor", floats, Unary<UnaryOp::kFloor>);
  r.Register(cuda, "Ceil", floats, Unary<UnaryOp::kCeil>);
  r.Register(cuda, "Round", floats, Unary<UnaryOp::kRound>);
  r.Register(cuda, "IsNaN", floats, Unary<UnaryOp::kIsNaN>);
  r.Register(cuda, "IsInf", floats, Unary<UnaryOp::kIsInf>);
  r.Register(cuda, "Not", logical, Unary<UnaryOp::kNot>);

  r.Register(cuda, "", "Where", {{0, logical}, {1, all}, {2, all}}, Where);
}

}  // namespace ampc
