// The `ampc` binary against a hostile or careless user (docs/errors.md): no save removes a file
// the run reads or names, no read leaves the model's folder, no path argument crashes or hangs
// the process, data files are checked before they are read, and the run-time limits hold. Each
// test is named after the defect it pins; every command runs under `timeout`, so a hang fails.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/mlp.h"
#include "tests/support/model_text.h"
#include "tests/support/subprocess.h"
#include "tests/support/training_models.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kTimeout[] = "120";  // seconds; a hang ends as exit 124

class SafetyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ampc-safety-XXXXXX";
    dir_ = mkdtemp(pattern);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  testing::ProcessResult Ampc(std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/timeout", kTimeout, AMPC_BINARY});
    return testing::RunProcess(args, dir_.string());
  }
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = Path(name);
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  std::string WriteModel(const std::string& name, const onnx::ModelProto& model) {
    return Write(name, model.SerializeAsString());
  }
  std::string TrainingModel(const std::string& name) {
    return WriteModel(name, testing::SoftmaxRegressionTrainingModel());
  }
  std::vector<std::string> Train(const std::string& model) {
    return {"train",    model, "--data", "synthetic:64", "--batch",  "32",
            "--epochs", "1",   "--lr",   "0.5",          "--device", "cpu"};
  }
  // A failed run: one "ampc: error:" line, which names `file`, and the code given.
  void ExpectOneError(const testing::ProcessResult& r, int code, const std::string& file) {
    EXPECT_EQ(r.exit_code, code) << r.err;
    EXPECT_THAT(r.err, HasSubstr("ampc: error: "));
    EXPECT_THAT(r.err, HasSubstr(file));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }

  fs::path dir_;
};

// Points `tensor` at `length` bytes of `location` from `offset`, its own data dropped.
void MakeExternal(onnx::TensorProto& tensor, const std::string& location, const std::string& offset,
                  const std::string& length) {
  tensor.clear_float_data();
  tensor.clear_raw_data();
  tensor.set_data_location(onnx::TensorProto::EXTERNAL);
  for (const auto& [key, value] :
       {std::pair{"location", location}, {"offset", offset}, {"length", length}}) {
    onnx::StringStringEntryProto* entry = tensor.add_external_data();
    entry->set_key(key);
    entry->set_value(value);
  }
}

// The softmax-regression training model with its bias b in external data `location`.
onnx::ModelProto TrainingModelWithExternalBias(const std::string& location) {
  onnx::ModelProto model = testing::SoftmaxRegressionTrainingModel();
  MakeExternal(*model.mutable_graph()->mutable_initializer(1), location, "0", "40");
  return model;
}

// The commands that load a model, `model` and writing to `out` where they write.
std::vector<std::vector<std::string>> LoadingCommands(const std::string& model,
                                                      const std::string& out,
                                                      const std::string& input) {
  return {
      {"print", model}, {model, "-o", out}, {"explain", model}, {"run", model, "--input", input}};
}

// y = x + w, w float[4] in external data at `location` (offset 0).
onnx::ModelProto ExternalDataModel(const std::string& location, const std::string& offset2 = "") {
  onnx::ModelProto model = testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[4] x) => (float[4] y) <float[4] w = {0, 0, 0, 0}, float[4] v = {0, 0, 0, 0}> {
  s = Add(x, w)
  y = Add(s, v)
}
)");
  MakeExternal(*model.mutable_graph()->mutable_initializer(0), location, "0", "16");
  MakeExternal(*model.mutable_graph()->mutable_initializer(1), location,
               offset2.empty() ? "16" : offset2, "16");
  return model;
}

std::string Floats(int count, float value) {
  std::vector<float> values(count, value);
  return std::string(reinterpret_cast<const char*>(values.data()), count * sizeof(float));
}

std::string Npy(const std::string& descr, const std::string& shape, const std::string& data) {
  std::string header =
      absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header.push_back('\n');
  return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header +
         data;
}

