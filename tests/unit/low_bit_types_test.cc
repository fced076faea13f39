// The low-bit element types (low_bit.h): their sizes, FP8/FP4/E8M0/2- and 4-bit integer codes,
// and Cast through a Session with packing. Expected codes come from ml_dtypes 0.7 and
// onnx.numpy_helper (saturate_cast, to_float8e8m0), the onnx package's reference.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/low_bit.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/core/tensor_proto.h"
#include "runtime/session.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::Make;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// 0, -0, 0.3, 1.0625, 1.1875, -3.1, 448, 464, 465, 500, 1e-3, -1e-9, 2^-10, 57344, 61440, inf,
// -inf, NaN.
const std::vector<float> kInputs = {0.0f,     -0.0f,    0.3f,     1.0625f, 1.1875f, -3.1f,
                                    448.0f,   464.0f,   465.0f,   500.0f,  1e-3f,   -1e-9f,
                                    0x1p-10f, 57344.0f, 61440.0f, kInf,    -kInf,   kNaN};

std::vector<uint32_t> Encode(DType dtype, bool saturate) {
  std::vector<uint32_t> codes;
  for (float v : kInputs) codes.push_back(FloatToLowBit(dtype, v, {saturate, RoundMode::kUp}));
  return codes;
}

TEST(LowBitTypesTest, Float8E4M3FnRoundsToEvenAndOverflowsToNaNUnlessSaturating) {
  EXPECT_THAT(Encode(DType::kFloat8E4M3FN, false),
              ElementsAreArray({0x00, 0x80, 0x2a, 0x38, 0x3a, 0xc4, 0x7e, 0x7e, 0x7f, 0x7f, 0x01,
                                0x80, 0x00, 0x7f, 0x7f, 0x7f, 0xff, 0x7f}));
  EXPECT_THAT(Encode(DType::kFloat8E4M3FN, true),
              ElementsAreArray({0x00, 0x80, 0x2a, 0x38, 0x3a, 0xc4, 0x7e, 0x7e, 0x7e, 0x7e, 0x01,
                                0x80, 0x00, 0x7e, 0x7e, 0x7e, 0xfe, 0x7f}));
}

TEST(LowBitTypesTest, Float8E4M3FnuzHasNoNegativeZeroAndOneNaN) {
  EXPECT_THAT(Encode(DType::kFloat8E4M3FNUZ, false),
              ElementsAreArray({0x00, 0x00, 0x32, 0x40, 0x42, 0xcc, 0x80, 0x80, 0x80, 0x80, 0x01,
                                0x00, 0x01, 0x80, 0x80, 0x80, 0x80, 0x80}));
  EXPECT_THAT(Encode(DType::kFloat8E4M3FNUZ, true),
              ElementsAreArray({0x00, 0x00, 0x32, 0x40, 0x42, 0xcc, 0x7f, 0x7f, 0x7f, 0x7f, 0x01,
                                0x00, 0x01, 0x7f, 0x7f, 0x7f, 0xff, 0x80}));
}

TEST(LowBitTypesTest, Float8E5M2OverflowsToInfinityUnlessSaturating) {
  EXPECT_THAT(Encode(DType::kFloat8E5M2, false),
              ElementsAreArray({0x00, 0x80, 0x35, 0x3c, 0x3d, 0xc2, 0x5f, 0x5f, 0x5f, 0x60, 0x14,
                                0x80, 0x14, 0x7b, 0x7c, 0x7c, 0xfc, 0x7e}));
  EXPECT_THAT(Encode(DType::kFloat8E5M2, true),
              ElementsAreArray({0x00, 0x80, 0x35, 0x3c, 0x3d, 0xc2, 0x5f, 0x5f, 0x5f, 0x60, 0x14,
                                0x80, 0x14, 0x7b, 0x7b, 0x7b, 0xfb, 0x7e}));
}

TEST(LowBitTypesTest, Float8E5M2FnuzHasNoInfinity) {
  EXPECT_THAT(Encode(DType::kFloat8E5M2FNUZ, false),
              ElementsAreArray({0x00, 0x00, 0x39, 0x40, 0x41, 0xc6, 0x63, 0x63, 0x63, 0x64, 0x18,
                                0x00, 0x18, 0x7f, 0x80, 0x80, 0x80, 0x80}));
  EXPECT_THAT(Encode(DType::kFloat8E5M2FNUZ, true),
              ElementsAreArray({0x00, 0x00, 0x39, 0x40, 0x41, 0xc6, 0x63, 0x63, 0x63, 0x64, 0x18,
                                0x00, 0x18, 0x7f, 0x7f, 0x7f, 0xff, 0x80}));
}

std::vector<float> Decode(DType dtype) {
  std::vector<float> values;
  for (uint8_t code : {0x01, 0x08, 0x3c, 0x7e, 0x81, 0xfe}) {
    values.push_back(LowBitToFloat(dtype, code));
  }
  return values;
}

