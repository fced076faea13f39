// Math ops: Cast/CastLike, Where, Clip, variadic Max/Min/Sum/Mean, Mod, PRelu, Shrink, Mish and
// Det. FP16/BF16 compute in float and round once to the output type.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/ascii.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/low_bit_cast.h"
#include "kernels/cpu/math_ops.h"
#include "kernels/numerics/cast_math.h"

namespace ampc {
namespace math_ops {

// Opset 1 names the target type with a string ("FLOAT"), later opsets with the enum value.
absl::StatusOr<DType> CastTarget(const KernelInfo& info) {
  const onnx::AttributeProto* to = info.attributes().Find("to");
  if (to == nullptr) return absl::InvalidArgumentError("attribute 'to' is missing");
  DType dtype = DType::kUndefined;
  if (to->type() == onnx::AttributeProto::STRING) {
    onnx::TensorProto::DataType parsed;
    if (!onnx::TensorProto::DataType_Parse(absl::AsciiStrToUpper(to->s()), &parsed)) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute 'to' = '", to->s(), "' is unknown"));
    }
    dtype = static_cast<DType>(parsed);
  } else {
    dtype = static_cast<DType>(to->i());
  }
  if (absl::Status status = CheckSupported(dtype); !status.ok()) return status;
  return dtype;
}

absl::StatusOr<LowBitRounding> CastRounding(const KernelInfo& info) {
  const Attributes attributes = info.attributes();
  LowBitRounding rounding;
  rounding.saturate = attributes.Int("saturate", 1) != 0;
  const std::string mode = attributes.String("round_mode", "up");
  if (mode == "up") {
    rounding.round_mode = RoundMode::kUp;
  } else if (mode == "down") {
    rounding.round_mode = RoundMode::kDown;
  } else if (mode == "nearest") {
    rounding.round_mode = RoundMode::kNearest;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'round_mode' = '", mode,
                                                   "' is not one of 'up', 'down', 'nearest'"));
  }
  return rounding;
}

}  // namespace math_ops

