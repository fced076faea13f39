// The CUDA elementwise math (kernels/cuda/elementwise_math.h) run on the host against the CPU
// backend: Num<T>'s FP16/BF16 loads and stores against kernels/numerics/half.h, Cast
// (kernels/numerics/cast_math.h, as the CUDA kernels apply it) against the CPU's Cast kernel for
// every pair of types, and every binary and unary op against the CPU kernel, run through a Session
// on the same inputs (special values crossed with each other, then random ones). Bits must be
// equal (any NaN for a NaN); Exp, Log, Tanh, Erf, Sigmoid and float Pow, evaluated in double,
// may be two ulp off glibc's float functions (which are the less accurate: see elementwise_math.h).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/elementwise_math.h"
#include "kernels/numerics/cast_math.h"
#include "kernels/numerics/half.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/session.h"
#include "tests/support/model_text.h"

namespace ampc::cuda {
namespace {

template <typename T>
struct TypeInfo;
#define AMPC_TYPE_INFO(T, DTYPE, NAME)            \
  template <>                                     \
  struct TypeInfo<T> {                            \
    static constexpr DType kDType = DType::DTYPE; \
    static constexpr const char* kName = NAME;    \
  }
AMPC_TYPE_INFO(float, kFloat, "float");
AMPC_TYPE_INFO(F16, kFloat16, "float16");
AMPC_TYPE_INFO(BF16, kBFloat16, "bfloat16");
AMPC_TYPE_INFO(double, kDouble, "double");
AMPC_TYPE_INFO(int8_t, kInt8, "int8");
AMPC_TYPE_INFO(uint8_t, kUint8, "uint8");
AMPC_TYPE_INFO(int32_t, kInt32, "int32");
AMPC_TYPE_INFO(int64_t, kInt64, "int64");
AMPC_TYPE_INFO(bool, kBool, "bool");
#undef AMPC_TYPE_INFO

// Values are kept as their storage bytes (bool as one byte: std::vector<bool> packs bits).
template <typename T>
using Cell = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
template <typename T>
using Column = std::vector<Cell<T>>;

template <typename T>
T FromBits(uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));  // little-endian: the low bytes
  return value;
}

template <typename T>
Column<T> Specials() {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    using L = std::numeric_limits<T>;
    Column<T> v = {
        T(0),           -T(0),      T(1),        T(-1),         T(0.5),          T(-1.5),
        T(2.5),         T(-2.5),    T(0.1),      T(7),          T(255.5),        T(256),
        T(-129),        T(65504),   T(65520),    T(16777217),   T(0x1p31),       T(-0x1p31),
        T(0x1p63),      T(-0x1p63), T(0x1p64),   T(1e30),       L::denorm_min(), -L::denorm_min(),
        L::min(),       L::max(),   L::lowest(), L::infinity(), -L::infinity(),  L::quiet_NaN(),
        -L::quiet_NaN()};
    if constexpr (std::is_same_v<T, float>) {
      v.push_back(FromBits<float>(0x7fc12345u));  // a NaN with a payload
      v.push_back(FromBits<float>(0x7f800001u));  // signalling
    } else {
      v.push_back(1.0 + 0x1p-11 + 0x1p-40);  // rounds differently through float
      v.push_back(9007199254740993.0);
      v.push_back(FromBits<double>(0x7ff8000012345678u));
      v.push_back(FromBits<double>(0x7ff0000000000001u));  // signalling
    }
    return v;
  } else if constexpr (std::is_same_v<T, F16> || std::is_same_v<T, BF16>) {
    Column<T> v;
    for (float f : Specials<float>()) {
      v.push_back(T{std::is_same_v<T, F16> ? FloatToHalf(f) : FloatToBFloat16(f)});
    }
    for (uint16_t bits : {0x0001, 0x8001, 0x7d01, 0xff81, 0x3c01, 0x0400}) v.push_back(T{bits});
    return v;
  } else if constexpr (std::is_same_v<T, bool>) {
    return {0, 1};
  } else {
    using L = std::numeric_limits<T>;
    Column<T> v = {L::min(), static_cast<T>(L::min() + 1), T(0),    T(1), T(2),
                   T(7),     static_cast<T>(L::max() - 1), L::max()};
    if constexpr (std::is_signed_v<T>) {
      for (T x : {T(-1), T(-2), T(-7)}) v.push_back(x);
    }
    if constexpr (sizeof(T) >= 4) {
      for (int64_t x : {int64_t{16777217}, int64_t{-16777217}, int64_t{65536}}) {
        v.push_back(static_cast<T>(x));
      }
    }
    if constexpr (sizeof(T) == 8) {
      for (int64_t x : {int64_t{9007199254740993}, int64_t{-9007199254740993}}) v.push_back(x);
    }
    return v;
  }
}

