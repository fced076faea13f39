// `ampc export-weights`: the trained FP32 weights of a training model as .npz and .safetensors,
// read back here by readers of this file's own (ZIP, .npy and safetensors headers parsed by hand)
// and compared with the model's initializers; the dynamo export's folded Linear weights under
// their PyTorch names; errors write nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "compiler/model_io.h"
#include "models/cnn.h"
#include "tests/support/subprocess.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct ReadTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};
using ReadWeights = std::map<std::string, ReadTensor>;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

uint64_t Le(const std::string& bytes, size_t at, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(bytes.at(at + i));
  return v;
}

std::vector<float> Floats(const std::string& bytes, size_t at, size_t count) {
  std::vector<float> values(count);
  if (count > 0) std::memcpy(values.data(), bytes.data() + at, count * sizeof(float));
  return values;
}

// A version 1.0 .npy of little-endian float32 in C order: "{'descr': '<f4', ..., 'shape': (..)}".
ReadTensor ParseNpy(const std::string& npy) {
  EXPECT_EQ(npy.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_size = Le(npy, 8, 2);
  const std::string header = npy.substr(10, header_size);
  EXPECT_EQ((10 + header_size) % 64, 0u) << header;
  EXPECT_THAT(header, HasSubstr("'descr': '<f4'"));
  EXPECT_THAT(header, HasSubstr("'fortran_order': False"));
  const size_t open = header.find("'shape': (") + 10;
  const std::string dims = header.substr(open, header.find(')', open) - open);
  ReadTensor t;
  size_t count = 1;
  std::stringstream in(dims);
  for (std::string d; std::getline(in, d, ',');) {
    if (d.find_first_not_of(' ') == std::string::npos) continue;
    t.shape.push_back(std::stoll(d));
    count *= t.shape.back();
  }
  EXPECT_EQ(npy.size(), 10 + header_size + count * 4);
  t.values = Floats(npy, 10 + header_size, count);
  return t;
}

// The end record, then every central directory entry and its local header: stored entries
// whose CRC-32 matches, NAME.npy each.
ReadWeights ReadNpz(const std::string& path) {
  const std::string zip = ReadFile(path);
  ReadWeights weights;
  const size_t end = zip.size() - 22;
  EXPECT_EQ(Le(zip, end, 4), 0x06054b50u);
  const uint64_t entries = Le(zip, end + 10, 2);
  size_t at = Le(zip, end + 16, 4);
  EXPECT_EQ(at + Le(zip, end + 12, 4), end);
  for (uint64_t i = 0; i < entries; ++i) {
    EXPECT_EQ(Le(zip, at, 4), 0x02014b50u);
    EXPECT_EQ(Le(zip, at + 10, 2), 0u) << "not stored";
    const uint64_t crc = Le(zip, at + 16, 4), size = Le(zip, at + 20, 4);
    EXPECT_EQ(Le(zip, at + 24, 4), size);
    const size_t name_size = Le(zip, at + 28, 2);
    const size_t extra = Le(zip, at + 30, 2) + Le(zip, at + 32, 2);
    const size_t local = Le(zip, at + 42, 4);
    const std::string name = zip.substr(at + 46, name_size);
    at += 46 + name_size + extra;
    EXPECT_EQ(Le(zip, local, 4), 0x04034b50u);
    EXPECT_EQ(zip.substr(local + 30, Le(zip, local + 26, 2)), name);
    const size_t data = local + 30 + Le(zip, local + 26, 2) + Le(zip, local + 28, 2);
    const std::string npy = zip.substr(data, size);
    EXPECT_EQ(crc32(0, reinterpret_cast<const Bytef*>(npy.data()), npy.size()), crc) << name;
    EXPECT_TRUE(name.ends_with(".npy")) << name;
    weights[name.substr(0, name.size() - 4)] = ParseNpy(npy);
  }
  return weights;
}

ReadWeights ReadSafetensors(const std::string& path) {
  const std::string file = ReadFile(path);
  const uint64_t header_size = Le(file, 0, 8);
  const nlohmann::json header = nlohmann::json::parse(file.substr(8, header_size));
  const size_t data = 8 + header_size;
  EXPECT_EQ(data % 8, 0u);
  ReadWeights weights;
  uint64_t covered = 0;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    EXPECT_EQ(entry.at("dtype"), "F32") << name;
    ReadTensor t;
    uint64_t count = 1;
    for (const auto& d : entry.at("shape")) {
      t.shape.push_back(d.get<int64_t>());
      count *= t.shape.back();
    }
    const uint64_t begin = entry.at("data_offsets")[0], stop = entry.at("data_offsets")[1];
    EXPECT_EQ(stop - begin, count * 4) << name;
    covered += stop - begin;
    t.values = Floats(file, data + begin, count);
    weights[name] = t;
  }
  EXPECT_EQ(data + covered, file.size());
  return weights;
}

