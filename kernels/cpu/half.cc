#include "kernels/cpu/half.h"

#include <cassert>
#include <cstddef>

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

}  // namespace

void HalfToFloat(std::span<const uint16_t> in, std::span<float> out) {
  ConvertAll(in, out, [](uint16_t h) { return HalfToFloat(h); });
}

void FloatToHalf(std::span<const float> in, std::span<uint16_t> out) {
  ConvertAll(in, out, [](float f) { return FloatToHalf(f); });
}

void BFloat16ToFloat(std::span<const uint16_t> in, std::span<float> out) {
  ConvertAll(in, out, [](uint16_t b) { return BFloat16ToFloat(b); });
}

void FloatToBFloat16(std::span<const float> in, std::span<uint16_t> out) {
  ConvertAll(in, out, [](float f) { return FloatToBFloat16(f); });
}

}  // namespace ampc
