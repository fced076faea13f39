// `ampc run`: inputs from .pb and .npy files, outputs printed or written, and clear errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "compiler/model_io.h"
#include "tests/support/cuda_parity.h"
#include "tests/support/model_text.h"
#include "tests/support/subprocess.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// y = x * 2 + b, with b an initializer; x is float[2, 2].
constexpr char kModel[] = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 2] x) => (float[2, 2] y)
<float[2] b = {0.5, -1}, float two = {2}>
{
  d = Mul(x, two)
  y = Add(d, b)
}
)";

class RunCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ampc-run-XXXXXX";
    dir_ = mkdtemp(pattern);
    model_ = Write("m.onnx", testing::ParseModelText(kModel).SerializeAsString());
  }
  void TearDown() override { fs::remove_all(dir_); }

  testing::ProcessResult Ampc(std::vector<std::string> args) {
    args.insert(args.begin(), AMPC_BINARY);
    return testing::RunProcess(args, dir_.string());
  }
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  std::string WriteTensor(const std::string& name, std::vector<int64_t> dims,
                          std::vector<float> values) {
    onnx::TensorProto t;
    t.set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t.add_dims(d);
    for (float v : values) t.add_float_data(v);
    return Write(name, t.SerializeAsString());
  }

  fs::path dir_;
  std::string model_;
};

TEST_F(RunCommandTest, PrintsASummaryOfEachOutput) {
  const std::string x = WriteTensor("x.pb", {2, 2}, {1, 2, 3, 4});
  auto r = Ampc({"run", model_, "--input", "x=" + x});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // y = {2.5, 3, 6.5, 7}: min 2.5, max 7, mean 19 / 4.
  EXPECT_EQ(r.out, "y: float32[2,2] min 2.5 max 7 mean 4.75\n");
  // Peak: the two initializers, d and y, each in the CPU backend's smallest buffer (256 bytes).
  EXPECT_THAT(r.err, HasSubstr(model_ + ": ran on cpu in "));
  EXPECT_THAT(r.err, HasSubstr("; peak tensor memory 1.0 kB\n"));
}

TEST_F(RunCommandTest, WritesPbAndNpyToTheOutputDir) {
  const std::string x = WriteTensor("x.pb", {2, 2}, {1, 2, 3, 4});
  auto r = Ampc({"run", model_, "--input=x=" + x, "--output-dir", (dir_ / "out").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  onnx::TensorProto y;
  std::ifstream pb(dir_ / "out" / "y.pb", std::ios::binary);
  ASSERT_TRUE(y.ParseFromIstream(&pb));
  EXPECT_EQ(y.name(), "y");
  ASSERT_EQ(y.raw_data().size(), 16u);
  float values[4];
  std::memcpy(values, y.raw_data().data(), 16);
  EXPECT_THAT(values, ::testing::ElementsAre(2.5f, 3.0f, 6.5f, 7.0f));
  const std::string npy = testing::ReadFileOrEmpty((dir_ / "out" / "y.npy").string());
  ASSERT_EQ(npy.size(), 128u + 16u);  // magic, version and header pad to a multiple of 64
  EXPECT_EQ(npy.substr(0, 6), "\x93NUMPY");
  EXPECT_THAT(npy.substr(10, 118),
              HasSubstr("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }"));
  EXPECT_EQ(npy.substr(128), y.raw_data());
}

// Every file is written before any is renamed into place: a failure leaves none of them.
TEST_F(RunCommandTest, AnOutputFileThatCannotBeWrittenLeavesNoOther) {
  fs::create_directories(dir_ / "out" / "y.npy");  // y.pb can be written, y.npy cannot
  const std::string x = WriteTensor("x.pb", {2, 2}, {1, 2, 3, 4});
  auto r = Ampc({"run", model_, "--input", "x=" + x, "--output-dir", (dir_ / "out").string()});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("y.npy: cannot write: a directory"));
  EXPECT_FALSE(fs::exists(dir_ / "out" / "y.pb"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "out"), fs::directory_iterator{}), 1);
}