TEST(LowBitTypesTest, Float8CodesDecodeExactly) {
  EXPECT_THAT(Decode(DType::kFloat8E4M3FN),
              ElementsAreArray({0x1p-9f, 0x1p-6f, 1.5f, 448.0f, -0x1p-9f, -448.0f}));
  EXPECT_THAT(Decode(DType::kFloat8E4M3FNUZ),
              ElementsAreArray({0x1p-10f, 0x1p-7f, 0.75f, 224.0f, -0x1p-10f, -224.0f}));
  EXPECT_THAT(Decode(DType::kFloat8E5M2FNUZ),
              ElementsAreArray({0x1p-17f, 0x1p-14f, 0.5f, 49152.0f, -0x1p-17f, -49152.0f}));
  EXPECT_EQ(LowBitToFloat(DType::kFloat8E5M2, 0x3c), 1.0f);
  EXPECT_EQ(LowBitToFloat(DType::kFloat8E5M2, 0x7c), kInf);
  EXPECT_TRUE(std::isnan(LowBitToFloat(DType::kFloat8E5M2, 0x7e)));
  EXPECT_TRUE(std::isnan(LowBitToFloat(DType::kFloat8E4M3FN, 0xff)));
  EXPECT_TRUE(std::isnan(LowBitToFloat(DType::kFloat8E4M3FNUZ, 0x80)));
}

TEST(LowBitTypesTest, Float4E2M1RoundsToEvenAndAlwaysSaturates) {
  std::vector<uint32_t> codes;
  for (float v :
       {0.0f, 0.24f, 0.25f, 0.26f, 0.75f, 1.25f, 2.5f, 5.0f, 7.0f, -0.1f, -5.5f, kInf, kNaN}) {
    codes.push_back(FloatToLowBit(DType::kFloat4E2M1, v, {false, RoundMode::kUp}));
  }
  EXPECT_THAT(codes, ElementsAreArray({0, 0, 0, 1, 2, 2, 4, 6, 7, 8, 15, 7, 8}));
  EXPECT_EQ(LowBitToFloat(DType::kFloat4E2M1, 0xb), -1.5f);
}

// 0, 0.124, 0.25, 1.1, 1.5, 1.75, 3, 1.5 * 2^127, 2^-127 (a float subnormal), NaN.
std::vector<uint32_t> EncodeE8M0(bool saturate, RoundMode mode) {
  std::vector<uint32_t> codes;
  for (float v : {0.0f, 0.124f, 0.25f, 1.1f, 1.5f, 1.75f, 3.0f, 0x1.8p127f, 0x1p-127f, kNaN}) {
    codes.push_back(FloatToLowBit(DType::kFloat8E8M0, v, {saturate, mode}));
  }
  return codes;
}

TEST(LowBitTypesTest, Float8E8M0RoundsAsTheRoundModeSays) {
  EXPECT_THAT(EncodeE8M0(true, RoundMode::kUp),
              ElementsAreArray({0x00, 0x7c, 0x7d, 0x80, 0x80, 0x80, 0x81, 0xfe, 0x01, 0xff}));
  EXPECT_THAT(EncodeE8M0(false, RoundMode::kUp),
              ElementsAreArray({0x00, 0x7c, 0x7d, 0x80, 0x80, 0x80, 0x81, 0xff, 0x01, 0xff}));
  EXPECT_THAT(EncodeE8M0(true, RoundMode::kDown),
              ElementsAreArray({0x00, 0x7b, 0x7d, 0x7f, 0x7f, 0x7f, 0x80, 0xfe, 0x00, 0xff}));
  EXPECT_THAT(EncodeE8M0(true, RoundMode::kNearest),
              ElementsAreArray({0x00, 0x7c, 0x7d, 0x7f, 0x80, 0x80, 0x81, 0xfe, 0x00, 0xff}));
  EXPECT_THAT(EncodeE8M0(false, RoundMode::kNearest),
              ElementsAreArray({0x00, 0x7c, 0x7d, 0x7f, 0x80, 0x80, 0x81, 0xff, 0x00, 0xff}));
  EXPECT_EQ(LowBitToFloat(DType::kFloat8E8M0, 0x7f), 1.0f);
  EXPECT_EQ(LowBitToFloat(DType::kFloat8E8M0, 0x00), 0x1p-127f);
}

