// Elementwise ops: arithmetic and comparisons with broadcasting, and unary math.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/numerics/integer_pow.h"

namespace ampc {
namespace {

template <typename Fn>
absl::Status Unsupported(KernelContext& context) {
  return NodeError(context, absl::StrCat("element type ", DTypeName(context.in(0).dtype()),
                                         " is not supported"));
}

// Binary ops other than Pow take two inputs of one type (the checker enforces it; a model that
// skipped the checker gets an error rather than misread data).
absl::Status SameTypes(const KernelContext& context) {
  if (context.in(1).dtype() == context.in(0).dtype()) return absl::OkStatus();
  return NodeError(context, absl::StrCat("inputs have different element types (",
                                         DTypeName(context.in(0).dtype()), ", ",
                                         DTypeName(context.in(1).dtype()), ")"));
}

// Arithmetic whose result has the input type.
template <typename Op, DType... Ds>
absl::Status Arithmetic(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(SameTypes(context));
  absl::Status status;
  const bool handled = Dispatch<Ds...>(context.in(0).dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    status = BinaryMap<T, T>(context, context.in(0), context.in(1),
                             [](C a, C b) -> C { return Op::template Apply<C>(a, b); });
  });
  return handled ? status : Unsupported<void>(context);
}

// Integer arithmetic wraps, as numpy's does, instead of overflowing (undefined behaviour): it is
// done in an unsigned type at least as wide as `unsigned` (a narrower one would promote to int).
template <typename C, typename Fn>
C Wrapping(C a, C b, Fn fn) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, std::make_unsigned_t<C>>;
    return static_cast<C>(fn(static_cast<U>(a), static_cast<U>(b)));
  } else {
    return fn(a, b);
  }
}

struct AddOp {
  template <typename C>
  static C Apply(C a, C b) {
    return Wrapping(a, b, [](auto x, auto y) { return x + y; });
  }
};
struct SubOp {
  template <typename C>
  static C Apply(C a, C b) {
    return Wrapping(a, b, [](auto x, auto y) { return x - y; });
  }
};
struct MulOp {
  template <typename C>
  static C Apply(C a, C b) {
    return Wrapping(a, b, [](auto x, auto y) { return x * y; });
  }
};
struct DivOp {
  template <typename C>
  static C Apply(C a, C b) {
    if constexpr (std::is_integral_v<C>) {
      if (b == 0) return C{0};  // undefined in ONNX; no trap
      if constexpr (std::is_signed_v<C>) {
        // INT_MIN / -1 wraps to INT_MIN instead of trapping.
        if (b == C{-1}) return Wrapping(C{0}, a, [](auto x, auto y) { return x - y; });
      }
      return static_cast<C>(a / b);
    } else {
      return a / b;
    }
  }
};
// Pow's exponent may have another type than its base (T1 in the schema).
absl::Status Pow(KernelContext& context) {
  absl::Status status;
  bool handled = false;
  Dispatch<AMPC_FLOAT_TYPES, DType::kInt32, DType::kInt64>(
      context.in(0).dtype(), [&]<typename T>() {
        handled =
            Dispatch<AMPC_FLOAT_TYPES, AMPC_INT_TYPES>(context.in(1).dtype(), [&]<typename E>() {
              using C = typename Compute<T>::type;
              using CE = typename Compute<E>::type;
              status =
                  BinaryMap<T, T, E>(context, context.in(0), context.in(1), [](C a, CE b) -> C {
                    if constexpr (std::is_integral_v<C>) {
                      return integer_pow::Pow(a, b);
                    } else {
                      // Squares and cubes (GELU's tanh form) as products, as onnxruntime and
                      // PyTorch compute them: a * a is pow's correctly rounded result.
                      if (b == CE{2}) return a * a;
                      if (b == CE{3}) return a * a * a;
                      return static_cast<C>(std::pow(a, static_cast<C>(b)));
                    }
                  });
            });
      });
  return handled ? status : Unsupported<void>(context);
}

// Comparisons: bool output.
template <typename Op>
absl::Status Comparison(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(SameTypes(context));
  absl::Status status;
  const bool handled = Dispatch<AMPC_ALL_TYPES>(context.in(0).dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    status = BinaryMap<T, bool>(context, context.in(0), context.in(1),
                                [](C a, C b) { return Op::template Apply<C>(a, b); });
  });
  return handled ? status : Unsupported<void>(context);
}

