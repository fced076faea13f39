#include "passes/graph/convert_constant.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/numerics/half.h"
#include "passes/graph/tensor_data.h"

namespace ampc {
namespace {

using onnx::TensorProto;

constexpr float kFp16Max = 65504.0f;

std::vector<float> ToFloats(const TensorProto& tensor) {
  const std::string bytes = RawBytes(tensor);
  if (tensor.data_type() == TensorProto::FLOAT) {
    std::vector<float> values(bytes.size() / 4);
    // An empty vector's data() may be null, and memcpy from or to null is undefined even for 0.
    if (!values.empty()) std::memcpy(values.data(), bytes.data(), values.size() * 4);
    return values;
  }
  std::vector<uint16_t> bits(bytes.size() / 2);
  if (!bits.empty()) std::memcpy(bits.data(), bytes.data(), bits.size() * 2);
  std::vector<float> values(bits.size());
  if (tensor.data_type() == TensorProto::FLOAT16) {
    HalfToFloat(bits, values);
  } else {
    BFloat16ToFloat(bits, values);
  }
  return values;
}

uint16_t Narrow(float value, int to) {
  return to == TensorProto::FLOAT16 ? FloatToHalf(value) : FloatToBFloat16(value);
}

float Widen(uint16_t bits, int to) {
  return to == TensorProto::FLOAT16 ? HalfToFloat(bits) : BFloat16ToFloat(bits);
}

}  // namespace

TensorProto ConvertConstant(const TensorProto& tensor, int to, bool clamp, ConversionStats& stats) {
  std::vector<float> values = ToFloats(tensor);
  TensorProto out;
  out.mutable_dims()->CopyFrom(tensor.dims());
  out.set_data_type(to);
  if (to == TensorProto::FLOAT) {
    out.set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
    return out;
  }
  std::string raw(values.size() * 2, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    float v = values[i];
    if (to == TensorProto::FLOAT16 && clamp && std::isfinite(v) && std::fabs(v) > kFp16Max) {
      v = std::copysign(kFp16Max, v);
      ++stats.clamped;
    }
    const uint16_t bits = Narrow(v, to);
    const float back = Widen(bits, to);
    if (std::isfinite(v) && std::isinf(back)) ++stats.overflowed;
    if (v != 0 && back == 0) ++stats.flushed_to_zero;
    std::memcpy(raw.data() + 2 * i, &bits, 2);
  }
  out.set_raw_data(std::move(raw));
  return out;
}

}  // namespace ampc