namespace {

absl::Status UnsupportedType(const KernelContext& context, DType dtype) {
  return NodeError(context, absl::StrCat("element type ", DTypeName(dtype), " is not supported"));
}

// ---- Cast, CastLike ----

absl::Status CastTo(KernelContext& context, const Tensor& input, DType to,
                    const LowBitRounding& rounding) {
  if (input.dtype() == to) {
    context.SetOutput(0, input);  // no conversion: share the buffer
    return absl::OkStatus();
  }
  if (IsLowBit(input.dtype()) || IsLowBit(to)) return CastLowBit(context, input, to, rounding);
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, input.shape(), to));
  bool handled = false;
  Dispatch<AMPC_ALL_TYPES>(input.dtype(), [&]<typename From>() {
    handled = Dispatch<AMPC_ALL_TYPES>(to, [&]<typename To>() {
      const From* x = input.data<From>();
      To* y = out->data<To>();
      CpuOf(context.backend())
          .pool()
          .ParallelFor(input.size(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
            // FP16/BF16 <-> FP32 through the vector conversions (the same bits).
            if constexpr (std::is_same_v<From, float> && kLowFloat<To>) {
              NarrowFromAcc(x + begin, end - begin, y + begin);
            } else if constexpr (kLowFloat<From> && std::is_same_v<To, float>) {
              WidenToAcc(x + begin, end - begin, y + begin);
            } else {
              for (int64_t i = begin; i < end; ++i) y[i] = ConvertElement<From, To>(x[i]);
            }
          });
    });
  });
  if (!handled) {
    return NodeError(context, absl::StrCat("cast from ", DTypeName(input.dtype()), " to ",
                                           DTypeName(to), " is not supported"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<OpKernel>> CreateCast(const KernelInfo& info) {
  AMPC_ASSIGN_OR_RETURN(DType to, math_ops::CastTarget(info));
  AMPC_ASSIGN_OR_RETURN(LowBitRounding rounding, math_ops::CastRounding(info));
  return std::make_unique<math_ops::CastKernel>(to, rounding, CastTo);
}

absl::Status CastLike(KernelContext& context) {
  absl::StatusOr<LowBitRounding> rounding = math_ops::CastRounding(context.info());
  if (!rounding.ok()) return NodeError(context, rounding.status().message());
  return CastTo(context, context.in(0), context.in(1).dtype(), *rounding);
}

// ---- Where ----

// z[i] = c[i] ? x[i] : y[i] for i in [0, n), an input that is single giving its first value
// throughout; branch-free, so the loop vectorises.
template <bool kSc, bool kSx, bool kSy, typename U>
void SelectLoop(const bool* c, const U* x, const U* y, U* z, int64_t n) {
  const bool c0 = c[0];
  const U x0 = x[0], y0 = y[0];
  for (int64_t i = 0; i < n; ++i) {
    z[i] = BitSelect(kSc ? c0 : c[i], kSx ? x0 : x[i], kSy ? y0 : y[i]);
  }
}

template <typename U>
void SelectRun(const bool* c, bool sc, const U* x, bool sx, const U* y, bool sy, U* z, int64_t n) {
  const int which = (sc ? 4 : 0) | (sx ? 2 : 0) | (sy ? 1 : 0);
  switch (which) {
    case 0:
      return SelectLoop<false, false, false>(c, x, y, z, n);
    case 1:
      return SelectLoop<false, false, true>(c, x, y, z, n);
    case 2:
      return SelectLoop<false, true, false>(c, x, y, z, n);
    case 3:
      return SelectLoop<false, true, true>(c, x, y, z, n);
    case 4:
      return SelectLoop<true, false, false>(c, x, y, z, n);
    case 5:
      return SelectLoop<true, false, true>(c, x, y, z, n);
    case 6:
      return SelectLoop<true, true, false>(c, x, y, z, n);
    default:
      return SelectLoop<true, true, true>(c, x, y, z, n);
  }
}

absl::Status Where(KernelContext& context) {
  const Tensor &cond = context.in(0), &a = context.in(1), &b = context.in(2);
  const Shape* shapes[] = {&cond.shape(), &a.shape(), &b.shape()};
  std::optional<Shape> shape = BroadcastShapes(shapes);
  if (!shape.has_value()) {
    return NodeError(
        context, absl::StrCat("shapes ", ShapeString(cond.shape()), ", ", ShapeString(a.shape()),
                              " and ", ShapeString(b.shape()), " do not broadcast"));
  }
  if (a.dtype() != b.dtype()) {
    return NodeError(
        context, absl::StrCat("X is ", DTypeName(a.dtype()), " but Y is ", DTypeName(b.dtype())));
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, *shape, a.dtype()));
  const bool handled = Dispatch<AMPC_ALL_TYPES>(a.dtype(), [&]<typename T>() {
    using U = SameBits<T>;
    static_assert(sizeof(U) == sizeof(T));
    const bool* c = cond.data<bool>();
    const U* x = reinterpret_cast<const U*>(a.data<T>());
    const U* y = reinterpret_cast<const U*>(b.data<T>());
    U* z = reinterpret_cast<U*>(out->data<T>());
    ThreadPool& pool = CpuOf(context.backend()).pool();
    BroadcastIndex index(*shape, shapes);
    if (index.trivial()) {
      const bool sc = index.single(0), sx = index.single(1), sy = index.single(2);
      pool.ParallelFor(out->size(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
        SelectRun(c + (sc ? 0 : begin), sc, x + (sx ? 0 : begin), sx, y + (sy ? 0 : begin), sy,
                  z + begin, end - begin);
      });
      return;
    }
    BroadcastRows rows(*shape, shapes);
    if (rows.inner() >= kMinBroadcastRow) {
      const int64_t inner = rows.inner();
      pool.ParallelFor(rows.rows(), std::max<int64_t>(1, kElementwiseGrain / inner),
                       [&](int64_t begin, int64_t end) {
                         rows.ForRows(begin, end, [&](int64_t r, std::span<const int64_t> o) {
                           SelectRun(c + o[0], rows.repeated(0), x + o[1], rows.repeated(1),
                                     y + o[2], rows.repeated(2), z + r * inner, inner);
                         });
                       });
      return;
    }
    pool.ParallelFor(out->size(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
      index.ForRange(begin, end, [&](int64_t i, std::span<const int64_t> o) {
        z[i] = c[o[0]] ? x[o[1]] : y[o[2]];
      });
    });
  });
  return handled ? absl::OkStatus() : UnsupportedType(context, a.dtype());
}

// ---- Clip ----

absl::Status Clip(KernelContext& context) {
  const Tensor& input = context.in(0);
  const Attributes attributes = context.attributes();
  const bool from_inputs = context.info().opset >= 11;
  for (int k : {1, 2}) {
    const Tensor* bound = context.input(k);
    if (from_inputs && bound != nullptr &&
        (bound->size() != 1 || bound->dtype() != input.dtype())) {
      return NodeError(context,
                       absl::StrCat(k == 1 ? "min" : "max", " must be a scalar of ",
                                    DTypeName(input.dtype()), ", got ", bound->TypeString()));
    }
  }
  absl::Status status;
  const bool handled = Dispatch<AMPC_FLOAT_TYPES, AMPC_INT_TYPES>(input.dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    C lo = std::numeric_limits<C>::lowest(), hi = std::numeric_limits<C>::max();
    if (from_inputs) {
      if (const Tensor* t = context.input(1)) lo = Compute<T>::Load(t->data<T>()[0]);
      if (const Tensor* t = context.input(2)) hi = Compute<T>::Load(t->data<T>()[0]);
    } else {
      lo = static_cast<C>(attributes.Float("min", std::numeric_limits<float>::lowest()));
      hi = static_cast<C>(attributes.Float("max", std::numeric_limits<float>::max()));
    }
    // min > max gives max everywhere, as numpy.clip does.
    status = UnaryMap<T, T>(context, input, [lo, hi](C x) -> C {
      return x < lo ? std::min(lo, hi) : (x > hi ? hi : x);
    });
  });
  return handled ? status : UnsupportedType(context, input.dtype());
}

// ---- Max, Min, Sum, Mean: variadic, broadcasting, folded in the compute type ----

// VariadicFold's elements [begin, end) of FP16/BF16 inputs without broadcasting but for single
// values: a block at a time, widened with the bulk conversions, folded in float, rounded once.
template <typename T, typename Fold, typename Finish>
void FoldBlocks(const std::vector<const T*>& data, const BroadcastIndex& index, int64_t begin,
                int64_t end, Fold fold, Finish finish, T* y) {
  float acc[kElementwiseBlock], in[kElementwiseBlock];
  const auto load = [&](size_t k, int64_t i, int64_t m, float* to) {
    if (index.single(static_cast<int>(k))) {
      std::fill(to, to + m, Compute<T>::Load(data[k][0]));
    } else {
      WidenToAcc(data[k] + i, m, to);
    }
  };
  for (int64_t i = begin; i < end; i += kElementwiseBlock) {
    const int64_t m = std::min(kElementwiseBlock, end - i);
    load(0, i, m, acc);
    for (size_t k = 1; k < data.size(); ++k) {
      load(k, i, m, in);
      for (int64_t j = 0; j < m; ++j) acc[j] = fold(acc[j], in[j]);
    }
    for (int64_t j = 0; j < m; ++j) acc[j] = finish(acc[j]);
    NarrowFromAcc(acc, m, y + i);
  }
}

template <typename T, typename Fold, typename Finish>
absl::Status VariadicFold(KernelContext& context, Fold fold, Finish finish) {
  using C = typename Compute<T>::type;
  const int n = context.num_inputs();
  std::vector<const Shape*> shapes;
  std::vector<const T*> data;
  for (int k = 0; k < n; ++k) {
    const Tensor* t = context.input(k);
    if (t == nullptr) return NodeError(context, absl::StrCat("input ", k, " is missing"));
    if (t->dtype() != context.in(0).dtype()) {
      return NodeError(context, absl::StrCat("input ", k, " is ", DTypeName(t->dtype()),
                                             ", input 0 is ", DTypeName(context.in(0).dtype())));
    }
    shapes.push_back(&t->shape());
    data.push_back(t->data<T>());
  }
  if (n == 0) return NodeError(context, "needs at least one input");
  std::optional<Shape> shape = BroadcastShapes(shapes);
  if (!shape.has_value()) {
    std::string list;
    for (const Shape* s : shapes) absl::StrAppend(&list, list.empty() ? "" : ", ", ShapeString(*s));
    return NodeError(context, absl::StrCat("shapes ", list, " do not broadcast"));
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, *shape));
  T* y = out->data<T>();
  BroadcastIndex index(*shape, shapes);
  CpuOf(context.backend())
      .pool()
      .ParallelFor(out->size(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
        if constexpr (kLowFloat<T>) {
          if (index.trivial()) return FoldBlocks<T>(data, index, begin, end, fold, finish, y);
        }
        if (index.trivial()) {
          for (int64_t i = begin; i < end; ++i) {
            C acc = Compute<T>::Load(data[0][index.single(0) ? 0 : i]);
            for (int k = 1; k < n; ++k)
              acc = fold(acc, Compute<T>::Load(data[k][index.single(k) ? 0 : i]));
            y[i] = Compute<T>::Store(finish(acc));
          }
          return;
        }
        index.ForRange(begin, end, [&](int64_t i, std::span<const int64_t> o) {
          C acc = Compute<T>::Load(data[0][o[0]]);
          for (int k = 1; k < n; ++k) acc = fold(acc, Compute<T>::Load(data[k][o[k]]));
          y[i] = Compute<T>::Store(finish(acc));
        });
      });
  return absl::OkStatus();
}

