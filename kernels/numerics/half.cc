#include "kernels/numerics/half.h"

#include <cassert>
#include <cstddef>

#include "kernels/numerics/convert_floats_kernels.h"

namespace ampc {
namespace {

template <typename In, typename Out, typename Convert>
void ConvertAll(std::span<const In> in, std::span<Out> out, Convert convert) {
  assert(out.size() >= in.size());
  const size_t n = in.size();
  const In* src = in.data();
  Out* dst = out.data();
  for (size_t i = 0; i < n; ++i) dst[i] = convert(src[i]);
}

// convert_floats' vector loops (bit for bit the scalar conversions, tested over every FP32
// pattern): AVX-512 before AVX2 + F16C, null where the CPU has neither.
const convert_floats::Kernels* VectorKernels() {
  static const convert_floats::Kernels* kernels = [] {
    const convert_floats::Kernels* k = convert_floats::Avx512Kernels();
    return k != nullptr ? k : convert_floats::Avx2F16cKernels();
  }();
  return kernels;
}

}  // namespace

void HalfToFloat(std::span<const uint16_t> in, std::span<float> out) {
  assert(out.size() >= in.size());
  if (const convert_floats::Kernels* k = VectorKernels()) {
    return k->widen_half(in.data(), out.data(), in.size());
  }
  ConvertAll(in, out, [](uint16_t h) { return HalfToFloat(h); });
}

void FloatToHalf(std::span<const float> in, std::span<uint16_t> out) {
  assert(out.size() >= in.size());
  if (const convert_floats::Kernels* k = VectorKernels()) {
    ConversionStats unused;
    return k->narrow_half(in.data(), out.data(), in.size(), /*clamp=*/false, unused);
  }
  ConvertAll(in, out, [](float f) { return FloatToHalf(f); });
}

void BFloat16ToFloat(std::span<const uint16_t> in, std::span<float> out) {
  assert(out.size() >= in.size());
  if (const convert_floats::Kernels* k = VectorKernels()) {
    return k->widen_bfloat16(in.data(), out.data(), in.size());
  }
  ConvertAll(in, out, [](uint16_t b) { return BFloat16ToFloat(b); });
}

void FloatToBFloat16(std::span<const float> in, std::span<uint16_t> out) {
  assert(out.size() >= in.size());
  if (const convert_floats::Kernels* k = VectorKernels()) {
    ConversionStats unused;
    return k->narrow_bfloat16(in.data(), out.data(), in.size(), unused);
  }
  ConvertAll(in, out, [](float f) { return FloatToBFloat16(f); });
}

}  // namespace ampc
