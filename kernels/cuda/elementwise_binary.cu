// Broadcasting binary ops: arithmetic, Pow, comparisons and logic.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/elementwise_kernels.cuh"
#include "kernels/cuda/elementwise_math.h"

namespace ampc::cuda {
namespace {

using detail::AllTypes;
using detail::NumericTypes;
using detail::Types;
using detail::Visit;

// Storage in, storage out: loads to the compute types, applies Op, rounds once to Out.
template <typename Op, typename A, typename B, typename Out>
struct BinaryApply {
  AMPC_HD Out operator()(A a, B b) const {
    return Num<Out>::Store(Op{}(Num<A>::Load(a), Num<B>::Load(b)));
  }
};

struct Args {
  const void* a;
  const void* b;
  void* out;
  const IndexPlan& plan;
  cudaStream_t stream;
};

template <typename Op, typename A, typename B, typename Out>
cudaError_t Run(const Args& args) {
  return detail::LaunchMap2(BinaryApply<Op, A, B, Out>{}, static_cast<const A*>(args.a),
                            static_cast<const B*>(args.b), static_cast<Out*>(args.out), args.plan,
                            args.stream);
}

// Both inputs of one type from TypeSet; the output bool or that type.
template <typename Op, bool kBoolOut, typename TypeSet>
cudaError_t SameType(TypeSet types, ElemType a_type, ElemType b_type, const Args& args) {
  if (a_type != b_type) return cudaErrorNotSupported;
  cudaError_t result = cudaErrorNotSupported;
  Visit(types, a_type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    result = Run<Op, T, T, std::conditional_t<kBoolOut, bool, T>>(args);
  });
  return result;
}

cudaError_t Pow(ElemType a_type, ElemType b_type, const Args& args) {
  cudaError_t result = cudaErrorNotSupported;
  using Bases = Types<float, F16, BF16, double, int32_t, int64_t>;
  Visit(Bases{}, a_type, [&](auto base) {
    Visit(NumericTypes{}, b_type, [&](auto exponent) {
      using T = typename decltype(base)::type;
      using E = typename decltype(exponent)::type;
      result = Run<PowOp, T, E, T>(args);
    });
  });
  return result;
}

}  // namespace

ElemType BinaryOutputType(BinaryOp op, ElemType a_type) {
  return op >= BinaryOp::kEqual ? ElemType::kBool : a_type;
}

cudaError_t Binary(BinaryOp op, ElemType a_type, ElemType b_type, const void* d_a, const void* d_b,
                   void* d_out, const IndexPlan& plan, cudaStream_t stream) {
  const Args args{d_a, d_b, d_out, plan, stream};
  NumericTypes numeric;
  switch (op) {
    case BinaryOp::kAdd:
      return SameType<AddOp, false>(numeric, a_type, b_type, args);
    case BinaryOp::kSub:
      return SameType<SubOp, false>(numeric, a_type, b_type, args);
    case BinaryOp::kMul:
      return SameType<MulOp, false>(numeric, a_type, b_type, args);
    case BinaryOp::kDiv:
      return SameType<DivOp, false>(numeric, a_type, b_type, args);
    case BinaryOp::kMax:
      return SameType<MaxOp, false>(numeric, a_type, b_type, args);
    case BinaryOp::kMin:
      return SameType<MinOp, false>(numeric, a_type, b_type, args);
    case BinaryOp::kMod:
      return SameType<ModOp<false>, false>(numeric, a_type, b_type, args);
    case BinaryOp::kFmod:
      return SameType<ModOp<true>, false>(numeric, a_type, b_type, args);
    case BinaryOp::kPow:
      return Pow(a_type, b_type, args);
    case BinaryOp::kEqual:
      return SameType<EqualOp, true>(AllTypes{}, a_type, b_type, args);
    case BinaryOp::kLess:
      return SameType<LessOp, true>(numeric, a_type, b_type, args);
    case BinaryOp::kLessOrEqual:
      return SameType<LessOrEqualOp, true>(numeric, a_type, b_type, args);
    case BinaryOp::kGreater:
      return SameType<GreaterOp, true>(numeric, a_type, b_type, args);
    case BinaryOp::kGreaterOrEqual:
      return SameType<GreaterOrEqualOp, true>(numeric, a_type, b_type, args);
    case BinaryOp::kAnd:
      return SameType<AndOp, true>(Types<bool>{}, a_type, b_type, args);
    case BinaryOp::kOr:
      return SameType<OrOp, true>(Types<bool>{}, a_type, b_type, args);
    case BinaryOp::kXor:
      return SameType<XorOp, true>(Types<bool>{}, a_type, b_type, args);
  }
  return cudaErrorNotSupported;
}

}  // namespace ampc::cuda
