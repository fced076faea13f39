// Bitwise CPU kernels: BitShift (unsigned, and signed from opset 28, with
// out-of-range shifts), BitwiseAnd/Or/Xor/Not with broadcasting, and BitCast.
// Expected values are worked out by hand in the comments.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/session.h"
#include "tests/support/kernel_runs.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

using testing::Make;
using testing::Values;

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class BitwiseKernelsTest : public testing::KernelTest {};

TEST_F(BitwiseKernelsTest, SignedRightShiftIsArithmeticAndOutOfRangeLeavesTheSignFill) {
  // -128 >> 1 = -64; -7 >> 1 = -4 (floor); 64 >> 9: past the width, 0; -1 >>
  // -1: negative shift of a negative value, -1.
  auto out = Run(R"(
<ir_version: 13, opset_import: ["" : 28]>
g (int8[4] x, int8[4] s) => (int8[4] y) { y = BitShift<direction = "RIGHT">(x, s) }
)",
                 {Make<int8_t>(DType::kInt8, {4}, {-128, -7, 64, -1}),
                  Make<int8_t>(DType::kInt8, {4}, {1, 1, 9, -1})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<int8_t>((*out)[0]), ElementsAre(-64, -4, 0, -1));
}

TEST_F(BitwiseKernelsTest, SignedLeftShiftDiscardsBitsPastTheSignBit) {
  // 64 << 1 = 0x80 = -128; -1 << 7 = 0xff80 cut to 0x80 = -128; 3 << 8 and 5 <<
  // -2: 0.
  auto out = Run(R"(
<ir_version: 13, opset_import: ["" : 28]>
g (int8[4] x, int8[4] s) => (int8[4] y) { y = BitShift<direction = "LEFT">(x, s) }
)",
                 {Make<int8_t>(DType::kInt8, {4}, {64, -1, 3, 5}),
                  Make<int8_t>(DType::kInt8, {4}, {1, 7, 8, -2})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<int8_t>((*out)[0]), ElementsAre(-128, -128, 0, 0));
}

TEST_F(BitwiseKernelsTest, UnsignedShiftBroadcastsAndShiftsOutEveryBitAtTheWidth) {
  // 1 << 63 = 2^63; 1 << 64: 0; 2^63 >> 63 = 1 (the shift [3] broadcasts over x
  // [2,3]).
  auto out = Run(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (uint64[2,3] x, uint64[3] s) => (uint64[2,3] l) { l = BitShift<direction = "LEFT">(x, s) }
)",
                 {Make<uint64_t>(DType::kUint64, {2, 3}, {1, 1, 3, 2, 5, 7}),
                  Make<uint64_t>(DType::kUint64, {3}, {63, 64, 1})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<uint64_t>((*out)[0]), ElementsAre(uint64_t{1} << 63, 0u, 6u, 0u, 0u, 14u));
}

TEST_F(BitwiseKernelsTest, AndOrXorBroadcast) {
  // int32: [[12, -1], [5, 0x0f0f]] & [10, 0xff] = [[8, 0xff], [0, 0x0f]].
  // uint8: [0xf0, 0x01] | [0x0f] = [0xff, 0x0f]. int16: [-1, 0x00ff] ^ 0x0f0f =
  // [~0x0f0f (-3856), 0x0ff0 (4080)].
  auto out = Run(
      R"(
<ir_version: 8, opset_import: ["" : 18]>
g (int32[2,2] a, int32[2] b, uint8[2] c, uint8[1] d, int16[2] e, int16[] f)
    => (int32[2,2] x, uint8[2] y, int16[2] z) {
  x = BitwiseAnd(a, b)
  y = BitwiseOr(c, d)
  z = BitwiseXor(e, f)
}
)",
      {Make<int32_t>(DType::kInt32, {2, 2}, {12, -1, 5, 0x0f0f}),
       Make<int32_t>(DType::kInt32, {2}, {10, 0xff}),
       Make<uint8_t>(DType::kUint8, {2}, {0xf0, 0x01}), Make<uint8_t>(DType::kUint8, {1}, {0x0f}),
       Make<int16_t>(DType::kInt16, {2}, {-1, 0x00ff}),
       Make<int16_t>(DType::kInt16, {}, {0x0f0f})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<int32_t>((*out)[0]), ElementsAre(8, 0xff, 0, 0x0f));
  EXPECT_THAT(Values<uint8_t>((*out)[1]), ElementsAre(0xff, 0x0f));
  EXPECT_THAT(Values<int16_t>((*out)[2]), ElementsAre(-3856, 4080));
}

TEST_F(BitwiseKernelsTest, NotFlipsEveryBit) {
  // uint16: ~0 = 65535, ~0x00ff = 0xff00 (65280). int8: ~0 = -1, ~-128 = 127.
  auto out = Run(R"(
<ir_version: 8, opset_import: ["" : 18]>
g (uint16[2] a, int8[2] b) => (uint16[2] x, int8[2] y) {
  x = BitwiseNot(a)
  y = BitwiseNot(b)
}
)",
                 {Make<uint16_t>(DType::kUint16, {2}, {0, 0x00ff}),
                  Make<int8_t>(DType::kInt8, {2}, {0, -128})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values<uint16_t>((*out)[0]), ElementsAre(65535, 65280));
  EXPECT_THAT(Values<int8_t>((*out)[1]), ElementsAre(-1, 127));
}

TEST_F(BitwiseKernelsTest, BitCastKeepsTheBitsAndTheShape) {
  // 1.0f is 0x3f800000 (1065353216), -2.0f is 0xc0000000 (-1073741824);
  // FP16 1.0 is 0x3c00 (15360); true and false are the bytes 1 and 0.
  auto out = Run(R"(
<ir_version: 12, opset_import: ["" : 26]>
g (float[2,1] a, float16[1] b, bool[2] c) => (int32[2,1] x, uint16[1] y, uint8[2] z) {
  x = BitCast<to = 6>(a)
  y = BitCast<to = 4>(b)
  z = BitCast<to = 2>(c)
}
)",
                 {Make<float>(DType::kFloat, {2, 1}, {1.0f, -2.0f}), testing::Halves({1}, {1.0f}),
                  Make<bool>(DType::kBool, {2}, {true, false})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 1}));
  EXPECT_THAT(Values<int32_t>((*out)[0]), ElementsAre(1065353216, -1073741824));
  EXPECT_THAT(Values<uint16_t>((*out)[1]), ElementsAre(15360));
  EXPECT_THAT(Values<uint8_t>((*out)[2]), ElementsAre(1, 0));
}

}  // namespace
}  // namespace ampc