// ---------------------------------------------------------------------------------------------
// 1. A save never removes a file the run reads or names.

TEST_F(SafetyTest, SaveKeepsTheInputModelNamedLikeItsDataFile) {
  const std::string input = WriteModel("out.onnx.data", models::BuildMlp());
  const std::string bytes = testing::ReadFileOrEmpty(input);
  auto r = Ampc({input, "-o", Path("out.onnx")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::ReadFileOrEmpty(input), bytes);
  // With external data the save must choose another data file name.
  r = Ampc({input, "-o", Path("out.onnx"), "--external-data=always"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::ReadFileOrEmpty(input), bytes);
  EXPECT_TRUE(fs::exists(Path("out.onnx.alt.data")));
}

TEST_F(SafetyTest, ExtractStepAndTrainSaveKeepTheInputNamedLikeTheirDataFile) {
  const std::string step_input = TrainingModel("step.onnx.data");
  const std::string bytes = testing::ReadFileOrEmpty(step_input);
  auto r = Ampc({"extract-step", step_input, "-o", Path("step.onnx")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::ReadFileOrEmpty(step_input), bytes);

  const std::string train_input = TrainingModel("save.onnx.data");
  std::vector<std::string> args = Train(train_input);
  args.insert(args.end(), {"--save", Path("save.onnx")});
  r = Ampc(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::ReadFileOrEmpty(train_input), bytes);
}

TEST_F(SafetyTest, SaveKeepsAPolicyFileNamedLikeItsDataFile) {
  const std::string model = WriteModel("m.onnx", models::BuildMlp());
  const std::string policy = Write("out.onnx.data", R"({"version": 1, "ops": {}})");
  auto r = Ampc({model, "-o", Path("out.onnx"), "--policy", policy});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::ReadFileOrEmpty(policy), R"({"version": 1, "ops": {}})");
}

TEST_F(SafetyTest, SaveKeepsTheMetricsFileNamedLikeItsDataFile) {
  const std::string model = TrainingModel("m.onnx");
  std::vector<std::string> args = Train(model);
  args.insert(args.end(), {"--save", Path("save.onnx"), "--metrics", Path("save.onnx.data")});
  auto r = Ampc(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string metrics = testing::ReadFileOrEmpty(Path("save.onnx.data"));
  EXPECT_THAT(metrics, ::testing::StartsWith("step,loss,scale,grad_norm,skipped,lr\n"));
  EXPECT_THAT(metrics, ::testing::EndsWith(",0.5\n"));  // rows up to the last step
}

// ---------------------------------------------------------------------------------------------
// 2. External data is read only from inside the model's folder, after symlinks.

TEST_F(SafetyTest, ExternalDataThroughASymlinkOutOfTheFolderIsRefused) {
  Write("outside/secret.bin", Floats(8, 7.0f));
  fs::create_directories(Path("model/sub"));
  fs::create_symlink(Path("outside/secret.bin"), Path("model/w.bin"));
  fs::create_symlink(Path("outside"), Path("model/linked"));
  const std::string file_link = WriteModel("model/file.onnx", ExternalDataModel("w.bin"));
  const std::string dir_link = WriteModel("model/dir.onnx", ExternalDataModel("linked/secret.bin"));
  Write("x.npy", "");  // never read: the model is refused first
  for (const std::string& model : {file_link, dir_link}) {
    for (const auto& args : LoadingCommands(model, Path("model/out.onnx"), "x=" + Path("x.npy"))) {
      auto r = Ampc(args);
      ExpectOneError(r, 1, model);
      EXPECT_THAT(r.err, HasSubstr("outside the model's folder"));
      EXPECT_THAT(r.out, Not(HasSubstr("7")));
      EXPECT_FALSE(fs::exists(Path("model/out.onnx")));
    }
  }
}

TEST_F(SafetyTest, ResumingFromACheckpointWhoseDataLeadsOutsideIsRefused) {
  const onnx::ModelProto model = TrainingModelWithExternalBias("ckpt.onnx.data");
  Write("outside/b.bin", Floats(10, 1.0f));
  fs::create_directories(Path("run"));
  fs::create_symlink(Path("outside/b.bin"), Path("run/ckpt.onnx.data"));
  const std::string checkpoint = WriteModel("run/ckpt.onnx", model);
  std::vector<std::string> args = Train(TrainingModel("m.onnx"));
  args.insert(args.end(), {"--save", checkpoint, "--resume"});
  auto r = Ampc(args);
  ExpectOneError(r, 1, checkpoint);
  EXPECT_THAT(r.err, HasSubstr("outside the model's folder"));
}

TEST_F(SafetyTest, HubCacheLayoutWithLinksIntoBlobsIsRead) {
  // snapshots/x/model.onnx -> ../../blobs/m and snapshots/x/w.bin -> ../../blobs/w.
  Write("hub/blobs/w", Floats(8, 1.0f));
  WriteModel("hub/blobs/m", ExternalDataModel("w.bin"));
  fs::create_directories(Path("hub/snapshots/x"));
  fs::create_symlink("../../blobs/m", Path("hub/snapshots/x/model.onnx"));
  fs::create_symlink("../../blobs/w", Path("hub/snapshots/x/w.bin"));
  const std::string model = Path("hub/snapshots/x/model.onnx");
  const std::string x = Write("x.npy", Npy("<f4", "(4,)", Floats(4, 0.5f)));
  for (const auto& args : LoadingCommands(model, Path("out.onnx"), "x=" + x)) {
    auto r = Ampc(args);
    EXPECT_EQ(r.exit_code, 0) << absl::StrJoin(args, " ") << ": " << r.err;
  }
}

TEST_F(SafetyTest, ResumingKeepsTheDataAModelCopiedFromTheCheckpointReads) {
  const onnx::ModelProto model = TrainingModelWithExternalBias("ckpt.onnx.data");
  Write("ckpt.onnx.data", Floats(10, 0.0f));
  const std::string checkpoint = WriteModel("ckpt.onnx", model);
  const std::string base = WriteModel("base.onnx", model);  // `cp ckpt.onnx base.onnx`
  std::vector<std::string> args = Train(base);
  args[7] = "3";  // epochs: three saves, each inline, each cleaning up after the last
  args.insert(args.end(), {"--save", checkpoint, "--resume"});
  auto r = Ampc(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::ReadFileOrEmpty(Path("ckpt.onnx.data")), Floats(10, 0.0f));
  r = Ampc({"print", base});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// ---------------------------------------------------------------------------------------------
// 3, 4. Directories, FIFOs and devices in every path argument: one line, never an abort or a hang.

TEST_F(SafetyTest, EveryCommandRefusesDirectoriesFifosAndDevicesInEveryPathArgument) {
  const std::string model = WriteModel("m.onnx", models::BuildMlp());
  const std::string training = TrainingModel("t.onnx");
  for (const std::string ext : {".npy", ".pb"}) {
    fs::create_directories(Path("a_dir" + ext));
    ASSERT_EQ(::mkfifo(Path("a_fifo" + ext).c_str(), 0600), 0);
    fs::create_symlink("/dev/zero", Path("a_device" + ext));
  }
  for (const std::string kind : {"a_dir", "a_fifo", "a_device"}) {
    const std::string bad = Path(kind + std::string(".npy"));
    for (const std::string ext : {"npy", "pb"}) {  // --data npy:DIR and pb:DIR
      const std::string data_dir = Path(absl::StrCat(kind, "_data_", ext));
      fs::create_directories(data_dir);
      for (const char* part : {"train-images", "train-labels", "test-images", "test-labels"}) {
        fs::create_symlink(bad, absl::StrCat(data_dir, "/", part, ".", ext));
      }
    }
    const std::string mnist = Path(kind + std::string("_mnist"));
    fs::create_directories(mnist);
    for (const char* part : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}) {
      fs::create_symlink(bad, absl::StrCat(mnist, "/", part));
    }
    std::vector<std::string> with_data_npy = Train(training), with_data_pb = Train(training),
                             with_mnist = Train(training);
    with_data_npy[3] = "npy:" + Path(absl::StrCat(kind, "_data_npy"));
    with_data_pb[3] = "pb:" + Path(absl::StrCat(kind, "_data_pb"));
    with_mnist[3] = "mnist:" + mnist;
    std::vector<std::string> resume = Train(training);
    resume.insert(resume.end(), {"--save", bad, "--resume"});
    const std::vector<std::vector<std::string>> cases = {
        {bad, "-o", Path("out.onnx")},
        {"print", bad},
        {"explain", bad},
        {"run", bad},
        {"extract-step", bad, "-o", Path("out.onnx")},
        {"train", bad, "--data", "synthetic:64"},
        {"run", model, "--input", "image=" + bad},
        {"run", model, "--input", "image=" + bad.substr(0, bad.size() - 3) + "pb"},
        {model, "-o", Path("out.onnx"), "--policy", bad},
        {model, "-o", Path("out.onnx"), "--train", "--loss", "loss", "--train-config", bad},
        with_data_npy,
        with_data_pb,
        with_mnist,
        resume,
    };
    std::vector<std::vector<std::string>> all = cases;
    if (kind == "a_dir") {  // metrics are written in place: to a pipe or device if asked
      std::vector<std::string> metrics = Train(training);
      metrics.insert(metrics.end(), {"--metrics", bad});
      all.push_back(metrics);
    }
    if (kind != "a_device") {  // a symlink as a destination is replaced, not written through
      all.push_back({model, "-o", bad});
      all.push_back({model, "-o", Path("out.onnx"), "--report", bad});
      all.push_back({"explain", model, "--report", bad});
    }
    for (const std::vector<std::string>& args : all) {
      auto r = Ampc(args);
      EXPECT_TRUE(r.exit_code >= 1 && r.exit_code <= 3)
          << absl::StrJoin(args, " ") << ": exit " << r.exit_code << "\n"
          << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << absl::StrJoin(args, " ") << "\n"
                                                                 << r.err;
      EXPECT_THAT(r.err, HasSubstr("ampc: error: ")) << absl::StrJoin(args, " ");
      EXPECT_FALSE(fs::exists(Path("out.onnx")));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 5. Data files: headers first, bounded reads, the data file named.

TEST_F(SafetyTest, AHugeNpyWithABadMagicIsRefusedUnreadNamingTheFile) {
  const std::string model = WriteModel("m.onnx", models::BuildMlp());
  const std::string big = Path("big.npy");
  { std::ofstream(big) << "not numpy"; }
  ASSERT_EQ(::truncate(big.c_str(), int64_t{3} << 30), 0);  // sparse: 3 GiB, no disk used
  const std::string command =
      absl::StrCat(testing::AddressSpaceLimit(1 << 20), "timeout ", kTimeout, " ", AMPC_BINARY,
                   " run ", model, " --input image=", big);
  auto r = testing::RunProcess({"/bin/sh", "-c", command}, dir_.string());
  ExpectOneError(r, 1, big + ": not a readable .npy file: bad magic");
}

std::string Gzip(const std::string& bytes) {
  uLongf size = compressBound(bytes.size()) + 64;
  std::string out(size, '\0');
  z_stream stream{};
  deflateInit2(&stream, 9, Z_DEFLATED, 31, 9, Z_DEFAULT_STRATEGY);  // 31: a gzip header
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(size);
  deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

std::string BigEndian(std::vector<uint32_t> words) {
  std::string out;
  for (uint32_t w : words) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(w >> shift));
  }
  return out;
}

TEST_F(SafetyTest, GzipDataIsReadNoFurtherThanItsHeaderDeclares) {
  const std::string model = TrainingModel("m.onnx");
  fs::create_directories(Path("bomb"));
  Write("bomb/train-labels-idx1-ubyte.gz", Gzip(BigEndian({0x801, 2}) + std::string(2, '\1')));
  // Declares 4 GiB of images in a few kB: more than deflate can expand to.
  Write("bomb/train-images-idx3-ubyte.gz",
        Gzip(BigEndian({0x803, 5'000'000, 28, 28}) + std::string(1 << 16, '\0')));
  auto r = Ampc({"train", model, "--data", "mnist:" + Path("bomb")});
  ExpectOneError(r, 1, Path("bomb/train-images-idx3-ubyte.gz"));
  EXPECT_THAT(r.err, HasSubstr("cannot hold that many"));
  // Declares 2 images, then 256 MiB of zeros (256 kB compressed): read no further than 2 images.
  Write("bomb/train-images-idx3-ubyte.gz",
        Gzip(BigEndian({0x803, 2, 28, 28}) + std::string(256 << 20, '\0')));
  const std::string command =
      absl::StrCat(testing::AddressSpaceLimit(1 << 20), "timeout ", kTimeout, " ", AMPC_BINARY,
                   " train ", model, " --data mnist:", Path("bomb"));
  r = testing::RunProcess({"/bin/sh", "-c", command}, dir_.string());
  ExpectOneError(r, 1, Path("bomb/train-images-idx3-ubyte.gz"));
  EXPECT_THAT(r.err, HasSubstr("bytes after the [2,28,28] data"));
  // 64 MiB of images that deflate really holds, but 10 labels: refused before the data is read.
  Write("bomb/train-images-idx3-ubyte.gz",
        Gzip(BigEndian({0x803, 85'000, 28, 28}) + std::string(85'000 * 784, '\0')));
  Write("bomb/train-labels-idx1-ubyte.gz", Gzip(BigEndian({0x801, 10}) + std::string(10, '\1')));
  r = Ampc({"train", model, "--data", "mnist:" + Path("bomb")});
  ExpectOneError(r, 1, "train-images-idx3-ubyte.gz holds 85000 images but");
}

// ---------------------------------------------------------------------------------------------
// 6. Function expansion is linear and bounded.

TEST_F(SafetyTest, FunctionsCallingEachOtherTwiceAreBoundedNotExponential) {
  // f0 calls f1 twice, ..., f28 calls f29 twice: 2^30 nodes once expanded, from 3 kB.
  std::string text = R"(<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
g (float[2] x) => (float[2] y) { y = local.f0(x) }
)";
  for (int i = 0; i < 30; ++i) {
    const std::string body =
        i == 29 ? "y = Neg(x)"
                : absl::StrCat("a = local.f", i + 1, "(x)\n  y = local.f", i + 1, "(a)");
    absl::StrAppend(&text, "<domain: \"local\", opset_import: [\"\" : 17, \"local\" : 1]>\nf", i,
                    " (x) => (y) {\n  ", body, "\n}\n");
  }
  const std::string model = WriteModel("nested.onnx", testing::ParseModelText(text));
  Write("x.npy", "");
  for (std::vector<std::string> args : {std::vector<std::string>{model, "-o", Path("out.onnx")},
                                        {"run", model, "--input", "x=" + Path("x.npy")}}) {
    auto r = Ampc(args);
    ExpectOneError(r, 1, model);
    EXPECT_THAT(r.err, HasSubstr("nodes once its function calls are expanded; ampc expands at "
                                 "most 10000000"));
  }
}

// ---------------------------------------------------------------------------------------------
// 7. Run-time limits: one line naming the node and the limit.

TEST_F(SafetyTest, RunLimitsNameTheNodeAndTheLimit) {
  const std::string fill = WriteModel("fill.onnx", testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (int64[1] shape) => (float[N] y) { y = ConstantOfShape <value = float[1] {1}> (shape) }
)"));
  // As numpy.save(name, numpy.array([value])) writes it.
  auto npy_of = [&](const std::string& name, int64_t value) {
    return Write(name, Npy("<i8", "(1,)", std::string(reinterpret_cast<const char*>(&value), 8)));
  };
  const std::string big = npy_of("big.npy", 1'500'000'000);
  auto r = Ampc({"run", fill, "--input", "shape=" + big, "--max-tensor-bytes=1G"});
  ExpectOneError(r, 1, "ConstantOfShape");
  EXPECT_THAT(r.err, HasSubstr("of 6000000000 bytes is over the limit of 1073741824 bytes per "
                               "tensor (--max-tensor-bytes)"));
  // 4 TB: over the defaults, named rather than "out of memory".
  r = Ampc({"run", fill, "--input", "shape=" + npy_of("huge.npy", 1'000'000'000'000)});
  ExpectOneError(r, 1, "ConstantOfShape");
  EXPECT_THAT(r.err, HasSubstr("(--max-tensor-bytes)"));
  r = Ampc({"run", fill, "--input", "shape=" + npy_of("mid.npy", 1'000'000), "--max-memory=1M"});
  ExpectOneError(r, 1, "ConstantOfShape");
  EXPECT_THAT(r.err, HasSubstr("(--max-memory)"));
  r = Ampc({"run", fill, "--input", "shape=" + big, "--max-memory=lots"});
  ExpectOneError(r, 2, "--max-memory=lots");
}

TEST_F(SafetyTest, LoopsThatWouldRunForeverStopAtTheIterationLimit) {
  onnx::ModelProto trip = testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1] x) => (float[1] y) {
  M = Constant <value = int64 {4611686018427387904}> ()
  c = Constant <value = bool {1}> ()
  y = Loop (M, c, x) <body = b (int64 i, bool cin, float[1] v) => (bool cout, float[1] w) {
    cout = Identity(cin)
    w = Identity(v)
  }>
}
)");
  onnx::ModelProto forever = trip;  // no trip count, and a condition that stays true
  forever.mutable_graph()->mutable_node(2)->set_input(0, "");
  const std::string x = Write("x.npy", Npy("<f4", "(1,)", Floats(1, 1.0f)));
  for (const auto& [name, proto, words] :
       {std::tuple{"trip.onnx", trip, "of its trip count 4611686018427387904"},
        {"forever.onnx", forever, "(no trip count)"}}) {
    const std::string model = WriteModel(name, proto);
    auto r = Ampc({"run", model, "--input", "x=" + x, "--max-loop-iterations=1000"});
    ExpectOneError(r, 1, "Loop");
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat("ran 1000 iterations ", words)));
    EXPECT_THAT(r.err, HasSubstr("the limit is 1000 (--max-loop-iterations)"));
  }
}

TEST_F(SafetyTest, OverlappingExternalDataIsRefusedByEveryCommand) {
  Write("w.bin", Floats(8, 1.0f));
  const std::string model = WriteModel("m.onnx", ExternalDataModel("w.bin", "8"));
  Write("x.npy", "");
  for (const auto& args : LoadingCommands(model, Path("out.onnx"), "x=" + Path("x.npy"))) {
    auto r = Ampc(args);
    ExpectOneError(r, 1, model);
    EXPECT_THAT(r.err, HasSubstr("external data bytes 8..24 of 'w.bin' overlap those of"));
  }
}

// ---------------------------------------------------------------------------------------------
// 8. explain escapes names.

TEST_F(SafetyTest, ExplainEscapesNodeNames) {
  onnx::ModelProto model = models::BuildMlp();
  model.mutable_graph()->mutable_node(0)->set_name("a\nampc: error: forged\x1b[31m\xe2\x80\xae");
  auto r = Ampc({"explain", WriteModel("m.onnx", model)});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("\nampc: error: forged")));
  EXPECT_THAT(r.out, Not(HasSubstr("\x1b")));
  EXPECT_THAT(r.out, Not(HasSubstr("\xe2\x80\xae")));
  EXPECT_THAT(r.out, HasSubstr("a\\nampc: error: forged\\x1b[31m\\u202e"));
}