enum class FoldKind { kMax, kMin, kSum, kMean };

template <FoldKind kKind, DType... Ds>
absl::Status Variadic(KernelContext& context) {
  absl::Status status;
  const int n = context.num_inputs();
  const bool handled = Dispatch<Ds...>(context.in(0).dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    auto keep = [](C a) { return a; };
    if constexpr (kKind == FoldKind::kMax || kKind == FoldKind::kMin) {
      // NaN propagates, as in numpy.maximum/minimum.
      status = VariadicFold<T>(
          context,
          [](C a, C b) -> C {
            if constexpr (std::is_floating_point_v<C>) {
              if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
            }
            return kKind == FoldKind::kMax ? std::max(a, b) : std::min(a, b);
          },
          keep);
    } else if constexpr (kKind == FoldKind::kSum) {
      status = VariadicFold<T>(
          context, [](C a, C b) -> C { return a + b; }, keep);
    } else {
      status = VariadicFold<T>(
          context, [](C a, C b) -> C { return a + b; },
          [n](C a) -> C { return a / static_cast<C>(n); });
    }
  });
  return handled ? status : UnsupportedType(context, context.in(0).dtype());
}

// ---- Mod, PRelu ----

template <typename C>
C IntegerRemainder(C a, C b) {
  if (b == 0) return C{0};  // undefined in ONNX; 0 instead of a crash
  if constexpr (std::is_signed_v<C>) {
    if (b == C{-1}) return C{0};  // avoids the overflow of lowest() % -1
  }
  return static_cast<C>(a % b);
}