// The model, its inputs and the files --output-dir would write may coincide: inputs win.
TEST_F(RunCommandTest, OutputFilesNeverReplaceTheRunsInputs) {
  fs::create_directories(dir_ / "out");
  const std::string x = (dir_ / "out" / "y.pb").string();  // the file output y would take
  std::ofstream(x, std::ios::binary)
      << testing::ReadFileOrEmpty(WriteTensor("x.pb", {2, 2}, {1, 2, 3, 4}));
  const std::string before = testing::ReadFileOrEmpty(x);
  auto r = Ampc({"run", model_, "--input", "x=" + x, "--output-dir", (dir_ / "out").string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr(x + " is an input of this run"));
  EXPECT_EQ(testing::ReadFileOrEmpty(x), before);
  EXPECT_FALSE(fs::exists(dir_ / "out" / "y.npy"));
  fs::copy_file(model_, dir_ / "out" / "y.pb", fs::copy_options::overwrite_existing);
  const std::string model_bytes = testing::ReadFileOrEmpty(model_);
  r = Ampc({"run", (dir_ / "out" / "y.pb").string(), "--input",
            "x=" + WriteTensor("x2.pb", {2, 2}, {1, 2, 3, 4}), "--output-dir",
            (dir_ / "out").string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(testing::ReadFileOrEmpty((dir_ / "out" / "y.pb").string()), model_bytes);
}

// Output names that map to one file name, or that are too long for one, still give a file each.
TEST_F(RunCommandTest, EveryOutputGetsItsOwnFile) {
  onnx::ModelProto m = testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] p, float[2] q, float[2] r) {
  p = Neg(x)
  q = Abs(x)
  r = Identity(x)
}
)");
  const std::string names[] = {"a_b", "a/b", std::string(300, 'y')};  // the text cannot say a/b
  for (int i = 0; i < 3; ++i) {
    m.mutable_graph()->mutable_node(i)->set_output(0, names[i]);
    m.mutable_graph()->mutable_output(i)->set_name(names[i]);
  }
  const std::string model = Write("names.onnx", m.SerializeAsString());
  const std::string x = WriteTensor("x.pb", {2}, {1, -2});
  auto r = Ampc({"run", model, "--input", "x=" + x, "--output-dir", (dir_ / "out").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string expected[] = {"a_b", "a_b_1", std::string(200, 'y')};
  const std::vector<std::vector<float>> values = {{-1, 2}, {1, 2}, {1, -2}};
  for (int i = 0; i < 3; ++i) {
    onnx::TensorProto t;
    std::ifstream pb(dir_ / "out" / (expected[i] + ".pb"), std::ios::binary);
    ASSERT_TRUE(t.ParseFromIstream(&pb)) << expected[i];
    std::vector<float> got(2);
    std::memcpy(got.data(), t.raw_data().data(), 8);
    EXPECT_EQ(got, values[i]) << expected[i];
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "out"), fs::directory_iterator{}), 6);
}

// x = 200 everywhere and W1 = 100: h = x W1 = 4 * 200 * 100 = 80000, beyond float16's 65504, so
// the FP16 model's output is inf; in FP32 y = 80000 * 4 * 0.001 = 320.
constexpr char kOverflow[] = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 4] x) => (float[2, 2] y)
<float[4, 4] w1 = {100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100},
 float[4, 2] w2 = {0.001, 0.001, 0.001, 0.001, 0.001, 0.001, 0.001, 0.001}>
{
  h = MatMul(x, w1)
  r = Relu(h)
  y = MatMul(r, w2)
}
)";