TEST(LowBitTypesTest, SmallIntsTruncateFloatsAndGiveZeroOutOfRange) {
  // ml_dtypes: -9..-8.5 and 8 are outside INT4, so 0; -7.9 truncates to -7 (code 9).
  std::vector<uint32_t> codes;
  for (float v : {-9.0f, -8.5f, -8.0f, -7.9f, -1.0f, 7.9f, 8.0f, kNaN}) {
    codes.push_back(FloatToLowBit(DType::kInt4, v, {}));
  }
  EXPECT_THAT(codes, ElementsAreArray({0, 8, 8, 9, 15, 7, 0, 0}));
  EXPECT_EQ(FloatToLowBit(DType::kUint4, 15.5f, {}), 15);
  EXPECT_EQ(FloatToLowBit(DType::kUint4, -1.0f, {}), 0);
  EXPECT_EQ(FloatToLowBit(DType::kInt2, -2.0f, {}), 2);
  EXPECT_EQ(FloatToLowBit(DType::kInt2, 2.0f, {}), 0);
  EXPECT_EQ(FloatToLowBit(DType::kUint2, 3.0f, {}), 3);
  EXPECT_EQ(LowBitToFloat(DType::kInt4, 0x8), -8.0f);
  EXPECT_EQ(LowBitToFloat(DType::kInt2, 0x3), -1.0f);
  EXPECT_EQ(IntegerToSmallInt(300, 4), 12);  // integers wrap, as ml_dtypes
}

TEST(LowBitTypesTest, SizesPackSubByteTypes) {
  EXPECT_EQ(DTypeBytes(DType::kInt4, 5), 3u);
  EXPECT_EQ(DTypeBytes(DType::kUint2, 5), 2u);
  EXPECT_EQ(DTypeBytes(DType::kFloat8E5M2, 5), 5u);
  EXPECT_EQ(DTypeSize(DType::kFloat8E8M0), 1u);
  EXPECT_EQ(DTypeSize(DType::kFloat4E2M1), 0u);  // sub-byte: no per-element byte size
  EXPECT_EQ(Tensor::Host(DType::kUint4, {3, 3}).bytes(), 5u);
  EXPECT_EQ(*CheckedBytes(DType::kInt2, Shape{2, 3}), 2u);
}

TEST(LowBitTypesTest, TensorProtoInt32DataHoldsPackedBytes) {
  onnx::TensorProto proto;
  proto.set_data_type(onnx::TensorProto::INT4);
  proto.add_dims(3);
  proto.add_int32_data(0x9f);  // elements 0 and 1: -1 (low nibble), -7
  proto.add_int32_data(0x07);  // element 2: 7
  auto tensor = TensorFromProto(proto);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_EQ(tensor->bytes(), 2u);
  EXPECT_EQ(tensor->data<uint8_t>()[0], 0x9f);
  EXPECT_EQ(TensorToProto(*tensor, "t").raw_data(), std::string("\x9f\x07", 2));
}

class LowBitCastTest : public ::testing::Test {
 protected:
  absl::StatusOr<std::vector<Tensor>> Run(const std::string& text, std::vector<Tensor> inputs) {
    auto session = Session::Create(testing::ParseModelText(text), DefaultRegistry(), backend_);
    if (!session.ok()) return session.status();
    auto outputs = (*session)->Run(inputs);
    sessions_.push_back(*std::move(session));
    return outputs;
  }
  CpuBackend backend_{2};
  std::vector<std::unique_ptr<Session>> sessions_;
};

TEST_F(LowBitCastTest, CastPacksInt4LowNibbleFirstAndBack) {
  auto out = Run(R"(
<ir_version: 10, opset_import: ["" : 21]>
g (float[5] x) => (int4[5] q, float[5] y) {
  q = Cast<to = 22>(x)
  y = Cast<to = 1>(q)
}
)",
                 {Make<float>(DType::kFloat, {5}, {1.0f, -2.5f, 7.0f, -8.0f, 3.9f})});
  ASSERT_TRUE(out.ok()) << out.status();
  const uint8_t* q = (*out)[0].data<uint8_t>();
  EXPECT_EQ(q[0], 0xe1);  // -2 (0xe) above 1
  EXPECT_EQ(q[1], 0x87);  // -8 above 7
  EXPECT_EQ(q[2], 0x03);  // 3, padding zero
  EXPECT_THAT(testing::Values<float>((*out)[1]),
              ElementsAreArray({1.0f, -2.0f, 7.0f, -8.0f, 3.0f}));
}

TEST_F(LowBitCastTest, SaturateZeroOverflowsFloat8E4M3FnToNaN) {
  auto out = Run(R"(
<ir_version: 10, opset_import: ["" : 21]>
g (float[2] x) => (float8e4m3fn[2] s, float8e4m3fn[2] n) {
  s = Cast<to = 17>(x)
  n = Cast<to = 17, saturate = 0>(x)
}
)",
                 {Make<float>(DType::kFloat, {2}, {1000.0f, -0.3f})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].data<uint8_t>()[0], 0x7e);
  EXPECT_EQ((*out)[1].data<uint8_t>()[0], 0x7f);
  EXPECT_EQ((*out)[1].data<uint8_t>()[1], 0xaa);
}

TEST_F(LowBitCastTest, OtherKernelsRefuseLowBitTypes) {
  auto out = Run(R"(
<ir_version: 10, opset_import: ["" : 21]>
g (float8e4m3fn[2] x) => (float8e4m3fn[2] y) { y = Add(x, x) }
)",
                 {});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("FLOAT8E4M3FN"));
}

}  // namespace
}  // namespace ampc