template <typename T>
Cell<T> Random(std::mt19937_64& rng) {
  if constexpr (std::is_same_v<T, bool>) {
    return static_cast<uint8_t>(rng() % 2);
  } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (rng() % 2 == 0) return FromBits<T>(rng());
    const T x = std::uniform_real_distribution<T>(-100, 100)(rng);
    return rng() % 4 == 0 ? static_cast<T>(static_cast<int>(x)) : x;
  } else if constexpr (std::is_same_v<T, F16> || std::is_same_v<T, BF16>) {
    if (rng() % 2 == 0) return T{static_cast<uint16_t>(rng())};
    const float x = std::uniform_real_distribution<float>(-100, 100)(rng);
    return T{std::is_same_v<T, F16> ? FloatToHalf(x) : FloatToBFloat16(x)};
  } else {
    if (rng() % 2 == 0) return FromBits<T>(rng());
    return static_cast<T>(static_cast<int64_t>(rng() % 21) - 10);
  }
}

template <typename T>
bool IsNanValue(Cell<T> v) {
  if constexpr (std::is_same_v<T, F16>) return (v.bits & 0x7fff) > 0x7c00;
  if constexpr (std::is_same_v<T, BF16>) return (v.bits & 0x7fff) > 0x7f80;
  if constexpr (kIsFloat<T>) return v != v;
  return false;
}

// Equal bits (any NaN for a NaN), or within `max_ulps` units in the last place of a float type.
template <typename T>
bool Close(Cell<T> a, Cell<T> b, int64_t max_ulps) {
  if (std::memcmp(&a, &b, sizeof(a)) == 0 || (IsNanValue<T>(a) && IsNanValue<T>(b))) return true;
  if (max_ulps == 0 || IsNanValue<T>(a) || IsNanValue<T>(b)) return false;
  if constexpr (kIsFloat<T> || kIsHalfLike<T>) {
    using Bits = std::conditional_t<sizeof(T) == 8, int64_t,
                                    std::conditional_t<sizeof(T) == 4, int32_t, int16_t>>;
    auto ordered = [](Cell<T> v) {  // bit patterns in value order (both zeros at 0)
      Bits bits;
      std::memcpy(&bits, &v, sizeof(bits));
      return bits < 0 ? -static_cast<int64_t>(bits & std::numeric_limits<Bits>::max())
                      : static_cast<int64_t>(bits);
    };
    const int64_t d = ordered(a) - ordered(b);
    return (d < 0 ? -d : d) <= max_ulps;
  }
  return false;
}

template <typename T>
std::string Show(Cell<T> v) {
  std::ostringstream os;
  if constexpr (kIsHalfLike<T>) {
    os << Num<T>::Load(v) << " (0x" << std::hex << v.bits << ")";
  } else if constexpr (kIsFloat<T>) {
    os.precision(17);
    os << v;
  } else {
    os << static_cast<int64_t>(v);
  }
  return os.str();
}

template <typename T>
Tensor MakeTensor(const Column<T>& values) {
  Tensor t = Tensor::Host(TypeInfo<T>::kDType, {static_cast<int64_t>(values.size())});
  std::memcpy(t.raw(), values.data(), values.size() * sizeof(Cell<T>));
  return t;
}