TEST_F(RunCommandTest, FindNonFiniteNamesTheNodeThatOverflowsAndTheFlagThatHelps) {
  onnx::ModelProto model = testing::ParseModelText(kOverflow);
  const char* names[] = {"/fc1/MatMul", "/relu/Relu", "/fc2/MatMul"};
  for (int i = 0; i < 3; ++i) model.mutable_graph()->mutable_node(i)->set_name(names[i]);
  const std::string fp32 = Write("m.onnx", model.SerializeAsString());
  const std::string x = WriteTensor("x.pb", {2, 4}, std::vector<float>(8, 200));
  auto compile = [&](const std::string& out, const std::string& block) {
    auto r = Ampc({fp32, "-o", (dir_ / out).string(), "--block-node=" + block});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return (dir_ / out).string();
  };
  const std::string fp16 = compile("m16.onnx", "none");
  auto r = Ampc({"run", fp16, "--input", "x=" + x});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "y: float32[2,2] non-finite 4\n");
  EXPECT_THAT(r.err, HasSubstr("note: " + fp16 +
                               ": output 'y' holds inf or NaN; --find-nonfinite names the node"));
  r = Ampc({"run", fp16, "--input", "x=" + x, "--find-nonfinite"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr(fp16 + ": inf/NaN first appear in 'h' (float16, 8 inf and 0 NaN of "
                                      "8 elements), the output of node '/fc1/MatMul' (MatMul); "
                                      "float16's largest finite value is 65504; compiling with "
                                      "--block-node='/fc1/MatMul' keeps that node in FP32\n"));
  // Following the hint moves the overflow to the Cast that feeds /fc2/MatMul; the hint then
  // names the node that reads it, and following that too gives the FP32 result.
  const std::string blocked = compile("b.onnx", "/fc1/MatMul");
  r = Ampc({"run", blocked, "--input", "x=" + x, "--find-nonfinite"});
  EXPECT_THAT(r.err, HasSubstr("(Cast); float16's largest finite value is 65504; compiling with "
                               "--block-node='/fc2/MatMul' keeps the nodes that read it in FP32"));
  // A stale declaration (value_info of a value no node makes, or of the wrong shape) does not
  // hide a value from the rerun.
  absl::StatusOr<LoadedModel> compiled = LoadModel(fp16);
  ASSERT_TRUE(compiled.ok());
  onnx::ValueInfoProto* ghost = compiled->model.mutable_graph()->add_value_info();
  *ghost = compiled->model.graph().output(0);
  ghost->set_name("ghost");
  for (auto& value : *compiled->model.mutable_graph()->mutable_value_info()) {
    if (value.name() == "h")
      value.mutable_type()->mutable_tensor_type()->mutable_shape()->clear_dim();
  }
  auto* dims = compiled->model.mutable_graph()
                   ->mutable_output(0)
                   ->mutable_type()
                   ->mutable_tensor_type()
                   ->mutable_shape()
                   ->mutable_dim();
  dims->Mutable(0)->set_dim_value(3);  // y is [2, 2]; declared [3, 2]
  const std::string stale = Write("stale.onnx", compiled->model.SerializeAsString());
  r = Ampc({"run", stale, "--input", "x=" + x, "--find-nonfinite"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr(stale + ": inf/NaN first appear in 'h' (float16"));
  // Inputs that hold inf or NaN already explain the output: no rerun.
  std::vector<float> nan_x(8, 200);
  nan_x[3] = NAN;
  r = Ampc(
      {"run", fp16, "--input", "x=" + WriteTensor("nan.pb", {2, 4}, nan_x), "--find-nonfinite"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("holds inf or NaN, and so do the inputs"));
  EXPECT_THAT(r.err, Not(HasSubstr("first appear")));
  r = Ampc({"run", compile("c.onnx", "/fc1/MatMul|/fc2/MatMul"), "--input", "x=" + x,
            "--find-nonfinite"});
  EXPECT_EQ(r.out, "y: float32[2,2] min 320 max 320 mean 320\n");
  EXPECT_THAT(r.err, Not(HasSubstr("note:")));
}

TEST_F(RunCommandTest, ReadsNpyInputs) {
  // A NumPy 1.0 file written by hand: magic, version, header length 118, header, data.
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
  header.append(118 - header.size() - 1, ' ');
  header.push_back('\n');
  std::string npy =
      std::string("\x93NUMPY\x01\x00", 8) + std::string(1, 118) + std::string(1, 0) + header;
  const float data[4] = {-1, 0, 1, 2};
  npy.append(reinterpret_cast<const char*>(data), 16);
  const std::string x = Write("x.npy", npy);
  auto r = Ampc({"run", model_, "--input", "x=" + x});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // y = {-1.5, -1, 2.5, 3}
  EXPECT_EQ(r.out, "y: float32[2,2] min -1.5 max 3 mean 0.75\n");
}

TEST_F(RunCommandTest, MissingAndUnknownInputsAreUsageErrors) {
  auto r = Ampc({"run", model_});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("missing --input x=FILE (float32 input of the model)"));
  const std::string x = WriteTensor("x.pb", {2, 2}, {1, 2, 3, 4});
  r = Ampc({"run", model_, "--input", "z=" + x});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--input z: the model has no input of that name (its inputs: x)"));
}

TEST_F(RunCommandTest, WrongShapeNamesTheModelAndTheInput) {
  const std::string x = WriteTensor("x.pb", {3}, {1, 2, 3});
  auto r = Ampc({"run", model_, "--input", "x=" + x});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ampc: error: " + model_ + ": input 'x': expected shape [2,2], got [3]\n");
}

// run compiles nothing, but reads only the versions compiling reads.
TEST_F(RunCommandTest, AnOpsetTooNewIsRefusedAsWhenCompiling) {
  onnx::ModelProto model = testing::ParseModelText(kModel);
  model.mutable_opset_import(0)->set_version(99);
  const std::string path = Write("new.onnx", model.SerializeAsString());
  const std::string x = WriteTensor("x.pb", {2, 2}, {1, 2, 3, 4});
  auto r = Ampc({"run", path, "--input", "x=" + x});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ampc: error: " + path +
                       ": imports opset 99 of the default ONNX domain, but this ampc is built with "
                       "ONNX 1.23.2, which knows opsets up to 28; re-export the model with opset "
                       "28 or lower\n");
}

