// Element sizes and the canonical little-endian bytes of tensors, whichever field holds them.
#include "passes/graph/tensor_data.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <optional>
#include <ostream>
#include <string>

namespace ampc {
namespace {

using onnx::TensorProto;

std::string Bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out += static_cast<char>(v);
  return out;
}

struct TypeCase {
  TensorProto::DataType type;
  size_t element_size;
  std::function<void(TensorProto&)> fill;  // sets the typed field the ONNX spec names
  int elements;
  std::string bytes;  // the same values written out by hand
};

void PrintTo(const TypeCase& c, std::ostream* os) { *os << TensorProto::DataType_Name(c.type); }

int TypedValueCount(const TensorProto& t) {
  return t.float_data_size() + t.double_data_size() + t.int32_data_size() + t.int64_data_size() +
         t.uint64_data_size();
}

class TensorDataTest : public testing::TestWithParam<TypeCase> {
 protected:
  TensorProto Typed() const {
    TensorProto t;
    t.set_data_type(GetParam().type);
    t.add_dims(GetParam().elements);
    GetParam().fill(t);
    return t;
  }
};

TEST_P(TensorDataTest, ElementSizeIsTheSpecWidth) {
  EXPECT_EQ(ElementSize(GetParam().type), GetParam().element_size);
}

TEST_P(TensorDataTest, TypedFieldGivesTheKnownBytes) {
  EXPECT_EQ(RawBytes(Typed()), GetParam().bytes);
}

TEST_P(TensorDataTest, RawDataGivesTheSameBytes) {
  TensorProto raw;
  raw.set_data_type(GetParam().type);
  raw.set_raw_data(GetParam().bytes);
  EXPECT_EQ(RawBytes(raw), RawBytes(Typed()));
}

TEST_P(TensorDataTest, DataBytesIsElementSizeTimesDims) {
  EXPECT_EQ(DataBytes(Typed()), GetParam().bytes.size());
}

TEST_P(TensorDataTest, MoveTypedDataToRawEmptiesTheTypedField) {
  TensorProto t = Typed();
  ASSERT_TRUE(MoveTypedDataToRaw(t));
  EXPECT_EQ(t.raw_data(), GetParam().bytes);
  EXPECT_EQ(TypedValueCount(t), 0);
}

INSTANTIATE_TEST_SUITE_P(
    EveryDataType, TensorDataTest,
    testing::Values(
        TypeCase{TensorProto::FLOAT, 4,
                 [](TensorProto& t) {
                   t.add_float_data(1.0f);
                   t.add_float_data(-2.0f);
                 },
                 2, Bytes({0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0})},
        TypeCase{TensorProto::UINT8, 1,
                 [](TensorProto& t) {
                   t.add_int32_data(1);
                   t.add_int32_data(255);
                 },
                 2, Bytes({0x01, 0xff})},
        TypeCase{TensorProto::INT8, 1,
                 [](TensorProto& t) {
                   t.add_int32_data(-1);
                   t.add_int32_data(127);
                 },
                 2, Bytes({0xff, 0x7f})},
        TypeCase{TensorProto::UINT16, 2,
                 [](TensorProto& t) {
                   t.add_int32_data(0x1234);
                   t.add_int32_data(65535);
                 },
                 2, Bytes({0x34, 0x12, 0xff, 0xff})},
        TypeCase{TensorProto::INT16, 2,
                 [](TensorProto& t) {
                   t.add_int32_data(-2);
                   t.add_int32_data(0x0102);
                 },
                 2, Bytes({0xfe, 0xff, 0x02, 0x01})},
        TypeCase{TensorProto::INT32, 4,
                 [](TensorProto& t) {
                   t.add_int32_data(1);
                   t.add_int32_data(-1);
                 },
                 2, Bytes({0x01, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff})},
        TypeCase{TensorProto::INT64, 8, [](TensorProto& t) { t.add_int64_data(-2); }, 1,
                 Bytes({0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})},
        TypeCase{TensorProto::BOOL, 1,
                 [](TensorProto& t) {
                   t.add_int32_data(1);
                   t.add_int32_data(0);
                 },
                 2, Bytes({0x01, 0x00})},
        TypeCase{TensorProto::FLOAT16, 2,
                 [](TensorProto& t) {
                   t.add_int32_data(0x3c00);  // 1.0
                   t.add_int32_data(0xc000);  // -2.0
                 },
                 2, Bytes({0x00, 0x3c, 0x00, 0xc0})},
        TypeCase{TensorProto::DOUBLE, 8, [](TensorProto& t) { t.add_double_data(1.0); }, 1,
                 Bytes({0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x3f})},
        TypeCase{TensorProto::UINT32, 4, [](TensorProto& t) { t.add_uint64_data(0xdeadbeef); },
                 1, Bytes({0xef, 0xbe, 0xad, 0xde})},
        TypeCase{TensorProto::UINT64, 8,
                 [](TensorProto& t) { t.add_uint64_data(0x0102030405060708); }, 1,
                 Bytes({0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01})},
        TypeCase{TensorProto::COMPLEX64, 8,
                 [](TensorProto& t) {
                   t.add_float_data(1.0f);  // real, then imaginary
                   t.add_float_data(-2.0f);
                 },
                 1, Bytes({0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0})},
        TypeCase{TensorProto::COMPLEX128, 16,
                 [](TensorProto& t) {
                   t.add_double_data(1.0);
                   t.add_double_data(2.0);
                 },
                 1,
                 Bytes({0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x3f, 0x00, 0x00, 0x00, 0x00,
                        0x00, 0x00, 0x00, 0x40})},
        TypeCase{TensorProto::BFLOAT16, 2,
                 [](TensorProto& t) {
                   t.add_int32_data(0x3f80);  // 1.0
                   t.add_int32_data(0x4049);  // 3.140625
                 },
                 2, Bytes({0x80, 0x3f, 0x49, 0x40})}),
    [](const testing::TestParamInfo<TypeCase>& info) {
      return TensorProto::DataType_Name(info.param.type);
    });

TEST(TensorDataTest, TypesWithoutAnElementSize) {
  for (int32_t type : {int32_t{TensorProto::UNDEFINED}, int32_t{TensorProto::STRING}, 29, 99, -1}) {
    SCOPED_TRACE(type);
    EXPECT_EQ(ElementSize(type), std::nullopt);
    TensorProto t;
    t.set_data_type(type);
    t.add_dims(1);
    t.add_int32_data(7);
    EXPECT_EQ(DataBytes(t), std::nullopt);
    EXPECT_EQ(RawBytes(t), "");
    EXPECT_FALSE(MoveTypedDataToRaw(t));
    EXPECT_FALSE(t.has_raw_data());
    EXPECT_EQ(t.int32_data_size(), 1);
  }
}

TEST(TensorDataTest, DataBytesOfScalarsEmptyTensorsAndBadDims) {
  TensorProto t;
  t.set_data_type(TensorProto::FLOAT);
  EXPECT_EQ(DataBytes(t), 4u);  // rank 0: one element
  t.add_dims(3);
  t.add_dims(0);
  EXPECT_EQ(DataBytes(t), 0u);
  t.set_dims(1, -1);
  EXPECT_EQ(DataBytes(t), std::nullopt);
  t.set_dims(0, std::numeric_limits<int64_t>::max());
  t.set_dims(1, 2);
  EXPECT_EQ(DataBytes(t), std::nullopt);  // overflows
  t.set_dims(0, int64_t{1} << 30);
  t.set_dims(1, int64_t{1} << 31);
  EXPECT_EQ(DataBytes(t), uint64_t{1} << 63);
  t.add_dims(2);
  EXPECT_EQ(DataBytes(t), std::nullopt);  // 2^64
}

// ONNX 1.23's sub-byte types pack LSB first: two 4-bit, four 2-bit elements a byte, 6-bit ones as
// a bitstream (4 in 3 bytes); the last byte is padded. int32_data holds one packed byte per entry
// for the 4- and 2-bit types and one element per entry for the 6-bit ones.
TEST(TensorDataTest, SubByteTypesArePackedAndTheirTypedFieldsToo) {
  TensorProto t;
  t.add_dims(5);
  t.set_data_type(TensorProto::INT4);
  EXPECT_EQ(ElementSize(TensorProto::INT4), std::nullopt);
  EXPECT_EQ(DataBytes(t), 3u);
  for (int byte : {0x21, 0x43, 0x05}) t.add_int32_data(byte);
  EXPECT_EQ(HeldBytes(t), 3u);
  EXPECT_EQ(RawBytes(t), Bytes({0x21, 0x43, 0x05}));
  t.set_data_type(TensorProto::UINT2);
  EXPECT_EQ(DataBytes(t), 2u);  // ceil(5 * 2 / 8)
  t.set_data_type(TensorProto::FLOAT6E2M3);
  EXPECT_EQ(DataBytes(t), 4u);  // ceil(5 * 6 / 8)
  t.clear_int32_data();
  for (int v : {0x3f, 0x01, 0x02, 0x03, 0x2a}) t.add_int32_data(v);
  EXPECT_EQ(HeldBytes(t), 4u);
  // x0 | x1 << 6 | x2 << 12 | x3 << 18 | x4 << 24, little-endian.
  EXPECT_EQ(RawBytes(t), Bytes({0x7f, 0x20, 0x0c, 0x2a}));
  ASSERT_TRUE(MoveTypedDataToRaw(t));
  EXPECT_EQ(t.raw_data(), Bytes({0x7f, 0x20, 0x0c, 0x2a}));
  EXPECT_EQ(t.int32_data_size(), 0);
}

TEST(TensorDataTest, EightBitFloatsTakeAByteAnElement) {
  for (int32_t type : {17, 18, 19, 20, 24}) {
    SCOPED_TRACE(type);
    EXPECT_EQ(ElementSize(type), 1u);
  }
  TensorProto t;
  t.set_data_type(TensorProto::FLOAT4E2M1);
  t.add_dims(int64_t{1} << 62);
  t.add_dims(2);
  EXPECT_EQ(DataBytes(t), uint64_t{1} << 62);  // 2^63 elements of 4 bits: the bits overflow
}

TEST(TensorDataTest, NonEmptyRawDataWinsOverTypedFields) {
  TensorProto t;
  t.set_data_type(TensorProto::FLOAT);
  t.add_float_data(1.0f);
  t.set_raw_data(Bytes({0x00, 0x00, 0x00, 0x40}));
  EXPECT_EQ(RawBytes(t), Bytes({0x00, 0x00, 0x00, 0x40}));
  EXPECT_TRUE(MoveTypedDataToRaw(t));
  EXPECT_EQ(t.raw_data(), Bytes({0x00, 0x00, 0x00, 0x40}));
}

TEST(TensorDataTest, MoveTypedDataToRawOfAnEmptyTensorSetsEmptyRawData) {
  TensorProto t;
  t.set_data_type(TensorProto::INT64);
  t.add_dims(0);
  EXPECT_TRUE(MoveTypedDataToRaw(t));
  EXPECT_TRUE(t.has_raw_data());
  EXPECT_EQ(t.raw_data(), "");
}

}  // namespace
}  // namespace ampc