absl::Status Mod(KernelContext& context) {
  const bool fmod = context.attributes().Int("fmod", 0) != 0;
  absl::Status status;
  const bool handled =
      Dispatch<AMPC_FLOAT_TYPES, AMPC_INT_TYPES>(context.in(0).dtype(), [&]<typename T>() {
        using C = typename Compute<T>::type;
        status = BinaryMap<T, T>(context, context.in(0), context.in(1), [=](C a, C b) -> C {
          C r;
          if constexpr (std::is_floating_point_v<C>) {
            r = std::fmod(a, b);
          } else {
            r = IntegerRemainder(a, b);
          }
          // fmod=0: the remainder takes the divisor's sign (Python, numpy.mod).
          if constexpr (std::is_signed_v<C> || std::is_floating_point_v<C>) {
            if (!fmod && r != C{0} && ((r < C{0}) != (b < C{0}))) r = static_cast<C>(r + b);
          }
          return r;
        });
      });
  return handled ? status : UnsupportedType(context, context.in(0).dtype());
}

absl::Status PRelu(KernelContext& context) {
  const Tensor& x = context.in(0);
  Tensor slope = context.in(1);
  // Before opset 7 a slope of [C] is per channel (axis 1), as in PyTorch, not numpy-broadcast.
  if (context.info().opset < 7 && slope.rank() == 1 && x.rank() >= 2 && slope.dim(0) == x.dim(1) &&
      slope.dim(0) != 1) {
    Shape per_channel(x.rank() - 1, 1);
    per_channel[0] = slope.dim(0);
    slope = slope.Reshaped(per_channel);
  }
  std::optional<Shape> shape = BroadcastShapes(x.shape(), slope.shape());
  if (!shape.has_value() || *shape != x.shape()) {
    return NodeError(context, absl::StrCat("slope ", ShapeString(slope.shape()),
                                           " does not broadcast to X ", ShapeString(x.shape())));
  }
  absl::Status status;
  const bool handled =
      Dispatch<AMPC_FLOAT_TYPES, DType::kInt32, DType::kInt64, DType::kUint32, DType::kUint64>(
          x.dtype(), [&]<typename T>() {
            using C = typename Compute<T>::type;
            status = BinaryMap<T, T>(context, x, slope, [](C a, C s) -> C {
              if constexpr (std::is_unsigned_v<C>) {
                return a;  // never negative
              } else {
                return a < C{0} ? static_cast<C>(a * s) : a;
              }
            });
          });
  return handled ? status : UnsupportedType(context, x.dtype());
}