// ONNX text's type names: numpy's (DTypeName) except for float32 and float64.
std::string OnnxName(DType dtype) {
  if (dtype == DType::kFloat) return "float";
  if (dtype == DType::kDouble) return "double";
  return DTypeName(dtype);
}

// Runs `y = op<attributes>(x0, x1, ...)` on the CPU backend over 1-D inputs of one length.
template <typename Out>
Column<Out> RunCpu(const std::string& op, const std::string& attributes,
                   const std::vector<Tensor>& inputs) {
  static CpuBackend backend(2);
  const std::string n = std::to_string(inputs[0].size());
  std::string signature, arguments;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::string sep = k == 0 ? "" : ", ";
    signature += sep + OnnxName(inputs[k].dtype()) + "[" + n + "] x" + std::to_string(k);
    arguments += sep + "x" + std::to_string(k);
  }
  const std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\ng (" + signature +
                           ") => (" + TypeInfo<Out>::kName + "[" + n + "] y) { y = " + op +
                           attributes + "(" + arguments + ") }\n";
  auto session = Session::Create(testing::ParseModelText(text), DefaultRegistry(), backend);
  EXPECT_TRUE(session.ok()) << session.status() << "\n" << text;
  if (!session.ok()) return {};
  auto outputs = (*session)->Run(inputs);
  EXPECT_TRUE(outputs.ok()) << outputs.status() << "\n" << text;
  if (!outputs.ok()) return {};
  const Tensor& y = (*outputs)[0];
  Column<Out> result(static_cast<size_t>(y.size()));
  std::memcpy(result.data(), y.raw(), result.size() * sizeof(Cell<Out>));
  return result;
}

template <typename T>
T Value(Cell<T> cell) {
  return static_cast<T>(cell);
}

// Op applied as the CUDA kernels apply it: load, compute, round once.
template <typename Op, typename A, typename B, typename Out>
void ExpectBinaryMatchesCpu(const std::string& op, const std::string& attributes = "",
                            int64_t max_ulps = 0) {
  SCOPED_TRACE(op + attributes + " " + TypeInfo<A>::kName + ", " + TypeInfo<B>::kName);
  Column<A> a;
  Column<B> b;
  for (Cell<A> x : Specials<A>()) {
    for (Cell<B> y : Specials<B>()) {
      a.push_back(x);
      b.push_back(y);
    }
  }
  std::mt19937_64 rng(42);
  for (int i = 0; i < 2000; ++i) {
    a.push_back(Random<A>(rng));
    b.push_back(Random<B>(rng));
  }
  const Column<Out> cpu = RunCpu<Out>(op, attributes, {MakeTensor<A>(a), MakeTensor<B>(b)});
  ASSERT_EQ(cpu.size(), a.size());
  int failures = 0;
  for (size_t i = 0; i < a.size() && failures < 10; ++i) {
    const Cell<Out> ours = static_cast<Cell<Out>>(
        Num<Out>::Store(Op{}(Num<A>::Load(Value<A>(a[i])), Num<B>::Load(Value<B>(b[i])))));
    if (!Close<Out>(ours, cpu[i], max_ulps)) {
      ++failures;
      ADD_FAILURE() << "at (" << Show<A>(a[i]) << ", " << Show<B>(b[i]) << "): ours "
                    << Show<Out>(ours) << ", cpu " << Show<Out>(cpu[i]);
    }
  }
}

template <typename Op, typename In, typename Out = In>
void ExpectUnaryMatchesCpu(const std::string& op, Op fn = {}, const std::string& attributes = "",
                           int64_t max_ulps = 0) {
  SCOPED_TRACE(op + attributes + " " + TypeInfo<In>::kName);
  Column<In> x = Specials<In>();
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) x.push_back(Random<In>(rng));
  const Column<Out> cpu = RunCpu<Out>(op, attributes, {MakeTensor<In>(x)});
  ASSERT_EQ(cpu.size(), x.size());
  int failures = 0;
  for (size_t i = 0; i < x.size() && failures < 10; ++i) {
    const Cell<Out> ours =
        static_cast<Cell<Out>>(Num<Out>::Store(fn(Num<In>::Load(Value<In>(x[i])))));
    if (!Close<Out>(ours, cpu[i], max_ulps)) {
      ++failures;
      ADD_FAILURE() << "at " << Show<In>(x[i]) << ": ours " << Show<Out>(ours) << ", cpu "
                    << Show<Out>(cpu[i]);
    }
  }
}