struct EqualOp {
  template <typename C>
  static bool Apply(C a, C b) {
    return a == b;
  }
};
struct LessOp {
  template <typename C>
  static bool Apply(C a, C b) {
    return a < b;
  }
};
struct GreaterOp {
  template <typename C>
  static bool Apply(C a, C b) {
    return a > b;
  }
};
struct LessOrEqualOp {
  template <typename C>
  static bool Apply(C a, C b) {
    return a <= b;
  }
};
struct GreaterOrEqualOp {
  template <typename C>
  static bool Apply(C a, C b) {
    return a >= b;
  }
};

template <typename Op>
absl::Status Logical(KernelContext& context) {
  return BinaryMap<bool, bool>(context, context.in(0), context.in(1),
                               [](bool a, bool b) { return Op::Apply(a, b); });
}
struct AndOp {
  static bool Apply(bool a, bool b) { return a && b; }
};
struct OrOp {
  static bool Apply(bool a, bool b) { return a || b; }
};
struct XorOp {
  static bool Apply(bool a, bool b) { return a != b; }
};

// Unary float math: computed in float (double for FP64), rounded once.
template <typename Op>
absl::Status FloatUnary(KernelContext& context) {
  absl::Status status;
  const Attributes attributes = context.attributes();
  const Op op(attributes);
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(context.in(0).dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    status = UnaryMap<T, T>(context, context.in(0), [&op](C x) -> C { return op(x); });
  });
  return handled ? status : Unsupported<void>(context);
}

#define AMPC_UNARY(name, expr)          \
  struct name {                         \
    explicit name(const Attributes&) {} \
    template <typename C>               \
    C operator()(C x) const {           \
      return expr;                      \
    }                                   \
  }

AMPC_UNARY(ExpOp, std::exp(x));
AMPC_UNARY(LogOp, std::log(x));
AMPC_UNARY(SqrtOp, std::sqrt(x));
AMPC_UNARY(ReciprocalOp, C{1} / x);
AMPC_UNARY(SigmoidOp, C{1} / (C{1} + std::exp(-x)));
AMPC_UNARY(TanhOp, std::tanh(x));
AMPC_UNARY(ErfOp, std::erf(x));
AMPC_UNARY(FloorOp, std::floor(x));
AMPC_UNARY(CeilOp, std::ceil(x));
AMPC_UNARY(RoundOp, std::nearbyint(x));
AMPC_UNARY(SinOp, std::sin(x));
AMPC_UNARY(CosOp, std::cos(x));
AMPC_UNARY(TanOp, std::tan(x));
AMPC_UNARY(AsinOp, std::asin(x));
AMPC_UNARY(AcosOp, std::acos(x));
AMPC_UNARY(AtanOp, std::atan(x));
AMPC_UNARY(SinhOp, std::sinh(x));
AMPC_UNARY(CoshOp, std::cosh(x));
AMPC_UNARY(AsinhOp, std::asinh(x));
AMPC_UNARY(AcoshOp, std::acosh(x));
AMPC_UNARY(AtanhOp, std::atanh(x));
AMPC_UNARY(SoftplusOp, std::log1p(std::exp(-std::abs(x))) + std::max(x, C{0}));
AMPC_UNARY(SoftsignOp, x / (C{1} + std::abs(x)));
AMPC_UNARY(HardSwishOp, x* std::max(C{0}, std::min(C{1}, x / C{6} + C{0.5})));
#undef AMPC_UNARY

struct LeakyReluOp {
  explicit LeakyReluOp(const Attributes& a) : alpha(a.Float("alpha", 0.01f)) {}
  template <typename C>
  C operator()(C x) const {
    return x < C{0} ? static_cast<C>(alpha) * x : x;
  }
  float alpha;
};
struct EluOp {
  explicit EluOp(const Attributes& a) : alpha(a.Float("alpha", 1.0f)) {}
  template <typename C>
  C operator()(C x) const {
    return x < C{0} ? static_cast<C>(alpha) * (std::exp(x) - C{1}) : x;
  }
  float alpha;
};
struct SeluOp {
  explicit SeluOp(const Attributes& a)
      : alpha(a.Float("alpha", 1.67326319217681884765625f)),
        gamma(a.Float("gamma", 1.05070102214813232421875f)) {}
  template <typename C>
  C operator()(C x) const {
    const C g = static_cast<C>(gamma);
    return x <= C{0} ? g * (static_cast<C>(alpha) * std::exp(x) - static_cast<C>(alpha)) : g * x;
  }
  float alpha, gamma;
};
struct CeluOp {
  explicit CeluOp(const Attributes& a) : alpha(a.Float("alpha", 1.0f)) {}
  template <typename C>
  C operator()(C x) const {
    const C al = static_cast<C>(alpha);
    if (std::isnan(x)) return x;
    return std::max(C{0}, x) + std::min(C{0}, al * (std::exp(x / al) - C{1}));
  }
  float alpha;
};
struct ThresholdedReluOp {
  explicit ThresholdedReluOp(const Attributes& a) : alpha(a.Float("alpha", 1.0f)) {}
  template <typename C>
  C operator()(C x) const {
    return x > static_cast<C>(alpha) ? x : C{0};  // ONNX: NaN is not > alpha, so 0
  }
  float alpha;
};
struct HardSigmoidOp {
  explicit HardSigmoidOp(const Attributes& a)
      : alpha(a.Float("alpha", 0.2f)), beta(a.Float("beta", 0.5f)) {}
  template <typename C>
  C operator()(C x) const {
    if (std::isnan(x)) return x;
    return std::max(C{0}, std::min(C{1}, static_cast<C>(alpha) * x + static_cast<C>(beta)));
  }
  float alpha, beta;
};