// ---------------------------------------------------------------------------------------------
// 9. Messages that said the wrong thing.

TEST_F(SafetyTest, LabelsAreCheckedAgainstTheClassesAsTheDataLoads) {
  const std::string model = TrainingModel("m.onnx");
  auto data = [&](const std::string& dir, const std::string& labels) {
    Write(dir + "/train-images.npy", Npy("<f4", "(2, 784)", Floats(2 * 784, 0.5f)));
    Write(dir + "/test-images.npy", Npy("<f4", "(2, 784)", Floats(2 * 784, 0.5f)));
    Write(dir + "/train-labels.npy", labels);
    Write(dir + "/test-labels.npy", Npy("<i8", "(2,)", std::string(16, '\0')));
    return "npy:" + Path(dir);
  };
  int64_t twelve[] = {3, 12};
  std::vector<std::string> args = Train(model);
  args[3] = data("twelve", Npy("<i8", "(2,)", std::string(reinterpret_cast<char*>(twelve), 16)));
  args[5] = "2";
  auto r = Ampc(args);
  ExpectOneError(r, 1,
                 Path("twelve/train-labels.npy") +
                     ": sample 1 has label 12; the model has "
                     "10 classes");
  EXPECT_EQ(r.out, "");

  args[3] = data("u64", Npy("<u8", "(2,)", std::string(8, '\0') + std::string(8, '\xff')));
  r = Ampc(args);
  ExpectOneError(r, 1, Path("u64/train-labels.npy") + ": sample 1 has label 18446744073709551615");

  Write("empty/train-images.npy", Npy("<f4", "(0, 784)", ""));
  Write("empty/train-labels.npy", Npy("<i8", "(0,)", ""));
  Write("empty/test-images.npy", Npy("<f4", "(0, 784)", ""));
  Write("empty/test-labels.npy", Npy("<i8", "(0,)", ""));
  args[3] = "npy:" + Path("empty");
  r = Ampc(args);
  ExpectOneError(r, 1, Path("empty/train-images.npy") + ": holds no samples");
}