ReadTensor FromInitializer(const onnx::TensorProto& t) {
  EXPECT_EQ(t.data_type(), onnx::TensorProto::FLOAT) << t.name();
  ReadTensor r{{t.dims().begin(), t.dims().end()}, {}};
  if (t.has_raw_data()) {
    r.values = Floats(t.raw_data(), 0, t.raw_data().size() / 4);
  } else {
    r.values.assign(t.float_data().begin(), t.float_data().end());
  }
  return r;
}

class ExportWeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ampc-export-weights-XXXXXX";
    dir_ = mkdtemp(pattern);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) { return (dir_ / name).string(); }
  testing::ProcessResult Ampc(std::vector<std::string> args) {
    args.insert(args.begin(), AMPC_BINARY);
    return testing::RunProcess(args, dir_.string());
  }
  // The bundled CNN (two Conv-BatchNormalization blocks) compiled by `ampc --train`, FP16.
  void CompileCnn(const std::vector<std::string>& flags) {
    absl::StatusOr<onnx::ModelProto> cnn = models::BuildCnn(models::CnnOptions{});
    ASSERT_TRUE(cnn.ok()) << cnn.status();
    std::ofstream(Path("cnn.onnx"), std::ios::binary) << cnn->SerializeAsString();
    std::vector<std::string> args = {Path("cnn.onnx"), "-o", Path("cnn.train.onnx"), "--train",
                                     "--loss=loss"};
    args.insert(args.end(), flags.begin(), flags.end());
    const testing::ProcessResult compiled = Ampc(args);
    ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  }
  onnx::ModelProto Load(const std::string& name) {
    absl::StatusOr<LoadedModel> loaded = LoadModel(Path(name));
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return loaded.ok() ? loaded->model : onnx::ModelProto();
  }
  std::set<std::string> Files() {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) names.insert(entry.path().filename());
    return names;
  }

  fs::path dir_;
};

void ExpectSame(const ReadWeights& got, const ReadWeights& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.contains(name)) << name;
    EXPECT_EQ(got.at(name).shape, t.shape) << name;
    EXPECT_EQ(got.at(name).values, t.values) << name;  // bit for bit: no rounding on the way
  }
}