// Gelu-20, in the compute type and rounded once (as a GPU's fused kernel; ONNX's function body
// would round each of its ops).
struct GeluOp {
  explicit GeluOp(const Attributes& a) : tanh(a.String("approximate", "none") == "tanh") {}
  template <typename C>
  C operator()(C x) const {
    if (tanh) {
      const C u = static_cast<C>(std::sqrt(2.0 / M_PI)) * (x + C{0.044715} * x * x * x);
      return C{0.5} * x * (C{1} + std::tanh(u));
    }
    return C{0.5} * x * (C{1} + std::erf(x * static_cast<C>(M_SQRT1_2)));
  }
  bool tanh;
};

// Unary ops defined for signed numbers (floats and signed integers).
template <typename Op>
absl::Status SignedUnary(KernelContext& context) {
  absl::Status status;
  const bool handled =
      Dispatch<AMPC_FLOAT_TYPES, DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64,
               DType::kUint8, DType::kUint16, DType::kUint32, DType::kUint64>(
          context.in(0).dtype(), [&]<typename T>() {
            using C = typename Compute<T>::type;
            status = UnaryMap<T, T>(context, context.in(0),
                                    [](C x) -> C { return Op::template Apply<C>(x); });
          });
  return handled ? status : Unsupported<void>(context);
}
// NaN propagates through every activation, as in PyTorch: a finite check downstream (the loss
// scaler's) must see it.
struct ReluOp {
  template <typename C>
  static C Apply(C x) {
    if constexpr (std::is_unsigned_v<C>) {
      return x;
    } else {
      return x < C{0} ? C{0} : x;
    }
  }
};
struct AbsOp {
  template <typename C>
  static C Apply(C x) {
    if constexpr (std::is_unsigned_v<C>)
      return x;
    else
      return x < C{0} ? static_cast<C>(-x) : x;
  }
};
struct NegOp {
  template <typename C>
  static C Apply(C x) {
    return static_cast<C>(-x);
  }
};
struct SignOp {
  template <typename C>
  static C Apply(C x) {
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(x)) return x;
    }
    return x > C{0} ? C{1} : (x < C{0} ? static_cast<C>(-1) : C{0});
  }
};

absl::Status Not(KernelContext& context) {
  return UnaryMap<bool, bool>(context, context.in(0), [](bool x) { return !x; });
}

template <bool kInf>
absl::Status IsNanOrInf(KernelContext& context) {
  absl::Status status;
  const int64_t detect_positive = context.attributes().Int("detect_positive", 1);
  const int64_t detect_negative = context.attributes().Int("detect_negative", 1);
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(context.in(0).dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    status = UnaryMap<T, bool>(context, context.in(0), [&](C x) {
      if constexpr (kInf) {
        return std::isinf(x) && ((x > 0 && detect_positive) || (x < 0 && detect_negative));
      } else {
        return static_cast<bool>(std::isnan(x));
      }
    });
  });
  return handled ? status : Unsupported<void>(context);
}

}  // namespace

