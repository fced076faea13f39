// Bulk conversions between a storage type and its compute type (FP16/BF16 <-> float through
// half.h's vector conversions, bit for bit the scalar Compute<T>::Load/Store), for the kernels
// that widen a block of values, compute in the wide type and round each result once.
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>

#include "kernels/numerics/half.h"
#include "runtime/core/dtype.h"

namespace ampc {

// FP16 or BF16: stored narrow, computed in float.
template <typename T>
inline constexpr bool kLowFloat = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// n values of T widened to the compute type (exactly), and back rounded once to nearest even.
template <typename T>
void WidenToAcc(const T* in, int64_t n, typename Compute<T>::type* out) {
  const size_t size = static_cast<size_t>(n);
  if constexpr (std::is_same_v<T, Half>) {
    HalfToFloat(std::span<const Half>(in, size), std::span<float>(out, size));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    BFloat16ToFloat(std::span<const BFloat16>(in, size), std::span<float>(out, size));
  } else {
    for (size_t i = 0; i < size; ++i) out[i] = Compute<T>::Load(in[i]);
  }
}

template <typename T>
void NarrowFromAcc(const typename Compute<T>::type* in, int64_t n, T* out) {
  const size_t size = static_cast<size_t>(n);
  if constexpr (std::is_same_v<T, Half>) {
    FloatToHalf(std::span<const float>(in, size), std::span<Half>(out, size));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    FloatToBFloat16(std::span<const float>(in, size), std::span<BFloat16>(out, size));
  } else {
    for (size_t i = 0; i < size; ++i) out[i] = Compute<T>::Store(in[i]);
  }
}

}  // namespace ampc