template <typename... Ts, typename Fn>
void ForTypes(Fn&& fn) {
  (fn(static_cast<Ts*>(nullptr)), ...);
}
#define AMPC_NUMERIC float, F16, BF16, double, int8_t, uint8_t, int32_t, int64_t
#define AMPC_FLOATS float, F16, BF16, double

// The CUDA kernels' storage types are the CPU's (one conversion for both backends).
static_assert(std::is_same_v<F16, Half> && std::is_same_v<BF16, BFloat16>);

TEST(CudaElementwiseMathTest, HalfAndBFloat16LoadEqualsHalfH) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    ASSERT_EQ(BitCast<uint32_t>(Num<F16>::Load(F16{h})), BitCast<uint32_t>(ampc::HalfToFloat(h)));
    ASSERT_EQ(BitCast<uint32_t>(Num<BF16>::Load(BF16{h})),
              BitCast<uint32_t>(ampc::BFloat16ToFloat(h)));
  }
}

TEST(CudaElementwiseMathTest, HalfAndBFloat16StoreEqualsHalfH) {
  // Every 251st float pattern (both signs, every exponent, NaNs) plus the specials.
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 251) {
    const float f = BitCast<float>(static_cast<uint32_t>(bits));
    ASSERT_EQ(Num<F16>::Store(f).bits, ampc::FloatToHalf(f)) << std::hex << bits;
    ASSERT_EQ(Num<BF16>::Store(f).bits, ampc::FloatToBFloat16(f)) << std::hex << bits;
  }
  for (float f : Specials<float>()) {
    EXPECT_EQ(Num<F16>::Store(f).bits, ampc::FloatToHalf(f)) << f;
    EXPECT_EQ(Num<BF16>::Store(f).bits, ampc::FloatToBFloat16(f)) << f;
  }
}

// ConvertElement element by element, as the CUDA Cast kernel applies it, against the CPU's Cast
// kernel through a Session.
template <typename From, typename To>
void ExpectCastMatchesCpu() {
  SCOPED_TRACE(std::string(TypeInfo<From>::kName) + " -> " + TypeInfo<To>::kName);
  Column<From> values = Specials<From>();
  std::mt19937_64 rng(3);
  for (int i = 0; i < 5000; ++i) values.push_back(Random<From>(rng));
  const Column<To> cpu =
      RunCpu<To>("Cast", "<to = " + std::to_string(static_cast<int>(TypeInfo<To>::kDType)) + ">",
                 {MakeTensor<From>(values)});
  ASSERT_EQ(cpu.size(), values.size());
  int failures = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const Cell<To> ours = static_cast<Cell<To>>(ConvertElement<From, To>(Value<From>(values[i])));
    if (std::memcmp(&ours, &cpu[i], sizeof(Cell<To>)) != 0 && failures++ < 10) {
      ADD_FAILURE() << "of " << Show<From>(values[i]) << ": ours " << Show<To>(ours) << ", cpu "
                    << Show<To>(cpu[i]);
    }
  }
}

TEST(CudaElementwiseMathTest, CastEqualsTheCpuCastKernelForEveryTypePair) {
  ForTypes<AMPC_NUMERIC, bool>([](auto* from) {
    using From = std::remove_pointer_t<decltype(from)>;
    ForTypes<AMPC_NUMERIC, bool>([](auto* to) {
      using To = std::remove_pointer_t<decltype(to)>;
      ExpectCastMatchesCpu<From, To>();
    });
  });
}