// ---- Shrink, Mish ----

absl::Status Shrink(KernelContext& context) {
  const float lambd = context.attributes().Float("lambd", 0.5f);
  const float bias = context.attributes().Float("bias", 0.0f);
  absl::Status status;
  const bool handled =
      Dispatch<AMPC_FLOAT_TYPES, AMPC_INT_TYPES>(context.in(0).dtype(), [&]<typename T>() {
        using C = typename Compute<T>::type;
        // Integers compare and add in double, then convert back.
        using W = std::conditional_t<std::is_floating_point_v<C>, C, double>;
        const W l = static_cast<W>(lambd), b = static_cast<W>(bias);
        status = UnaryMap<T, T>(context, context.in(0), [l, b](C c) -> C {
          const W x = static_cast<W>(c);
          return static_cast<C>(x < -l ? x + b : (x > l ? x - b : W{0}));
        });
      });
  return handled ? status : UnsupportedType(context, context.in(0).dtype());
}

absl::Status Mish(KernelContext& context) {
  absl::Status status;
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(context.in(0).dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    status = UnaryMap<T, T>(context, context.in(0), [](C x) -> C {
      const C softplus = std::log1p(std::exp(-std::abs(x))) + std::max(x, C{0});
      return x * std::tanh(softplus);
    });
  });
  return handled ? status : UnsupportedType(context, context.in(0).dtype());
}

