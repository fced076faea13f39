// The per-path loops behind convert_floats.h (internal to convert_floats*.cc).
#ifndef AMPC_KERNELS_NUMERICS_CONVERT_FLOATS_KERNELS_H_
#define AMPC_KERNELS_NUMERICS_CONVERT_FLOATS_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "kernels/numerics/convert_floats.h"

namespace ampc::convert_floats {

// Pointers to the raw (possibly unaligned) little-endian data: FP32 for narrowing, 16 bit else.
struct Kernels {
  void (*narrow_half)(const void* in, void* out, size_t n, bool clamp, ConversionStats& stats);
  void (*narrow_bfloat16)(const void* in, void* out, size_t n, ConversionStats& stats);
  void (*widen_half)(const void* in, void* out, size_t n);
  void (*widen_bfloat16)(const void* in, void* out, size_t n);
};

// The exact reference, element by element; the vector loops use it for their tails.
void NarrowHalfScalar(const void* in, void* out, size_t n, bool clamp, ConversionStats& stats);
void NarrowBFloat16Scalar(const void* in, void* out, size_t n, ConversionStats& stats);
void WidenHalfScalar(const void* in, void* out, size_t n);
void WidenBFloat16Scalar(const void* in, void* out, size_t n);

inline void Add(ConversionStats& to, const ConversionStats& from) {
  to.clamped += from.clamped;
  to.overflowed += from.overflowed;
  to.flushed_to_zero += from.flushed_to_zero;
}

// Null where the build or the CPU lacks the instructions.
const Kernels* Avx2F16cKernels();
const Kernels* Avx512Kernels();

}  // namespace ampc::convert_floats

#endif  // AMPC_KERNELS_NUMERICS_CONVERT_FLOATS_KERNELS_H_