TEST(CudaElementwiseMathTest, ArithmeticEqualsCpu) {
  ForTypes<AMPC_NUMERIC>([](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    ExpectBinaryMatchesCpu<AddOp, T, T, T>("Add");
    ExpectBinaryMatchesCpu<SubOp, T, T, T>("Sub");
    ExpectBinaryMatchesCpu<MulOp, T, T, T>("Mul");
    ExpectBinaryMatchesCpu<DivOp, T, T, T>("Div");
    ExpectBinaryMatchesCpu<MaxOp, T, T, T>("Max");
    ExpectBinaryMatchesCpu<MinOp, T, T, T>("Min");
    ExpectBinaryMatchesCpu<ModOp<false>, T, T, T>("Mod");
    ExpectBinaryMatchesCpu<ModOp<true>, T, T, T>("Mod", "<fmod = 1>");
  });
}

TEST(CudaElementwiseMathTest, ComparisonsAndLogicEqualCpu) {
  ForTypes<AMPC_NUMERIC>([](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    ExpectBinaryMatchesCpu<EqualOp, T, T, bool>("Equal");
    ExpectBinaryMatchesCpu<LessOp, T, T, bool>("Less");
    ExpectBinaryMatchesCpu<LessOrEqualOp, T, T, bool>("LessOrEqual");
    ExpectBinaryMatchesCpu<GreaterOp, T, T, bool>("Greater");
    ExpectBinaryMatchesCpu<GreaterOrEqualOp, T, T, bool>("GreaterOrEqual");
  });
  ExpectBinaryMatchesCpu<EqualOp, bool, bool, bool>("Equal");
  ExpectBinaryMatchesCpu<AndOp, bool, bool, bool>("And");
  ExpectBinaryMatchesCpu<OrOp, bool, bool, bool>("Or");
  ExpectBinaryMatchesCpu<XorOp, bool, bool, bool>("Xor");
}

TEST(CudaElementwiseMathTest, PowEqualsCpuExactlyForIntegerBasesAndWithinTwoUlpForFloats) {
  ForTypes<float, F16, BF16, double, int32_t, int64_t>([](auto* base) {
    using T = std::remove_pointer_t<decltype(base)>;
    ForTypes<AMPC_NUMERIC>([](auto* exponent) {
      using E = std::remove_pointer_t<decltype(exponent)>;
      ExpectBinaryMatchesCpu<PowOp, T, E, T>("Pow", "", kIsInteger<T> ? 0 : 2);
    });
  });
}

// Integer Pow against exact 128-bit arithmetic rounded once to double (and against glibc's pow
// where the power is exact in double, so any pow within an ulp gives it), at the edges: zero and
// unit bases, negative exponents, overflow, powers past 2^53 and 2^63, double exponents.
__extension__ using Int128 = __int128;  // GCC's; the oracle needs no more than 2^127

Int128 ExactPower(int64_t a, int64_t b, bool* overflow) {
  Int128 result = 1;
  *overflow = false;
  for (int64_t k = 0; k < b && result != 0 && !*overflow; ++k) {
    result *= a;
    *overflow = result > (Int128{1} << 64) || -result > (Int128{1} << 64);
  }
  return result;
}

