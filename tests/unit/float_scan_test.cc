#include "passes/graph/float_scan.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "passes/graph/deferred_data.h"

namespace ampc {
namespace {

using onnx::TensorProto;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(FloatScanTest, FloatCountsNonFiniteAndTheLargestFiniteMagnitude) {
  const std::vector<float> values = {1.5f, -70000.0f, kNaN, kInf, -kInf, 3.0f};
  TensorProto raw;
  raw.set_data_type(TensorProto::FLOAT);
  raw.set_raw_data(values.data(), values.size() * sizeof(float));
  TensorProto typed;
  typed.set_data_type(TensorProto::FLOAT);
  for (float v : values) typed.add_float_data(v);
  for (const TensorProto* tensor : {&raw, &typed}) {
    const FloatScan scan = ScanFloats(*tensor);
    EXPECT_EQ(scan.nan, 1);
    EXPECT_EQ(scan.inf, 2);
    EXPECT_EQ(scan.max_finite_abs, 70000.0f);
  }
}

// Raw FLOAT data is scanned by its bits; the counts and the maximum must be std::isnan's,
// std::isinf's and std::fabs's over every kind of pattern: random bits (many NaNs among them),
// negative and signalling NaNs, subnormals, -0 and the largest finite values.
TEST(FloatScanTest, FloatBitsScanAgreesWithTheStandardFunctions) {
  std::vector<uint32_t> bits = {0xffc00001u, 0x7f800001u, 0xff800000u, 0x00000001u,
                                0x80000000u, 0xff7fffffu, 0x7f7fffffu, 0x807fffffu};
  uint32_t seed = 3;
  for (int i = 0; i < 100000; ++i) bits.push_back(seed = seed * 1664525u + 1013904223u);
  TensorProto raw;
  raw.set_data_type(TensorProto::FLOAT);
  raw.set_raw_data(bits.data(), bits.size() * sizeof(uint32_t));
  int64_t nan = 0, inf = 0;
  float max = 0;
  for (uint32_t b : bits) {
    float v;
    std::memcpy(&v, &b, sizeof(v));
    nan += std::isnan(v);
    inf += std::isinf(v);
    if (std::isfinite(v)) max = std::max(max, std::fabs(v));
  }
  const FloatScan scan = ScanFloats(raw);
  EXPECT_EQ(scan.nan, nan);
  EXPECT_EQ(scan.inf, inf);
  EXPECT_EQ(scan.max_finite_abs, max);
  EXPECT_EQ(max, std::numeric_limits<float>::max());  // the patterns reach it
}

TEST(FloatScanTest, SixteenBitFloatsAreCountedByTheirBits) {
  // FP16: 0x7c00 +inf, 0xfc00 -inf, 0x7e00 NaN, 0x7bff 65504. BF16: 0x7f80 +inf, 0x7fc0 NaN.
  const std::vector<uint16_t> half = {0x7c00, 0xfc00, 0x7e00, 0x7bff, 0x3c00};
  const std::vector<uint16_t> bf16 = {0x7f80, 0x7fc0, 0x7fc1, 0x3f80};
  TensorProto h;
  h.set_data_type(TensorProto::FLOAT16);
  h.set_raw_data(half.data(), half.size() * 2);
  TensorProto b;
  b.set_data_type(TensorProto::BFLOAT16);
  for (uint16_t bits : bf16) b.add_int32_data(bits);
  EXPECT_EQ(ScanFloats(h).nan, 1);
  EXPECT_EQ(ScanFloats(h).inf, 2);
  EXPECT_EQ(ScanFloats(b).nan, 2);
  EXPECT_EQ(ScanFloats(b).inf, 1);
  EXPECT_EQ(ScanFloats(h).max_finite_abs, 0.0f);  // FLOAT only
}

// A deferred weight is read once: the second scan is the first one's, even with its file gone.
TEST(FloatScanTest, DeferredTensorIsScannedFromItsFileOnce) {
  const std::vector<float> values = {2.0f, kNaN, -8.0f, kInf};
  FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(std::fwrite(values.data(), sizeof(float), values.size(), file), values.size());
  ASSERT_EQ(std::fflush(file), 0);
  const int index = AddDeferredFile(::dup(::fileno(file)), "scan.onnx.data");
  TensorProto tensor;
  tensor.set_name("w");
  tensor.set_data_type(TensorProto::FLOAT);
  tensor.add_dims(4);
  MakeDeferred(tensor, {index, 0, values.size() * sizeof(float)});
  const FloatScan first = ScanFloats(tensor);
  EXPECT_EQ(first.nan, 1);
  EXPECT_EQ(first.inf, 1);
  EXPECT_EQ(first.max_finite_abs, 8.0f);
  ASSERT_EQ(::ftruncate(::fileno(file), 0), 0);
  std::fclose(file);
  const FloatScan again = ScanFloats(tensor);
  EXPECT_EQ(again.nan, 1);
  EXPECT_EQ(again.max_finite_abs, 8.0f);
}

}  // namespace
}  // namespace ampc