TEST_F(RunCommandTest, WrongDtypeNamesTheModelAndTheInput) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::INT64);
  for (int64_t v : {2, 2}) t.add_dims(v);
  for (int64_t v : {1, 2, 3, 4}) t.add_int64_data(v);
  auto r = Ampc({"run", model_, "--input", "x=" + Write("x.pb", t.SerializeAsString())});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(model_ + ": input 'x': expected float32"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// NaN input data may be deliberate (a model meant to propagate it): the run proceeds, but a
// warning names the input, and the output summary counts what came out non-finite.
TEST_F(RunCommandTest, NanInputDataIsAWarningNamingTheInputAndTheRunProceeds) {
  const std::string x = WriteTensor("x.pb", {2, 2}, {1, NAN, 3, -INFINITY});
  auto r = Ampc({"run", model_, "--input", "x=" + x});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("ampc: " + model_ +
                               ": warning: input 'x' holds 1 NaN and 1 infinite values; running "
                               "with them as given\n"));
  EXPECT_EQ(r.out, "y: float32[2,2] min 2.5 max 6.5 mean 4.5 non-finite 2\n");
}

TEST_F(RunCommandTest, BadNpyNamesTheFile) {
  const std::string x = Write("x.npy", "not numpy at all");
  auto r = Ampc({"run", model_, "--input", "x=" + x});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ampc: error: " + x + ": not a readable .npy file: bad magic\n");
}

// The header is read as numpy writes it; anything else is refused, not guessed at.
TEST_F(RunCommandTest, NpyHeadersAreReadStrictly) {
  const std::string data(16, '\0');  // four float32 zeros
  auto npy = [&](const std::string& header) {
    std::string padded = header + std::string((64 - (header.size() + 11) % 64) % 64, ' ') + "\n";
    return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(padded.size()) + '\0' + padded +
           data;
  };
  const std::pair<std::string, std::string> cases[] = {
      {"{'descr': '<f4', 'fortran_order': False}",
       "needs the keys 'descr', 'fortran_order' and 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2", "bad value of 'shape'"},
      {"{'descr': '<f4', 'fortran_order': 'no', 'shape': (2, 2), }",
       "bad value of 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), 'x': 1}", "unknown key 'x'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 2)}",
       "key 'descr' appears twice"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2)} junk", "text after the dict"},
      {"hello world", "expected '{'"},
  };
  for (const auto& [header, message] : cases) {
    const std::string x = Write("x.npy", npy(header));
    auto r = Ampc({"run", model_, "--input", "x=" + x});
    EXPECT_EQ(r.exit_code, 1) << header;
    EXPECT_EQ(r.err, "ampc: error: " + x + ": not a readable .npy file: header: " + message + "\n");
  }
  const std::string x =
      Write("x.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }"));
  EXPECT_EQ(Ampc({"run", model_, "--input", "x=" + x}).exit_code, 0);
}

