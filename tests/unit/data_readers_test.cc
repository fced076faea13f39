// Data readers: IDX headers and their errors on hand-made files (raw and gzip), the real
// Fashion-MNIST test set, .npy and TensorProto .pb datasets (hand-encoded bytes), the synthetic
// source, epoch order and batches.
#include "runtime/data_readers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "runtime/core/tensor_proto.h"
#include "runtime/npy.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::Values;

std::string BigEndian(std::vector<uint32_t> words) {
  std::string bytes;
  for (uint32_t w : words) {
    for (int shift : {24, 16, 8, 0}) bytes.push_back(static_cast<char>((w >> shift) & 0xff));
  }
  return bytes;
}

class DataReadersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ampc-data-XXXXXX";
    dir_ = mkdtemp(pattern);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  std::string WriteGzip(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    gzFile file = gzopen(path.c_str(), "wb");
    gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(file);
    return path;
  }
  // Two 2x3 images with pixels 0..11, and their labels 7 and 3.
  std::string Images() {
    return BigEndian({0x803, 2, 2, 3}) + std::string("\0\1\2\3\4\5\6\7\10\11\12\13", 12);
  }
  std::string Labels() { return BigEndian({0x801, 2}) + std::string("\7\3", 2); }

  fs::path dir_;
};

TEST_F(DataReadersTest, ReadsRawAndGzipIdxFiles) {
  for (bool gzip : {false, true}) {
    const std::string images = gzip ? WriteGzip("i.gz", Images()) : Write("i", Images());
    const std::string labels = gzip ? WriteGzip("l.gz", Labels()) : Write("l", Labels());
    auto data = ReadIdxDataset(images, labels);
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_EQ(data->images.dtype(), DType::kUint8);
    EXPECT_EQ(data->images.shape(), (Shape{2, 2, 3}));
    EXPECT_EQ(Values<uint8_t>(data->images)[11], 11);
    EXPECT_THAT(Values<int64_t>(data->labels), ::testing::ElementsAre(7, 3));
  }
}

TEST_F(DataReadersTest, IdxErrorsNameTheFileAndTheProblem) {
  const std::string labels_as_images = Write("swapped", Labels());
  EXPECT_THAT(ReadIdxImages(labels_as_images).status().message(),
              HasSubstr("swapped: IDX magic number 0x00000801, expected 0x00000803 (images)"));
  EXPECT_THAT(ReadIdxImages(Write("tiny", std::string("\0\0", 2))).status().message(),
              HasSubstr("tiny: short read: no IDX magic number"));
  EXPECT_THAT(ReadIdxImages(Write("header", BigEndian({0x803, 2}))).status().message(),
              HasSubstr("header: short read: the IDX header is cut off"));
  const std::string cut = Images().substr(0, Images().size() - 1);
  EXPECT_THAT(ReadIdxImages(Write("cut", cut)).status().message(),
              HasSubstr("cut: short read: the header declares [2,2,3] (12 bytes of data), the "
                        "file holds 11"));
  EXPECT_THAT(ReadIdxLabels(Write("long", Labels() + "x")).status().message(),
              HasSubstr("long: 1 bytes after the [2] data"));
  EXPECT_EQ(ReadIdxLabels((dir_ / "absent").string()).status().code(), absl::StatusCode::kNotFound);
  const std::string three = Write("three", BigEndian({0x801, 3}) + std::string("\1\2\3", 3));
  EXPECT_THAT(ReadIdxDataset(Write("i", Images()), three).status().message(),
              HasSubstr("holds 2 images but"));
}

// Found by fuzz-tensor-file: uint8 dims [2^62, 2, 0] fit the byte count (uint64) but overflowed
// int64 in the element count before the zero made the tensor empty: undefined behaviour that
// tools/sanitize (UBSan) reports; a plain build wraps and shows nothing.
TEST_F(DataReadersTest, ATensorFileWithAZeroDimIsEmptyWhateverItsOtherDims) {
  onnx::TensorProto proto;
  proto.set_data_type(onnx::TensorProto::UINT8);
  for (int64_t d : {int64_t{1} << 62, int64_t{2}, int64_t{0}}) proto.add_dims(d);
  absl::StatusOr<Tensor> tensor = ReadTensorProtoFile(Write("empty.pb", proto.SerializeAsString()));
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_EQ(tensor->size(), 0);
  EXPECT_EQ(ElementCount(Shape{int64_t{1} << 62, 2, 0}), 0);
}