TEST_F(SafetyTest, UsageMistakesAreNamedAsSuch) {
  const std::string model = WriteModel("m.onnx", models::BuildMlp());
  const std::string training = TrainingModel("t.onnx");
  auto r = Ampc({"run", model, "--threads", "100000"});
  ExpectOneError(r, 2, "--threads must be 0 (one per core) to 1024, not 100000");
  std::vector<std::string> args = Train(training);
  args.insert(args.end(), {"--save", Path("s.onnx"), "--metrics", Path("s.onnx")});
  r = Ampc(args);
  ExpectOneError(r, 2, "is --save");
  const std::string x = Write("x.npy", Npy("<f4", "(1, 784)", Floats(784, 0)));
  r = Ampc({"run", model, "--input", "image=" + x, "--input", "image=" + x});
  ExpectOneError(r, 2, "--input image is given twice");
}

TEST_F(SafetyTest, ADirectoryNamedLikeTheDataFileIsRefusedBeforeAnyWork) {
  fs::create_directories(Path("out.onnx.data"));
  const std::string bad = Write("bad.onnx", "not a model");  // work would fail with exit 1
  auto r = Ampc({bad, "-o", Path("out.onnx")});
  ExpectOneError(r, 3, Path("out.onnx.data") + ": cannot write: a directory");
  std::vector<std::string> args = Train(bad);
  args.insert(args.end(), {"--save", Path("out.onnx")});
  r = Ampc(args);
  ExpectOneError(r, 3, Path("out.onnx.data") + ": cannot write: a directory");
}