TEST_F(RunCommandTest, NpyDeclaringAHugeShapeIsRefusedBeforeAllocating) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }";
  header.append(118 - header.size() - 1, ' ');
  header.push_back('\n');
  const std::string x = Write("x.npy", std::string("\x93NUMPY\x01\x00", 8) + std::string(1, 118) +
                                           std::string(1, 0) + header);
  auto r = Ampc({"run", model_, "--input", "x=" + x});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ampc: error: " + x +
                       ": not a readable .npy file: shape [1000000000000] needs 4000000000000 "
                       "bytes of data, the file has 0\n");
}

TEST_F(RunCommandTest, UnsupportedOpFailsBeforeRunningNamingTheNode) {
  const std::string m = Write("decoder.onnx", testing::ParseModelText(R"(
<ir_version: 9, opset_import: ["" : 20]>
g (uint8[N] encoded) => (uint8[H, W, 3] y) {
  y = ImageDecoder(encoded)
}
)")
                                                  .SerializeAsString());
  auto r = Ampc({"run", m});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(
      r.err,
      HasSubstr(m + ": ImageDecoder node producing 'y': op not supported on the cpu backend"));
}

TEST_F(RunCommandTest, AnUnknownDeviceIsAUsageError) {
  const std::string x = WriteTensor("x.pb", {2, 2}, {1, 2, 3, 4});
  auto r = Ampc({"run", model_, "--input", "x=" + x, "--device=gpu"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--device=gpu: expected cpu, cuda or auto"));
  EXPECT_EQ(r.out, "");
}

TEST_F(RunCommandTest, CudaWithoutAGpuIsOneLineAndAutoRunsOnTheCpu) {
  if (testing::CudaUsable()) GTEST_SKIP() << "a GPU is present: see RunsOnTheGpuWithDeviceCuda";
  const std::string x = WriteTensor("x.pb", {2, 2}, {1, 2, 3, 4});
  auto r = Ampc({"run", model_, "--input", "x=" + x, "--device=cuda"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--device=cuda: "));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.out, "");
  r = Ampc({"run", model_, "--input", "x=" + x, "--device=auto"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr(": ran on cpu in "));
}

// --tf32 changes nothing on the CPU: the same output as without it.
TEST_F(RunCommandTest, Tf32IsAcceptedAndChangesNothingOnTheCpu) {
  const std::string x = WriteTensor("x.pb", {2, 2}, {1, 2, 3, 4});
  auto plain = Ampc({"run", model_, "--input", "x=" + x, "--device=cpu"});
  auto tf32 = Ampc({"run", model_, "--input", "x=" + x, "--device=cpu", "--tf32"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(tf32.exit_code, 0) << tf32.err;
  EXPECT_EQ(tf32.out, plain.out);
  EXPECT_EQ(tf32.out, "y: float32[2,2] min 2.5 max 7 mean 4.75\n");
}

TEST_F(RunCommandTest, RunsOnTheGpuWithDeviceCuda) {
  AMPC_SKIP_WITHOUT_GPU();
  const std::string x = WriteTensor("x.pb", {2, 2}, {1, 2, 3, 4});
  auto r = Ampc({"run", model_, "--input", "x=" + x, "--device=cuda"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "y: float32[2,2] min 2.5 max 7 mean 4.75\n");
  EXPECT_THAT(r.err, HasSubstr(": ran on cuda in "));
}

}  // namespace
}  // namespace ampc