TEST(FashionMnistTest, TheTestSetHas10000ImagesAndStartsWithAnAnkleBoot) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir + "/t10k-images-idx3-ubyte.gz")) GTEST_SKIP() << dir << " is missing";
  auto data =
      ReadIdxDataset(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz");
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->images.shape(), (Shape{10000, 28, 28}));
  EXPECT_EQ(data->labels.data<int64_t>()[0], 9);  // class 9: ankle boot (the dataset's README)
  const std::vector<int64_t> labels = Values<int64_t>(data->labels);
  for (int c = 0; c < 10; ++c) EXPECT_EQ(std::count(labels.begin(), labels.end(), c), 1000);
}

TEST_F(DataReadersTest, ReadsNpyDatasetsAndWidensIntegerLabels) {
  Tensor images = testing::Floats({2, 2}, {0, 0.5f, 1, 0.25f});
  Tensor labels = testing::Make<int32_t>(DType::kInt32, {2}, {4, 1});
  auto data = ReadNpyDataset(Write("x.npy", EncodeNpy(images)), Write("y.npy", EncodeNpy(labels)));
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_THAT(Values<int64_t>(data->labels), ::testing::ElementsAre(4, 1));
  auto bad = ReadNpyDataset(Write("x.npy", EncodeNpy(images)), Write("f.npy", EncodeNpy(images)));
  EXPECT_THAT(bad.status().message(), HasSubstr("f.npy"));
}

// ONNX TensorProto bytes written out by hand from the protobuf encoding (tag = field << 3 | wire
// type): dims (1, varint), data_type (2, varint), raw_data (9, bytes) or packed int64_data (7).
std::string Varint(uint64_t v) {
  std::string bytes;
  for (; v >= 0x80; v >>= 7) bytes.push_back(static_cast<char>((v & 0x7f) | 0x80));
  bytes.push_back(static_cast<char>(v));
  return bytes;
}

std::string PbTensor(int data_type, const std::vector<int64_t>& dims, const std::string& raw) {
  std::string bytes;
  for (int64_t d : dims) bytes += "\x08" + Varint(static_cast<uint64_t>(d));
  bytes += "\x10" + Varint(static_cast<uint64_t>(data_type));
  return bytes + "\x4a" + Varint(raw.size()) + raw;
}

std::string PbInt64s(const std::vector<int64_t>& values) {
  std::string packed;
  for (int64_t v : values) packed += Varint(static_cast<uint64_t>(v));
  return "\x08" + Varint(values.size()) + "\x10\x07" + "\x3a" + Varint(packed.size()) + packed;
}

template <typename T>
std::string LittleEndian(const std::vector<T>& values) {
  std::string bytes;
  for (T v : values) {
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    for (size_t i = 0; i < sizeof(T); ++i) bytes.push_back(static_cast<char>(bits >> (8 * i)));
  }
  return bytes;
}

constexpr int kPbFloat = 1, kPbUint8 = 2, kPbInt32 = 6;

TEST_F(DataReadersTest, ReadsPbDatasetsOfRawAndTypedData) {
  const std::string images =
      Write("x.pb", PbTensor(kPbFloat, {2, 2}, LittleEndian<float>({0, 0.5f, 1, 0.25f})));
  auto data = ReadPbDataset(images, Write("y.pb", PbInt64s({4, 1})));
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->images.shape(), (Shape{2, 2}));
  EXPECT_THAT(Values<float>(data->images), ::testing::ElementsAre(0, 0.5f, 1, 0.25f));
  EXPECT_THAT(Values<int64_t>(data->labels), ::testing::ElementsAre(4, 1));
  // uint8 pixels and int32 labels, as the npy reader takes them.
  auto bytes = ReadPbDataset(
      Write("b.pb", PbTensor(kPbUint8, {2, 3}, std::string("\x00\x10\x20\x30\x40\xff", 6))),
      Write("l.pb", PbTensor(kPbInt32, {2}, LittleEndian<int32_t>({9, 0}))));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(Values<uint8_t>(bytes->images)[5], 255);
  EXPECT_THAT(Values<int64_t>(bytes->labels), ::testing::ElementsAre(9, 0));
}