TEST_F(SafetyTest, ExplainReportsTheTimeItTook) {
  const std::string model = WriteModel("m.onnx", models::BuildMlp());
  auto r = Ampc({"explain", model, "--report", Path("r.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string report = testing::ReadFileOrEmpty(Path("r.json"));
  const size_t at = report.find("\"seconds\": ");
  ASSERT_NE(at, std::string::npos) << report;
  double seconds = 0;
  ASSERT_TRUE(absl::SimpleAtod(report.substr(at + 11, report.find_first_of(",}\n", at) - at - 11),
                               &seconds));
  EXPECT_GT(seconds, 0) << report;  // any run takes some time; 0.0 was never measured
}

TEST_F(SafetyTest, AClosedStdoutIsAWriteErrorNotSigpipe) {
  std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[1] v0) => (float[1] v";
  absl::StrAppend(&text, 20'000, ") {\n");
  for (int i = 1; i <= 20'000; ++i) absl::StrAppend(&text, "  v", i, " = Relu(v", i - 1, ")\n");
  const std::string model = WriteModel("m.onnx", testing::ParseModelText(text + "}\n"));
  // Whether the reader is gone before ampc writes or after the pipe's 64 kB, print's text (over
  // 300 kB) meets a closed pipe.
  const std::string command = absl::StrCat(AMPC_BINARY, " print ", model, " 2>", Path("err"),
                                           " | (exec 0<&-; true); echo ${PIPESTATUS[0]}");
  auto r = testing::RunProcess({"/bin/bash", "-c", command}, dir_.string());
  EXPECT_EQ(r.out, "3\n");
  const std::string err = testing::ReadFileOrEmpty(Path("err"));
  EXPECT_EQ(err, "ampc: error: cannot write to standard output\n");
}

// ---------------------------------------------------------------------------------------------
// 10, 11.

TEST_F(SafetyTest, AGraphWithoutOutputsIsRefused) {
  onnx::ModelProto model = models::BuildMlp();
  model.mutable_graph()->clear_output();
  const std::string path = WriteModel("m.onnx", model);
  for (std::vector<std::string> args :
       {std::vector<std::string>{path, "-o", Path("out.onnx")}, {"run", path}}) {
    auto r = Ampc(args);
    ExpectOneError(r, 1, path + ": the graph declares no outputs");
    EXPECT_FALSE(fs::exists(Path("out.onnx")));
  }
}

TEST_F(SafetyTest, ABinaryFileNestedTooDeeplyReportsTheNestingLimit) {
  // graph { node { attribute { g { node { ... } } } } }, 300,000 messages deep, built backwards.
  std::string reversed;
  auto prepend = [&](uint32_t field, size_t length) {
    std::string head;
    head.push_back(static_cast<char>(field << 3 | 2));
    for (size_t v = length;; v >>= 7) {
      head.push_back(static_cast<char>((v & 0x7f) | (v >= 0x80 ? 0x80 : 0)));
      if (v < 0x80) break;
    }
    reversed.append(head.rbegin(), head.rend());
  };
  // From the inside out: GraphProto.node, AttributeProto.g, NodeProto.attribute.
  const uint32_t fields[] = {1, 6, 5};
  for (int level = 0; level < 100'000; ++level) {
    for (uint32_t field : fields) prepend(field, reversed.size());
  }
  prepend(1, reversed.size());  // the outermost graph's node
  prepend(7, reversed.size());  // ModelProto.graph
  const std::string path = Write("deep.onnx", std::string(reversed.rbegin(), reversed.rend()));
  auto r = Ampc({"print", path});
  ExpectOneError(r, 1, path + ": messages are nested more deeply than ampc reads");
}

}  // namespace
}  // namespace ampc
