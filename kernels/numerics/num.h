// Storage and compute types of the CUDA elementwise kernels: F16/BF16 are float16.h's Half and
// BFloat16 (one storage type and one conversion for both backends), and Num<T> is
// runtime/core/dtype.h's Compute<T>: FP16/BF16 load exactly to float and store rounded once;
// float/double arithmetic is rounded.h's, once per operation on the device as on the host.
// __host__ __device__ so host tests check the kernels' math against the CPU's. Plain C++17, no
// CUDA headers.
#ifndef AMPC_KERNELS_NUMERICS_NUM_H_
#define AMPC_KERNELS_NUMERICS_NUM_H_

#include <cstdint>
#include <type_traits>

#include "kernels/numerics/float16.h"
#include "kernels/numerics/host_device.h"
#include "kernels/numerics/rounded.h"

namespace ampc::cuda {

using F16 = Half;
using BF16 = BFloat16;

using rounded::Add;
using rounded::Divide;
using rounded::Multiply;
using rounded::Subtract;

// ---- Storage type -> compute type (runtime/core/dtype.h's Compute<T>) ----

template <typename T>
struct Num {
  using type = T;
  AMPC_HD static T Load(T v) { return v; }
  AMPC_HD static T Store(T v) { return v; }
};
template <>
struct Num<F16> : Float16Compute<F16> {};
template <>
struct Num<BF16> : Float16Compute<BF16> {};

template <typename T>
inline constexpr bool kIsFloat = std::is_same_v<T, float> || std::is_same_v<T, double>;
template <typename T>
inline constexpr bool kIsInteger = std::is_integral_v<T> && !std::is_same_v<T, bool>;

template <typename T>
AMPC_HD inline bool IsNan(T x) {
  return x != x;
}

}  // namespace ampc::cuda

#endif  // AMPC_KERNELS_NUMERICS_NUM_H_
