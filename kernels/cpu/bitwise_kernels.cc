// Bitwise ops on integers: BitShift (unsigned from opset 11, signed from 28),
// BitwiseAnd/Or/Xor/Not (18) with broadcasting, and BitCast (26), which
// reinterprets each element's bytes as another type of the same width.
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

absl::Status UnsupportedType(const KernelContext &context) {
  return NodeError(context, absl::StrCat("element type ", DTypeName(context.in(0).dtype()),
                                         " is not supported"));
}

// Both inputs of a binary bitwise op share one type (the checker enforces it; a
// model that skipped the checker gets an error rather than misread data).
absl::Status SameTypes(const KernelContext &context) {
  if (context.in(1).dtype() == context.in(0).dtype()) return absl::OkStatus();
  return NodeError(context, absl::StrCat("inputs have different element types (",
                                         DTypeName(context.in(0).dtype()), ", ",
                                         DTypeName(context.in(1).dtype()), ")"));
}

// Shifts as ONNX defines them: a shift by a negative amount or by the width or
// more leaves only the sign fill (-1 for a right shift of a negative value,
// else 0); a signed left shift is done on the unsigned bits (no undefined
// overflow); a signed right shift is arithmetic.
template <typename T>
T Shift(T a, T b, bool left) {
  using U = std::make_unsigned_t<T>;
  constexpr int kBits = static_cast<int>(sizeof(T) * 8);
  const bool negative = std::is_signed_v<T> && a < T{0};
  if (b < T{0} || static_cast<U>(b) >= static_cast<U>(kBits)) {
    return !left && negative ? static_cast<T>(-1) : T{0};
  }
  if (left) return static_cast<T>(static_cast<U>(static_cast<U>(a) << b));
  return static_cast<T>(a >> b);
}

absl::Status BitShift(KernelContext &context) {
  const std::string direction = context.attributes().String("direction", "");
  if (direction != "LEFT" && direction != "RIGHT") {
    return NodeError(context, absl::StrCat("attribute 'direction' must be LEFT or RIGHT, got '",
                                           direction, "'"));
  }
  AMPC_RETURN_IF_ERROR(SameTypes(context));
  const bool left = direction == "LEFT";
  absl::Status status;
  const bool handled = Dispatch<AMPC_INT_TYPES>(context.in(0).dtype(), [&]<typename T>() {
    status = BinaryMap<T, T>(context, context.in(0), context.in(1),
                             [left](T a, T b) -> T { return Shift(a, b, left); });
  });
  return handled ? status : UnsupportedType(context);
}

template <typename Op>
absl::Status Bitwise(KernelContext &context) {
  AMPC_RETURN_IF_ERROR(SameTypes(context));
  absl::Status status;
  const bool handled = Dispatch<AMPC_INT_TYPES>(context.in(0).dtype(), [&]<typename T>() {
    status = BinaryMap<T, T>(context, context.in(0), context.in(1),
                             [](T a, T b) -> T { return static_cast<T>(Op::Apply(a, b)); });
  });
  return handled ? status : UnsupportedType(context);
}
struct AndOp {
  template <typename T>
  static auto Apply(T a, T b) {
    return a & b;
  }
};
struct OrOp {
  template <typename T>
  static auto Apply(T a, T b) {
    return a | b;
  }
};
struct XorOp {
  template <typename T>
  static auto Apply(T a, T b) {
    return a ^ b;
  }
};

absl::Status BitwiseNot(KernelContext &context) {
  absl::Status status;
  const bool handled = Dispatch<AMPC_INT_TYPES>(context.in(0).dtype(), [&]<typename T>() {
    status = UnaryMap<T, T>(context, context.in(0), [](T x) -> T { return static_cast<T>(~x); });
  });
  return handled ? status : UnsupportedType(context);
}

// The target type of BitCast: attribute 'to', a type the runtime holds, as wide
// as the input's.
absl::StatusOr<DType> BitCastTarget(const KernelContext &context) {
  const absl::StatusOr<int64_t> to = context.attributes().RequiredInt("to");
  if (!to.ok()) return NodeError(context, to.status().message());
  const DType target = static_cast<DType>(*to);
  if (absl::Status supported = CheckSupported(target); !supported.ok()) {
    return NodeError(context, absl::StrCat("attribute 'to': ", supported.message()));
  }
  const DType from = context.in(0).dtype();
  if (DTypeSize(target) != DTypeSize(from)) {
    return NodeError(context, absl::StrCat("cannot reinterpret ", DTypeName(from), " (",
                                           DTypeSize(from) * 8, " bits) as ", DTypeName(target),
                                           " (", DTypeSize(target) * 8, " bits)"));
  }
  return target;
}

// The output has the input's shape and bytes (little endian on every host ampc
// builds for).
absl::Status BitCast(KernelContext &context) {
  const Tensor &x = context.in(0);
  AMPC_ASSIGN_OR_RETURN(const DType target, BitCastTarget(context));
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, x.shape(), target));
  if (x.bytes() > 0) std::memcpy(out->raw(), x.raw(), x.bytes());
  return absl::OkStatus();
}

}  // namespace

void RegisterBitwiseKernels(KernelRegistry &r) {
  const std::vector<DType> integers = {AMPC_INT_TYPES};
  r.Register("cpu", "BitShift", integers, BitShift);
  r.Register("cpu", "BitwiseAnd", integers, Bitwise<AndOp>);
  r.Register("cpu", "BitwiseOr", integers, Bitwise<OrOp>);
  r.Register("cpu", "BitwiseXor", integers, Bitwise<XorOp>);
  r.Register("cpu", "BitwiseNot", integers, BitwiseNot);
  r.Register("cpu", "BitCast", {AMPC_ALL_TYPES}, BitCast);
}

}  // namespace ampc