// ---- Det: LU with partial pivoting per matrix, in float (double for FP64) ----

template <typename C>
C Determinant(std::vector<C>& a, int64_t n) {
  C det = C{1};
  for (int64_t k = 0; k < n; ++k) {
    int64_t pivot = k;
    for (int64_t r = k + 1; r < n; ++r) {
      if (std::abs(a[r * n + k]) > std::abs(a[pivot * n + k])) pivot = r;
    }
    if (a[pivot * n + k] == C{0}) return C{0};
    if (pivot != k) {
      for (int64_t c = 0; c < n; ++c) std::swap(a[k * n + c], a[pivot * n + c]);
      det = -det;
    }
    const C p = a[k * n + k];
    det *= p;
    for (int64_t r = k + 1; r < n; ++r) {
      const C f = a[r * n + k] / p;
      for (int64_t c = k + 1; c < n; ++c) a[r * n + c] -= f * a[k * n + c];
    }
  }
  return det;
}

absl::Status Det(KernelContext& context) {
  const Tensor& x = context.in(0);
  if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2)) {
    return NodeError(context,
                     absl::StrCat("input must be [*, M, M], got ", ShapeString(x.shape())));
  }
  const int64_t n = x.dim(x.rank() - 1);
  Shape shape(x.shape().begin(), x.shape().end() - 2);
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, shape));
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(x.dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    const T* in = x.data<T>();
    T* y = out->data<T>();
    CpuOf(context.backend()).pool().ParallelFor(out->size(), 1, [&](int64_t begin, int64_t end) {
      std::vector<C> a(static_cast<size_t>(n * n));
      for (int64_t b = begin; b < end; ++b) {
        for (int64_t i = 0; i < n * n; ++i) a[i] = Compute<T>::Load(in[b * n * n + i]);
        y[b] = Compute<T>::Store(Determinant(a, n));
      }
    });
  });
  return handled ? absl::OkStatus() : UnsupportedType(context, x.dtype());
}

}  // namespace

void RegisterMathKernels(KernelRegistry& r) {
  const std::vector<DType> all = {AMPC_ALL_TYPES};
  const std::vector<DType> numeric = {AMPC_FLOAT_TYPES, AMPC_INT_TYPES};
  const std::vector<DType> floats = {AMPC_FLOAT_TYPES};
  const std::vector<DType> castable = {AMPC_ALL_TYPES, AMPC_LOW_BIT_TYPES};
  r.Register(KernelDef{"", "Cast", "cpu", {{0, castable}}, CreateCast});
  r.Register("cpu", "", "CastLike", {{0, castable}, {1, castable}}, CastLike);
  r.Register("cpu", "", "Where", {{0, {DType::kBool}}, {1, all}, {2, all}}, Where);
  r.Register("cpu", "Clip", numeric, Clip);
  r.Register("cpu", "Max", numeric, Variadic<FoldKind::kMax, AMPC_FLOAT_TYPES, AMPC_INT_TYPES>);
  r.Register("cpu", "Min", numeric, Variadic<FoldKind::kMin, AMPC_FLOAT_TYPES, AMPC_INT_TYPES>);
  r.Register("cpu", "Sum", numeric, Variadic<FoldKind::kSum, AMPC_FLOAT_TYPES, AMPC_INT_TYPES>);
  r.Register("cpu", "Mean", floats, Variadic<FoldKind::kMean, AMPC_FLOAT_TYPES>);
  r.Register("cpu", "Mod", numeric, Mod);
  r.Register("cpu", "PRelu",
             {AMPC_FLOAT_TYPES, DType::kInt32, DType::kInt64, DType::kUint32, DType::kUint64},
             PRelu);
  r.Register("cpu", "Shrink", numeric, Shrink);
  r.Register("cpu", "Mish", floats, Mish);
  r.Register("cpu", "Det", floats, Det);
}

}  // namespace ampc