TEST(CudaElementwiseMathTest, IntegerPowIsTheExactPowerRoundedOnceAndTruncated) {
  const int64_t kMax = std::numeric_limits<int64_t>::max(),
                kMin = std::numeric_limits<int64_t>::min();
  const int64_t bases[] = {
      0, 1, -1, 2, -2, 3, -3, -9, 10, 46341, 3037000499, (int64_t{1} << 53) + 1, kMax, kMin};
  const int64_t exponents[] = {0, 1, 2, 3, 5, 17, 31, 32, 62, 63, 64, 65, -1, -2, -63, 1000};
  for (const int64_t a : bases) {
    for (const int64_t b : exponents) {
      double want;
      bool overflow = false;
      if (b < 0) {
        want = a == 0 ? INFINITY : (a == 1 || a == -1) ? ((b & 1) && a < 0 ? -1.0 : 1.0) : 0.0;
      } else {
        const Int128 exact = ExactPower(a, b, &overflow);
        want = overflow ? INFINITY : static_cast<double>(exact);
        if (!overflow && std::abs(want) <= 0x1p53) {
          EXPECT_EQ(std::pow(static_cast<double>(a), static_cast<double>(b)), want)
              << a << "^" << b;
        }
      }
      EXPECT_EQ(integer_pow::Pow(a, b), integer_pow::DoubleToIntegerX86<int64_t>(want))
          << a << "^" << b;
      EXPECT_EQ(integer_pow::Pow(a, static_cast<double>(b)),
                integer_pow::DoubleToIntegerX86<int64_t>(want))
          << a << "^" << b << " (a double exponent)";
      if (a == static_cast<int32_t>(a)) {
        EXPECT_EQ(integer_pow::Pow(static_cast<int32_t>(a), b),
                  integer_pow::DoubleToIntegerX86<int32_t>(want))
            << a << "^" << b << " (int32)";
      }
    }
  }
  // Exponents past int64 or not finite, and a fractional one (the math library's pow).
  EXPECT_EQ(integer_pow::Pow(int64_t{-1}, 0x1p70), 1);
  EXPECT_EQ(integer_pow::Pow(int64_t{-1}, INFINITY), 1);
  EXPECT_EQ(integer_pow::Pow(int64_t{2}, -INFINITY), 0);
  EXPECT_EQ(integer_pow::Pow(int64_t{0}, -0x1p70), kMin);
  EXPECT_EQ(integer_pow::Pow(int64_t{16}, 0.5), 4);
}

TEST(CudaElementwiseMathTest, SignedUnaryOpsEqualCpu) {
  ForTypes<AMPC_NUMERIC>([](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    ExpectUnaryMatchesCpu<NegOp, T>("Neg");
    ExpectUnaryMatchesCpu<AbsOp, T>("Abs");
    ExpectUnaryMatchesCpu<ReluOp, T>("Relu");
    ExpectUnaryMatchesCpu<SignOp, T>("Sign");
  });
}

TEST(CudaElementwiseMathTest, ExactFloatUnaryOpsEqualCpu) {
  ForTypes<AMPC_FLOATS>([](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    ExpectUnaryMatchesCpu<SqrtOp, T>("Sqrt");
    ExpectUnaryMatchesCpu<ReciprocalOp, T>("Reciprocal");
    ExpectUnaryMatchesCpu<FloorOp, T>("Floor");
    ExpectUnaryMatchesCpu<CeilOp, T>("Ceil");
    ExpectUnaryMatchesCpu<RoundOp, T>("Round");
    ExpectUnaryMatchesCpu<IsNanOp, T, bool>("IsNaN");
    for (bool positive : {false, true}) {
      for (bool negative : {false, true}) {
        ExpectUnaryMatchesCpu<IsInfOp, T, bool>(
            "IsInf", IsInfOp{positive, negative},
            "<detect_positive = " + std::to_string(positive) +
                ", detect_negative = " + std::to_string(negative) + ">");
      }
    }
  });
  ExpectUnaryMatchesCpu<NotOp, bool>("Not");
}

TEST(CudaElementwiseMathTest, TranscendentalOpsWithinTwoUlpOfCpu) {
  ForTypes<AMPC_FLOATS>([](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    ExpectUnaryMatchesCpu<ExpOp, T>("Exp", {}, "", 2);
    ExpectUnaryMatchesCpu<LogOp, T>("Log", {}, "", 2);
    ExpectUnaryMatchesCpu<TanhOp, T>("Tanh", {}, "", 2);
    ExpectUnaryMatchesCpu<ErfOp, T>("Erf", {}, "", 2);
    ExpectUnaryMatchesCpu<SigmoidOp, T>("Sigmoid", {}, "", 2);
  });
}

}  // namespace
}  // namespace ampc::cuda