void RegisterElementwiseKernels(KernelRegistry& r) {
  const std::vector<DType> numeric = {AMPC_FLOAT_TYPES, AMPC_INT_TYPES};
  const std::vector<DType> floats = {AMPC_FLOAT_TYPES};
  const std::vector<DType> all = {AMPC_ALL_TYPES};
  r.Register("cpu", "Add", numeric, Arithmetic<AddOp, AMPC_FLOAT_TYPES, AMPC_INT_TYPES>);
  r.Register("cpu", "Sub", numeric, Arithmetic<SubOp, AMPC_FLOAT_TYPES, AMPC_INT_TYPES>);
  r.Register("cpu", "Mul", numeric, Arithmetic<MulOp, AMPC_FLOAT_TYPES, AMPC_INT_TYPES>);
  r.Register("cpu", "Div", numeric, Arithmetic<DivOp, AMPC_FLOAT_TYPES, AMPC_INT_TYPES>);
  r.Register("cpu", "Pow", {AMPC_FLOAT_TYPES, DType::kInt32, DType::kInt64}, Pow);
  r.Register("cpu", "Equal", all, Comparison<EqualOp>);
  r.Register("cpu", "Less", numeric, Comparison<LessOp>);
  r.Register("cpu", "Greater", numeric, Comparison<GreaterOp>);
  r.Register("cpu", "LessOrEqual", numeric, Comparison<LessOrEqualOp>);
  r.Register("cpu", "GreaterOrEqual", numeric, Comparison<GreaterOrEqualOp>);
  r.Register("cpu", "And", {DType::kBool}, Logical<AndOp>);
  r.Register("cpu", "Or", {DType::kBool}, Logical<OrOp>);
  r.Register("cpu", "Xor", {DType::kBool}, Logical<XorOp>);
  r.Register("cpu", "Not", {DType::kBool}, Not);
  r.Register("cpu", "IsNaN", floats, IsNanOrInf<false>);
  r.Register("cpu", "IsInf", floats, IsNanOrInf<true>);
  r.Register("cpu", "Relu", numeric, SignedUnary<ReluOp>);
  r.Register("cpu", "Abs", numeric, SignedUnary<AbsOp>);
  r.Register("cpu", "Neg", numeric, SignedUnary<NegOp>);
  r.Register("cpu", "Sign", numeric, SignedUnary<SignOp>);
  r.Register("cpu", "Exp", floats, FloatUnary<ExpOp>);
  r.Register("cpu", "Log", floats, FloatUnary<LogOp>);
  r.Register("cpu", "Sqrt", floats, FloatUnary<SqrtOp>);
  r.Register("cpu", "Reciprocal", floats, FloatUnary<ReciprocalOp>);
  r.Register("cpu", "Sigmoid", floats, FloatUnary<SigmoidOp>);
  r.Register("cpu", "Tanh", floats, FloatUnary<TanhOp>);
  r.Register("cpu", "Erf", floats, FloatUnary<ErfOp>);
  r.Register("cpu", "Floor", floats, FloatUnary<FloorOp>);
  r.Register("cpu", "Ceil", floats, FloatUnary<CeilOp>);
  r.Register("cpu", "Round", floats, FloatUnary<RoundOp>);
  r.Register("cpu", "Sin", floats, FloatUnary<SinOp>);
  r.Register("cpu", "Cos", floats, FloatUnary<CosOp>);
  r.Register("cpu", "Tan", floats, FloatUnary<TanOp>);
  r.Register("cpu", "Asin", floats, FloatUnary<AsinOp>);
  r.Register("cpu", "Acos", floats, FloatUnary<AcosOp>);
  r.Register("cpu", "Atan", floats, FloatUnary<AtanOp>);
  r.Register("cpu", "Sinh", floats, FloatUnary<SinhOp>);
  r.Register("cpu", "Cosh", floats, FloatUnary<CoshOp>);
  r.Register("cpu", "Asinh", floats, FloatUnary<AsinhOp>);
  r.Register("cpu", "Acosh", floats, FloatUnary<AcoshOp>);
  r.Register("cpu", "Atanh", floats, FloatUnary<AtanhOp>);
  r.Register("cpu", "Softplus", floats, FloatUnary<SoftplusOp>);
  r.Register("cpu", "Softsign", floats, FloatUnary<SoftsignOp>);
  r.Register("cpu", "HardSwish", floats, FloatUnary<HardSwishOp>);
  r.Register("cpu", "LeakyRelu", floats, FloatUnary<LeakyReluOp>);
  r.Register("cpu", "Elu", floats, FloatUnary<EluOp>);
  r.Register("cpu", "Selu", floats, FloatUnary<SeluOp>);
  r.Register("cpu", "Celu", floats, FloatUnary<CeluOp>);
  r.Register("cpu", "ThresholdedRelu", floats, FloatUnary<ThresholdedReluOp>);
  r.Register("cpu", "HardSigmoid", floats, FloatUnary<HardSigmoidOp>);
  r.Register("cpu", "Gelu", floats, FloatUnary<GeluOp>);
}

}  // namespace ampc
