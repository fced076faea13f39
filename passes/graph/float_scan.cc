#include "passes/graph/float_scan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "passes/graph/deferred_data.h"
#include "passes/graph/tensor_data.h"

namespace ampc {
namespace {

using onnx::TensorProto;

// The i-th element of raw bytes as T (little-endian, maybe unaligned).
template <typename T>
T RawAt(const char* raw, size_t i) {
  T value;
  std::memcpy(&value, raw + i * sizeof(T), sizeof(T));
  return value;
}

template <typename T>
void ScanValue(T value, FloatScan& scan) {
  if (std::isnan(value)) ++scan.nan;
  if (std::isinf(value)) ++scan.inf;
}

// 16-bit floats by their bits: an all-ones exponent is NaN (mantissa set) or infinity.
void Scan16(int type, uint16_t bits, FloatScan& scan) {
  const bool half = type == TensorProto::FLOAT16;
  const uint16_t exponent = half ? 0x7c00 : 0x7f80, mantissa = half ? 0x03ff : 0x007f;
  if ((bits & exponent) != exponent) return;
  ++((bits & mantissa) != 0 ? scan.nan : scan.inf);
}

void ScanFloat(float value, FloatScan& scan) {
  ScanValue(value, scan);
  if (std::isfinite(value)) scan.max_finite_abs = std::max(scan.max_finite_abs, std::fabs(value));
}

// n FLOAT values by their bits, branch-free so that the compiler vectorises it (weights of
// external data are scanned at read speed): NaN has magnitude bits above infinity's, and finite
// magnitudes order as their bits do.
void ScanFloatBits(const char* raw, uint64_t n, FloatScan& scan) {
  constexpr uint32_t kInf = 0x7f800000u;
  constexpr uint64_t kBlock = uint64_t{1} << 30;  // 32-bit counts cannot overflow within a block
  uint32_t max_bits = 0;
  for (uint64_t begin = 0; begin < n; begin += kBlock) {
    const uint64_t end = std::min(n, begin + kBlock);
    uint32_t nan = 0, inf = 0;
    for (uint64_t i = begin; i < end; ++i) {
      const uint32_t magnitude = RawAt<uint32_t>(raw, i) & 0x7fffffffu;
      nan += magnitude > kInf;
      inf += magnitude == kInf;
      // A mask, not a select: GCC 12 vectorises neither a select feeding a max nor std::max of one.
      max_bits = std::max(max_bits, magnitude & (0u - static_cast<uint32_t>(magnitude < kInf)));
    }
    scan.nan += nan;
    scan.inf += inf;
  }
  float max;
  std::memcpy(&max, &max_bits, sizeof(max));
  scan.max_finite_abs = std::max(scan.max_finite_abs, max);
}

// `size` bytes of raw data of a `type` tensor.
void ScanRaw(int type, const char* raw, uint64_t size, FloatScan& scan) {
  switch (type) {
    case TensorProto::FLOAT:
      ScanFloatBits(raw, size / 4, scan);
      break;
    case TensorProto::DOUBLE:
      for (size_t i = 0; i < size / 8; ++i) ScanValue(RawAt<double>(raw, i), scan);
      break;
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
      for (size_t i = 0; i < size / 2; ++i) Scan16(type, RawAt<uint16_t>(raw, i), scan);
      break;
    default:
      break;
  }
}

FloatScan ScanDeferred(const TensorProto& tensor) {
  if (!IsFloatElementType(tensor.data_type())) return {};  // nothing to count: not read at all
  using Key = std::tuple<int, uint64_t, uint64_t, int>;
  static std::mutex mutex;
  static auto* scans = new std::map<Key, FloatScan>;  // never freed, like the file registry
  const DeferredSpan span = SpanOf(tensor);
  const Key key{span.file, span.offset, span.length, tensor.data_type()};
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = scans->find(key); it != scans->end()) return it->second;
  }
  FloatScan scan;
  const absl::Status read =
      ForEachChunk(tensor, kDeferredChunkBytes, [&](const char* data, uint64_t size) {
        ScanRaw(tensor.data_type(), data, size, scan);
        return absl::OkStatus();
      });
  if (read.ok()) {
    std::lock_guard<std::mutex> lock(mutex);
    scans->emplace(key, scan);
  }
  return scan;
}

}  // namespace

FloatScan ScanFloats(const TensorProto& tensor) {
  if (IsDeferred(tensor)) return ScanDeferred(tensor);
  FloatScan scan;
  const int type = tensor.data_type();
  ScanRaw(type, tensor.raw_data().data(), tensor.raw_data().size(), scan);
  if (type == TensorProto::FLOAT) {
    for (float v : tensor.float_data()) ScanFloat(v, scan);
  } else if (type == TensorProto::DOUBLE) {
    for (double v : tensor.double_data()) ScanValue(v, scan);
  } else if (type == TensorProto::FLOAT16 || type == TensorProto::BFLOAT16) {
    for (int32_t v : tensor.int32_data()) Scan16(type, static_cast<uint16_t>(v), scan);
  }
  return scan;
}

}  // namespace ampc