TEST_F(ExportWeightsTest, TrainedParametersAndRunningStatisticsUnderTheirNames) {
  CompileCnn({});
  const testing::ProcessResult trained =
      Ampc({"train", Path("cnn.train.onnx"), "--data", "synthetic:64", "--batch", "16", "--epochs",
            "1", "--save", Path("trained.onnx")});
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  const onnx::ModelProto model = Load("trained.onnx");
  const onnx::ModelProto compiled = Load("cnn.train.onnx");

  // Every FP32 parameter and BatchNormalization statistic of the bundled CNN, as trained.
  ReadWeights want;
  for (const auto& t : model.graph().initializer()) want[t.name()] = FromInitializer(t);
  EXPECT_EQ(want.size(), 16u);
  EXPECT_TRUE(want.contains("block1.bn.running_mean"));
  EXPECT_TRUE(want.contains("fc2.weight"));
  int changed = 0;
  for (const auto& t : compiled.graph().initializer()) {
    changed += FromInitializer(t).values != want.at(t.name()).values ? 1 : 0;
  }
  EXPECT_GT(changed, 0) << "ampc train changed no weight";

  for (const char* file : {"w.npz", "w.safetensors"}) {
    const testing::ProcessResult r =
        Ampc({"export-weights", Path("trained.onnx"), "-o", Path(file)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr("wrote 16 FP32 weights to " + Path(file)));
  }
  ExpectSame(ReadNpz(Path("w.npz")), want);
  ExpectSame(ReadSafetensors(Path("w.safetensors")), want);
}

TEST_F(ExportWeightsTest, FrozenParametersAndOptimizerStateAreNotWritten) {
  CompileCnn({"--freeze=fc2\\..*", "--optimizer=adam"});
  const testing::ProcessResult r =
      Ampc({"export-weights", Path("cnn.train.onnx"), "-o", Path("w.npz")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const ReadWeights got = ReadNpz(Path("w.npz"));
  EXPECT_FALSE(got.contains("fc2.weight"));
  EXPECT_FALSE(got.contains("fc2.bias"));
  EXPECT_TRUE(got.contains("fc1.weight"));
  EXPECT_TRUE(got.contains("block2.bn.running_var"));
  for (const auto& [name, t] : got) EXPECT_EQ(name.find("ampc"), std::string::npos) << name;
}

// tests/fixtures/torch/bert.dynamo.onnx: the exporter folded each Linear's Transpose(W) into
// val_N; W itself is no initializer. Written back as W (checked against PyTorch's state_dict when
// the fixture was made: every such val_N equals the transposed weight).
TEST_F(ExportWeightsTest, FoldedLinearWeightsGoBackToTheirPyTorchNamesTransposed) {
  const std::string bert = std::string(AMPC_SOURCE_DIR) + "/tests/fixtures/torch/bert.dynamo.onnx";
  if (!fs::exists(bert)) GTEST_SKIP() << "no " << bert;
  const testing::ProcessResult compiled =
      Ampc({bert, "-o", Path("bert.train.onnx"), "--train", "--loss-op=cross_entropy:logits"});
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  const testing::ProcessResult r =
      Ampc({"export-weights", Path("bert.train.onnx"), "-o", Path("w.safetensors")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("(12 folded Linear weights under their PyTorch names"));
  const ReadWeights got = ReadSafetensors(Path("w.safetensors"));
  std::map<std::string, ReadTensor> inits;
  const onnx::ModelProto model = Load("bert.train.onnx");
  for (const auto& t : model.graph().initializer()) {
    if (t.data_type() == onnx::TensorProto::FLOAT) inits[t.name()] = FromInitializer(t);
  }
  const ReadTensor& folded = inits.at("val_122");  // intermediate.dense: W [64, 32], val W^T
  ASSERT_EQ(folded.shape, (std::vector<int64_t>{32, 64}));
  const std::string name = "model.bert.encoder.layer.0.intermediate.dense.weight";
  ASSERT_TRUE(got.contains(name));
  EXPECT_EQ(got.at(name).shape, (std::vector<int64_t>{64, 32}));
  for (int o = 0; o < 64; ++o) {
    for (int i = 0; i < 32; ++i) {
      ASSERT_EQ(got.at(name).values[o * 32 + i], folded.values[i * 64 + o]);
    }
  }
  EXPECT_FALSE(got.contains("val_122"));
  // Folded from several values (a Gather of the position embeddings): its own name, as it is.
  ASSERT_TRUE(got.contains("embedding_2"));
  EXPECT_EQ(got.at("embedding_2").values, inits.at("embedding_2").values);
  EXPECT_EQ(got.at("model.classifier.weight").values, inits.at("model.classifier.weight").values);
}

TEST_F(ExportWeightsTest, ErrorsNameTheFileAndWriteNothing) {
  CompileCnn({});
  const std::set<std::string> before = Files();
  struct Case {
    std::vector<std::string> args;
    int exit_code;
    std::string message;
  } cases[] = {
      {{"export-weights", Path("cnn.train.onnx"), "-o", Path("w.pt")},
       2,
       "w.pt: the name must end in .npz or .safetensors"},
      {{"export-weights", Path("cnn.train.onnx")}, 2, "needs -o FILE"},
      {{"export-weights", Path("cnn.train.onnx"), "-o", Path("w.npz"), "--dtype=bf16"},
       2,
       "--dtype does not apply to ampc export-weights"},
      {{"export-weights", Path("cnn.onnx"), "-o", Path("w.npz")},
       1,
       Path("cnn.onnx") + ": not a training model"},
      {{"export-weights", Path("missing.onnx"), "-o", Path("w.npz")}, 1, "missing.onnx"},
      {{"export-weights", Path("cnn.train.onnx"), "-o", Path("no/such/w.npz")},
       3,
       "no/such/w.npz: cannot write"},
  };
  for (const Case& c : cases) {
    const testing::ProcessResult r = Ampc(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args[1] << " " << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(Files(), before) << r.err;
  }
}

}  // namespace
}  // namespace ampc
