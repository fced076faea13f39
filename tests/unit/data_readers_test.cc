// Data readers: IDX headers and their errors on hand-made files (raw and gzip), the real
// Fashion-MNIST test set, .npy datasets, the synthetic source, epoch order and batches.
#include "runtime/data_readers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

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
