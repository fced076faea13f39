// IEEE binary16 (FP16) and bfloat16 on the CPU: the storage types and scalar conversions of
// float16.h (the copy the CUDA kernels compile too) and bulk conversions over spans, with vector
// instructions where the CPU has them (half.cc).
#ifndef AMPC_KERNELS_NUMERICS_HALF_H_
#define AMPC_KERNELS_NUMERICS_HALF_H_

#include <cstdint>
#include <span>

#include "kernels/numerics/float16.h"

namespace ampc {

// Bulk conversions, bit for bit the scalar ones of float16.h (with convert_floats.h's AVX-512 or
// AVX2 + F16C loops where the CPU has them); `out` must hold at least `in.size()` elements.
void HalfToFloat(std::span<const uint16_t> in, std::span<float> out);
void FloatToHalf(std::span<const float> in, std::span<uint16_t> out);
void BFloat16ToFloat(std::span<const uint16_t> in, std::span<float> out);
void FloatToBFloat16(std::span<const float> in, std::span<uint16_t> out);

// The same over arrays of the storage types.
inline std::span<const uint16_t> Bits(std::span<const Half> v) {
  return {reinterpret_cast<const uint16_t*>(v.data()), v.size()};
}
inline std::span<const uint16_t> Bits(std::span<const BFloat16> v) {
  return {reinterpret_cast<const uint16_t*>(v.data()), v.size()};
}
inline void HalfToFloat(std::span<const Half> in, std::span<float> out) {
  HalfToFloat(Bits(in), out);
}
inline void FloatToHalf(std::span<const float> in, std::span<Half> out) {
  FloatToHalf(in, std::span<uint16_t>(reinterpret_cast<uint16_t*>(out.data()), out.size()));
}
inline void BFloat16ToFloat(std::span<const BFloat16> in, std::span<float> out) {
  BFloat16ToFloat(Bits(in), out);
}
inline void FloatToBFloat16(std::span<const float> in, std::span<BFloat16> out) {
  FloatToBFloat16(in, std::span<uint16_t>(reinterpret_cast<uint16_t*>(out.data()), out.size()));
}

}  // namespace ampc

#endif  // AMPC_KERNELS_NUMERICS_HALF_H_