TEST_F(DataReadersTest, PbErrorsNameTheFileAndTheProblem) {
  const std::string labels = Write("y.pb", PbInt64s({4, 1}));
  const std::string full = PbTensor(kPbFloat, {2, 2}, LittleEndian<float>({0, 0.5f, 1, 0.25f}));
  auto read = [&](const std::string& name, const std::string& bytes) {
    return std::string(ReadPbDataset(Write(name, bytes), labels).status().message());
  };
  EXPECT_THAT(read("cut.pb", full.substr(0, full.size() - 3)),
              HasSubstr("cut.pb: not a TensorProto"));
  EXPECT_THAT(read("junk.pb", "\xff\xff\xff\xff"), HasSubstr("junk.pb: not a TensorProto"));
  EXPECT_THAT(read("short.pb", PbTensor(kPbFloat, {2, 2}, LittleEndian<float>({0, 1, 2}))),
              HasSubstr("short.pb: tensor '': shape [2,2] needs 16 bytes of data, it has 12"));
  // 4 bytes x 2^62 does not fit in 64 bits (the byte count used to wrap to 0).
  EXPECT_THAT(read("huge.pb", PbTensor(kPbFloat, {int64_t{1} << 62}, "")),
              HasSubstr("huge.pb: tensor '': shape [4611686018427387904] is too large to hold"));
  EXPECT_THAT(read("ints.pb", PbTensor(kPbInt32, {2, 1}, LittleEndian<int32_t>({1, 2}))),
              HasSubstr("ints.pb: images must be uint8 or float32, not int32"));
  EXPECT_THAT(read("three.pb", PbTensor(kPbFloat, {3, 1}, LittleEndian<float>({1, 2, 3}))),
              HasSubstr("three.pb holds 3 images but"));
  EXPECT_THAT(ReadPbDataset(Write("x.pb", full),
                            Write("f.pb", PbTensor(kPbFloat, {2}, LittleEndian<float>({4, 1}))))
                  .status()
                  .message(),
              HasSubstr("f.pb: labels must be integers, not float32"));
  EXPECT_EQ(ReadPbDataset((dir_ / "absent.pb").string(), labels).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(DataReadersTest, PbDirHasTheNpyLayoutAndBatchesCheckTheModelsSampleShape) {
  const std::string images = PbTensor(kPbFloat, {2, 3}, LittleEndian<float>({0, 1, 2, 3, 4, 5}));
  Write("train-images.pb", images);
  Write("train-labels.pb", PbInt64s({1, 0}));
  Write("test-images.pb", images);
  auto missing = LoadData("pb:" + dir_.string());
  EXPECT_THAT(missing.status().message(), HasSubstr("test-labels.pb: cannot open"));
  Write("test-labels.pb", PbInt64s({0, 1}));
  auto splits = LoadData("pb:" + dir_.string());
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->description, "pb (" + dir_.string() + "): 2 train, 2 test");
  const std::vector<int64_t> indices = {1};
  EXPECT_THAT(MakeBatch(splits->train, indices, {784}).status().message(),
              HasSubstr("takes samples of [784]; the data has 3 values per sample"));
}

// Training on NaN poisons the weights (with loss scaling: skips every step), so it is refused.
TEST_F(DataReadersTest, NonFiniteNpyImagesAreRefusedNamingTheSample) {
  const std::string labels =
      Write("y.npy", EncodeNpy(testing::Make<int32_t>(DType::kInt32, {2}, {4, 1})));
  auto nan = ReadNpyDataset(
      Write("x.npy", EncodeNpy(testing::Floats({2, 2}, {0, 0.5f, 1, std::nanf("")}))), labels);
  EXPECT_THAT(nan.status().message(),
              HasSubstr("x.npy: sample 1 holds NaN (element 3); ampc train needs finite data"));
  auto inf = ReadNpyDataset(
      Write("i.npy", EncodeNpy(testing::Floats({2, 2}, {-INFINITY, 0.5f, 1, 0}))), labels);
  EXPECT_THAT(inf.status().message(), HasSubstr("i.npy: sample 0 holds an infinite value"));
}

TEST_F(DataReadersTest, BatchesScaleBytesToUnitRangeAndTakeTheModelsSampleShape) {
  auto data = ReadIdxDataset(Write("i", Images()), Write("l", Labels()));
  ASSERT_TRUE(data.ok());
  const std::vector<int64_t> indices = {1, 0};
  auto flat = MakeBatch(*data, indices, {6});
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->images.shape(), (Shape{2, 6}));
  EXPECT_EQ(Values<float>(flat->images)[0], 6 / 255.0f);
  EXPECT_EQ(Values<float>(flat->images)[6], 0.0f);
  EXPECT_THAT(Values<int64_t>(flat->labels), ::testing::ElementsAre(3, 7));
  auto image = MakeBatch(*data, indices, {1, 2, 3});
  ASSERT_TRUE(image.ok());
  EXPECT_EQ(image->images.shape(), (Shape{2, 1, 2, 3}));
  EXPECT_THAT(MakeBatch(*data, indices, {784}).status().message(),
              HasSubstr("takes samples of [784]; the data has 6 values per sample"));
}

