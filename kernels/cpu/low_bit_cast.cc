#include "kernels/cpu/low_bit_cast.h"

#include <array>
#include <cstdint>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/numerics/cast_math.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

// Element i of packed codes of `bits` each (low bits first).
uint8_t CodeAt(const uint8_t* data, int64_t i, int bits) {
  if (bits == 8) return data[i];
  const int per_byte = 8 / bits;
  return static_cast<uint8_t>((data[i / per_byte] >> (bits * (i % per_byte))) & ((1 << bits) - 1));
}

// A value as float, rounded to odd when the source is wider (cast_math.h), so that the final
// rounding to the low-bit type is the only one.
template <typename From>
float ToFloatOdd(From v) {
  if constexpr (kIsHalfLike<From>) {
    return Compute<From>::Load(v);
  } else if constexpr (std::is_same_v<From, float>) {
    return v;
  } else if constexpr (std::is_same_v<From, double>) {
    return DoubleToFloatOdd(v);
  } else if constexpr (std::is_same_v<From, bool>) {
    return v ? 1.0f : 0.0f;
  } else {
    return IntegerToFloatOdd(v);
  }
}

// Writes out's codes, code_of(i) for element i, whole bytes at a time (no two threads share one;
// padding bits are zero).
template <typename CodeOf>
void WriteCodes(KernelContext& context, const Tensor& out, CodeOf code_of) {
  const int bits = DTypeBits(out.dtype());
  const int64_t per_byte = 8 / bits, n = out.size();
  uint8_t* y = out.data<uint8_t>();
  CpuOf(context.backend())
      .pool()
      .ParallelFor(static_cast<int64_t>(out.bytes()), kElementwiseGrain / per_byte,
                   [&](int64_t begin, int64_t end) {
                     for (int64_t b = begin; b < end; ++b) {
                       uint32_t byte = 0;
                       for (int64_t k = 0; k < per_byte && b * per_byte + k < n; ++k) {
                         byte |= uint32_t{code_of(b * per_byte + k)} << (k * bits);
                       }
                       y[b] = static_cast<uint8_t>(byte);
                     }
                   });
}

// The values of every code of a low-bit type.
std::array<float, 256> DecodeTable(DType dtype) {
  std::array<float, 256> table{};
  for (int c = 0; c < (1 << DTypeBits(dtype)); ++c) {
    table[c] = LowBitToFloat(dtype, static_cast<uint8_t>(c));
  }
  return table;
}

// Low-bit input to a type with a storage type.
bool CastFromLowBit(KernelContext& context, const Tensor& input, Tensor& out) {
  return Dispatch<AMPC_ALL_TYPES>(out.dtype(), [&]<typename To>() {
    const std::array<float, 256> table = DecodeTable(input.dtype());
    const int bits = DTypeBits(input.dtype());
    const uint8_t* x = input.data<uint8_t>();
    To* y = out.data<To>();
    CpuOf(context.backend())
        .pool()
        .ParallelFor(input.size(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            y[i] = ConvertElement<float, To>(table[CodeAt(x, i, bits)]);
          }
        });
  });
}

// An input with a storage type to a low-bit type; integers wrap into 2- and 4-bit integers.
bool CastToLowBit(KernelContext& context, const Tensor& input, const Tensor& out,
                  const LowBitRounding& rounding) {
  const DType to = out.dtype();
  return Dispatch<AMPC_ALL_TYPES>(input.dtype(), [&]<typename From>() {
    const From* x = input.data<From>();
    if constexpr (std::is_integral_v<From>) {
      if (IsSmallInt(to)) {
        const int bits = DTypeBits(to);
        WriteCodes(context, out,
                   [&](int64_t i) { return IntegerToSmallInt(static_cast<int64_t>(x[i]), bits); });
        return;
      }
    }
    WriteCodes(context, out,
               [&](int64_t i) { return FloatToLowBit(to, ToFloatOdd(x[i]), rounding); });
  });
}

// Low-bit to low-bit: through float (exact), or as integers between 2- and 4-bit integers.
void CastBetweenLowBit(KernelContext& context, const Tensor& input, const Tensor& out,
                       const LowBitRounding& rounding) {
  const DType from = input.dtype(), to = out.dtype();
  const int bits = DTypeBits(from);
  const uint8_t* x = input.data<uint8_t>();
  if (IsSmallInt(from) && IsSmallInt(to)) {
    WriteCodes(context, out, [&](int64_t i) {
      const int64_t v = SmallIntValue(CodeAt(x, i, bits), bits, IsSignedSmallInt(from));
      return IntegerToSmallInt(v, DTypeBits(to));
    });
    return;
  }
  const std::array<float, 256> table = DecodeTable(from);
  WriteCodes(context, out,
             [&](int64_t i) { return FloatToLowBit(to, table[CodeAt(x, i, bits)], rounding); });
}

}  // namespace

absl::Status CastLowBit(KernelContext& context, const Tensor& input, DType to,
                        const LowBitRounding& rounding) {
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, input.shape(), to));
  bool handled = true;
  if (IsLowBit(input.dtype()) && IsLowBit(to)) {
    CastBetweenLowBit(context, input, *out, rounding);
  } else if (IsLowBit(input.dtype())) {
    handled = CastFromLowBit(context, input, *out);
  } else {
    handled = CastToLowBit(context, input, *out, rounding);
  }
  if (!handled) {
    return NodeError(context, absl::StrCat("cast from ", DTypeName(input.dtype()), " to ",
                                           DTypeName(to), " is not supported"));
  }
  return absl::OkStatus();
}

}  // namespace ampc