TEST(EpochOrderTest, IsASeededPermutationThatChangesPerEpoch) {
  const std::vector<int64_t> e0 = EpochOrder(100, 7, 0), e1 = EpochOrder(100, 7, 1);
  std::vector<int64_t> sorted = e1;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 100; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_NE(e0, e1);
  EXPECT_EQ(e1, EpochOrder(100, 7, 1));
  EXPECT_NE(e0, EpochOrder(100, 8, 0));
  // The documented algorithm, written out: one engine, Fisher-Yates with engine() % (i + 1).
  std::mt19937_64 engine(7);
  std::vector<int64_t> expected(100);
  for (int i = 0; i < 100; ++i) expected[i] = i;
  for (int e = 0; e < 2; ++e) {
    for (int64_t i = 99; i > 0; --i) std::swap(expected[i], expected[engine() % (i + 1)]);
  }
  EXPECT_EQ(e1, expected);
}

TEST(SyntheticDataTest, IsDeterministicInTheSeedAndInUnitRange) {
  const Dataset a = SyntheticDataset(50, 3), b = SyntheticDataset(50, 3);
  EXPECT_EQ(a.images.shape(), (Shape{50, 28, 28}));
  EXPECT_EQ(Values<float>(a.images), Values<float>(b.images));
  EXPECT_EQ(Values<int64_t>(a.labels), Values<int64_t>(b.labels));
  for (float v : Values<float>(a.images)) ASSERT_TRUE(v >= 0 && v <= 1);
  for (int64_t label : Values<int64_t>(a.labels)) ASSERT_TRUE(label >= 0 && label < 10);
}

}  // namespace
}  // namespace ampc

namespace ampc {
namespace {

// The by-name layout: DIR/{train,test}/INPUT_NAME.npy, any integer or float dtype and shape.
TEST_F(DataReadersTest, NpyDirWithSplitFoldersFeedsColumnsByName) {
  fs::create_directories(dir_ / "train");
  fs::create_directories(dir_ / "test");
  Write("train/input_ids.npy",
        EncodeNpy(testing::Make<int32_t>(DType::kInt32, {2, 3}, {1, 2, 3, 4, 5, 6})));
  Write("train/labels.npy", EncodeNpy(testing::Int64s({2}, {0, 1})));
  Write("test/input_ids.npy", EncodeNpy(testing::Make<int32_t>(DType::kInt32, {1, 3}, {7, 8, 9})));
  Write("test/labels.npy", EncodeNpy(testing::Int64s({1}, {1})));
  absl::StatusOr<DataSplits> data = LoadData("npy:" + dir_.string());
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_TRUE(data->train.by_name());
  EXPECT_EQ(data->train.size(), 2);
  EXPECT_EQ(data->test.size(), 1);
  const Column* ids = data->train.Find("input_ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->values.dtype(), DType::kInt32);
  EXPECT_EQ(ids->values.data<int32_t>()[5], 6);
  EXPECT_NE(data->train.Find("labels"), nullptr);
  EXPECT_EQ(data->files.size(), 4u);
}

TEST_F(DataReadersTest, ColumnsOfDifferentCountsAreAnErrorNamingBothFiles) {
  fs::create_directories(dir_ / "train");
  Write("train/a.npy", EncodeNpy(testing::Int64s({2}, {0, 1})));
  Write("train/b.npy", EncodeNpy(testing::Int64s({3}, {0, 1, 2})));
  absl::StatusOr<DataSplits> data = LoadData("npy:" + dir_.string());
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(data.status().message(), ::testing::HasSubstr("b.npy: holds 3 samples"));
  EXPECT_THAT(data.status().message(), ::testing::HasSubstr("a.npy holds 2"));
}

}  // namespace
}  // namespace ampc
