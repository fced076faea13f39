#include "compiler/model_io.h"

#include <google/protobuf/util/message_differencer.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "passes/graph/deferred_data.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;
using google::protobuf::util::MessageDifferencer;
using onnx::TensorProto;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using External = SaveOptions::ExternalData;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

std::string Pattern(size_t size, int seed) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 7 + seed * 31) % 251);
  return bytes;
}

TensorProto FloatTensor(const std::string& name, int64_t count, int seed) {
  TensorProto tensor;
  tensor.set_name(name);
  tensor.set_data_type(TensorProto::FLOAT);
  tensor.add_dims(count);
  tensor.set_raw_data(Pattern(static_cast<size_t>(count) * 4, seed));
  return tensor;
}

onnx::GraphProto Branch(const std::string& name, int seed) {
  onnx::GraphProto graph;
  graph.set_name(name);
  *graph.add_initializer() = FloatTensor(name + "_w", 512, seed);
  onnx::NodeProto* node = graph.add_node();
  node->set_op_type("Identity");
  node->add_input(name + "_w");
  node->add_output(name + "_out");
  graph.add_output()->set_name(name + "_out");
  return graph;
}

// A model with a tensor in every place one can live: initializer, Constant attribute, If
// branches, a function body and training_info.
onnx::ModelProto MakeModel() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto* graph = model.mutable_graph();
  graph->set_name("g");
  *graph->add_initializer() = FloatTensor("W", 512, 1);
  onnx::NodeProto* constant = graph->add_node();
  constant->set_name("const");
  constant->set_op_type("Constant");
  constant->add_output("C");
  onnx::AttributeProto* value = constant->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  *value->mutable_t() = FloatTensor("c_value", 512, 2);
  onnx::NodeProto* branch = graph->add_node();
  branch->set_op_type("If");
  branch->add_input("cond");
  branch->add_output("Y");
  for (const char* name : {"then_branch", "else_branch"}) {
    onnx::AttributeProto* attr = branch->add_attribute();
    attr->set_name(name);
    attr->set_type(onnx::AttributeProto::GRAPH);
    *attr->mutable_g() = Branch(name, static_cast<int>(branch->attribute_size()) + 2);
  }
  onnx::FunctionProto* function = model.add_functions();
  function->set_name("F");
  function->set_domain("local");
  *function->add_node() = *constant;
  function->mutable_node(0)->mutable_attribute(0)->mutable_t()->set_name("f_value");
  *model.add_training_info()->mutable_initialization() = Branch("init", 7);
  return model;
}

// The tensors of MakeModel(), in a fixed order.
std::vector<TensorProto*> Tensors(onnx::ModelProto& model) {
  onnx::GraphProto* graph = model.mutable_graph();
  return {graph->mutable_initializer(0),
          graph->mutable_node(0)->mutable_attribute(0)->mutable_t(),
          graph->mutable_node(1)->mutable_attribute(0)->mutable_g()->mutable_initializer(0),
          graph->mutable_node(1)->mutable_attribute(1)->mutable_g()->mutable_initializer(0),
          model.mutable_functions(0)->mutable_node(0)->mutable_attribute(0)->mutable_t(),
          model.mutable_training_info(0)->mutable_initialization()->mutable_initializer(0)};
}

void AddEntry(TensorProto& tensor, const std::string& key, const std::string& value) {
  onnx::StringStringEntryProto* entry = tensor.add_external_data();
  entry->set_key(key);
  entry->set_value(value);
}

void MakeExternal(TensorProto& tensor, const std::string& location, const std::string& offset,
                  const std::string& length) {
  tensor.clear_raw_data();
  tensor.set_data_location(TensorProto::EXTERNAL);
  AddEntry(tensor, "location", location);
  if (!offset.empty()) AddEntry(tensor, "offset", offset);
  if (!length.empty()) AddEntry(tensor, "length", length);
}

::testing::AssertionResult ProtoEqual(const onnx::ModelProto& a, const onnx::ModelProto& b) {
  std::string differences;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&differences);
  if (differencer.Compare(a, b)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << differences.substr(0, 2000);
}

onnx::ModelProto ParseFile(const std::string& path) {
  onnx::ModelProto model;
  EXPECT_TRUE(model.ParseFromString(ReadFile(path))) << path;
  return model;
}

class ModelIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = (fs::temp_directory_path() / "ampc_model_io.XXXXXX").string();
    ASSERT_NE(::mkdtemp(dir.data()), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    std::error_code ignored;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ignored);
    fs::remove_all(dir_, ignored);
  }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::vector<std::string> Files() const {
    std::vector<std::string> names;
    for (const fs::directory_entry& entry : fs::recursive_directory_iterator(dir_)) {
      if (!entry.is_directory()) names.push_back(fs::relative(entry.path(), dir_).string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  // Writes MakeModel() with W stored externally as given; the data file holds W at offset 64.
  absl::Status LoadWithExternalW(const std::string& location, const std::string& offset,
                                 const std::string& length) {
    onnx::ModelProto model = MakeModel();
    std::string data = std::string(64, 'x') + model.graph().initializer(0).raw_data();
    WriteFile(Path("w.bin"), data);
    MakeExternal(*Tensors(model)[0], location, offset, length);
    WriteFile(Path("model.onnx"), model.SerializeAsString());
    return LoadModel(Path("model.onnx")).status();
  }

  fs::path dir_;
};

// --- Round trips ---------------------------------------------------------------------------

TEST_F(ModelIoTest, InlineRoundTrip) {
  onnx::ModelProto model = MakeModel();
  ASSERT_TRUE(SaveModel(model, Path("out.onnx"), {.external_data = External::kNever}).ok());
  EXPECT_EQ(Files(), std::vector<std::string>{"out.onnx"});
  absl::StatusOr<LoadedModel> loaded = LoadModel(Path("out.onnx"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(ProtoEqual(loaded->model, model));
  EXPECT_FALSE(loaded->used_external_data);
}

TEST_F(ModelIoTest, ExternalRoundTripPutsEveryTensorInOneAlignedFile) {
  onnx::ModelProto model = MakeModel();
  ASSERT_TRUE(SaveModel(model, Path("out.onnx"), {.external_data = External::kAlways}).ok());
  EXPECT_EQ(Files(), (std::vector<std::string>{"out.onnx", "out.onnx.data"}));

  onnx::ModelProto written = ParseFile(Path("out.onnx"));
  for (TensorProto* tensor : Tensors(written)) {
    EXPECT_EQ(tensor->data_location(), TensorProto::EXTERNAL) << tensor->name();
    EXPECT_FALSE(tensor->has_raw_data());
    ASSERT_EQ(tensor->external_data_size(), 3);
    EXPECT_EQ(tensor->external_data(0).value(), "out.onnx.data");
    EXPECT_EQ(std::stoll(tensor->external_data(1).value()) % 4096, 0);
    EXPECT_EQ(tensor->external_data(2).value(), "2048");
  }
  absl::StatusOr<LoadedModel> loaded = LoadModel(Path("out.onnx"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(ProtoEqual(loaded->model, model));
  EXPECT_TRUE(loaded->used_external_data);
}

TEST_F(ModelIoTest, TensorsBelowTheMinimumStayInline) {
  onnx::ModelProto model = MakeModel();
  *model.mutable_graph()->add_initializer() = FloatTensor("bias", 4, 9);
  ASSERT_TRUE(SaveModel(model, Path("out.onnx"), {.external_data = External::kAlways}).ok());
  const onnx::ModelProto written = ParseFile(Path("out.onnx"));
  const TensorProto& bias = written.graph().initializer(1);
  EXPECT_EQ(bias.data_location(), TensorProto::DEFAULT);
  EXPECT_EQ(bias.raw_data(), model.graph().initializer(1).raw_data());
}

TEST_F(ModelIoTest, TypedDataIsWrittenExternallyAsRawData) {
  onnx::ModelProto model = MakeModel();
  TensorProto* typed = model.mutable_graph()->add_initializer();
  typed->set_name("typed");
  typed->set_data_type(TensorProto::FLOAT);
  typed->add_dims(300);
  for (int i = 0; i < 300; ++i) typed->add_float_data(0.5f * static_cast<float>(i));
  ASSERT_TRUE(SaveModel(model, Path("out.onnx"), {.external_data = External::kAlways}).ok());
  absl::StatusOr<LoadedModel> loaded = LoadModel(Path("out.onnx"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const TensorProto& back = loaded->model.graph().initializer(1);
  EXPECT_EQ(back.float_data_size(), 0);
  ASSERT_EQ(back.raw_data().size(), 1200u);
  float value;
  std::memcpy(&value, back.raw_data().data() + 4 * 299, 4);
  EXPECT_EQ(value, 149.5f);
}

TEST_F(ModelIoTest, SaveLeavesTheCallersModelUnchanged) {
  const onnx::ModelProto model = MakeModel();
  onnx::ModelProto before = model;
  ASSERT_TRUE(SaveModel(model, Path("out.onnx"), {.external_data = External::kAlways}).ok());
  EXPECT_TRUE(ProtoEqual(model, before));
}

TEST_F(ModelIoTest, SavesAreByteIdentical) {
  onnx::ModelProto model = MakeModel();
  SaveOptions options{.external_data = External::kAlways};
  ASSERT_TRUE(SaveModel(model, Path("out.onnx"), options).ok());
  std::string first = ReadFile(Path("out.onnx"));
  std::string first_data = ReadFile(Path("out.onnx.data"));
  fs::create_directory(Path("again"));
  ASSERT_TRUE(SaveModel(model, Path("again/out.onnx"), options).ok());
  EXPECT_EQ(ReadFile(Path("again/out.onnx")), first);
  EXPECT_EQ(ReadFile(Path("again/out.onnx.data")), first_data);
  ASSERT_TRUE(SaveModel(model, Path("inline.onnx"), {.external_data = External::kNever}).ok());
  ASSERT_TRUE(SaveModel(model, Path("inline2.onnx"), {.external_data = External::kNever}).ok());
  EXPECT_EQ(ReadFile(Path("inline.onnx")), ReadFile(Path("inline2.onnx")));
}

// Two files cannot be renamed into place at once: a save never writes the data file the model in
// place reads, so a save killed between the two renames leaves that model whole.
TEST_F(ModelIoTest, ExternalDataFilesTakeTurnsAndTheUnusedOneIsRemoved) {
  onnx::ModelProto model = MakeModel();
  SaveOptions options{.external_data = External::kAlways};
  ASSERT_TRUE(SaveModel(model, Path("out.onnx"), options).ok());
  EXPECT_EQ(Files(), (std::vector<std::string>{"out.onnx", "out.onnx.data"}));
  ASSERT_TRUE(SaveModel(model, Path("out.onnx"), options).ok());
  EXPECT_EQ(Files(), (std::vector<std::string>{"out.onnx", "out.onnx.alt.data"}));
  absl::StatusOr<LoadedModel> loaded = LoadModel(Path("out.onnx"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(ProtoEqual(loaded->model, model));
  ASSERT_TRUE(SaveModel(model, Path("out.onnx"), options).ok());
  EXPECT_EQ(Files(), (std::vector<std::string>{"out.onnx", "out.onnx.data"}));
}

TEST_F(ModelIoTest, AutoWritesExternalDataWhenTheInputUsedIt) {
  onnx::ModelProto model = MakeModel();
  ASSERT_TRUE(SaveModel(model, Path("plain.onnx"), {}).ok());
  EXPECT_FALSE(fs::exists(Path("plain.onnx.data")));
  ASSERT_TRUE(SaveModel(model, Path("out.onnx"), {.input_used_external_data = true}).ok());
  EXPECT_TRUE(fs::exists(Path("out.onnx.data")));
}

// Stands in for a model over 2 GiB: the same decision with the limit lowered.
TEST_F(ModelIoTest, AutoWritesExternalDataAboveTheInlineLimit) {
  onnx::ModelProto model = MakeModel();
  for (int i = 0; i < 8; ++i) {
    *model.mutable_graph()->add_initializer() = FloatTensor(absl::StrCat("big", i), 4096, i);
  }
  ASSERT_TRUE(SaveModel(model, Path("low.onnx"), {.inline_limit_bytes = 64 << 10}).ok());
  EXPECT_TRUE(fs::exists(Path("low.onnx.data")));
  EXPECT_LT(fs::file_size(Path("low.onnx")), 4096u);
  absl::StatusOr<LoadedModel> loaded = LoadModel(Path("low.onnx"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(ProtoEqual(loaded->model, model));

  ASSERT_TRUE(SaveModel(model, Path("high.onnx"), {.inline_limit_bytes = 1 << 20}).ok());
  EXPECT_FALSE(fs::exists(Path("high.onnx.data")));
}

// Written by hand, independently of SaveModel: two files, offsets, a subdirectory, entries
// without offset or length.
TEST_F(ModelIoTest, LoadsExternalDataFromSeveralFilesAndEveryTensorPlace) {
  const onnx::ModelProto expected = MakeModel();
  onnx::ModelProto model = expected;
  std::vector<TensorProto*> tensors = Tensors(model);
  std::string a(20000, '\xee');
  std::string b(10000, '\xdd');
  auto place = [](std::string& file, size_t offset, const TensorProto& tensor) {
    file.replace(offset, tensor.raw_data().size(), tensor.raw_data());
  };
  place(a, 0, *tensors[0]);
  place(a, 3000, *tensors[1]);
  place(a, 17952, *tensors[2]);  // ends exactly at the end of the file
  place(b, 0, *tensors[3]);
  place(b, 4096, *tensors[4]);
  place(a, 9000, *tensors[5]);
  MakeExternal(*tensors[0], "a.bin", "", "");
  MakeExternal(*tensors[1], "a.bin", "3000", "");
  MakeExternal(*tensors[2], "./a.bin", "17952", "2048");
  MakeExternal(*tensors[3], "sub/b.bin", "0", "2048");
  MakeExternal(*tensors[4], "sub/../sub/b.bin", "4096", "2048");
  MakeExternal(*tensors[5], "a.bin", "9000", "2048");
  AddEntry(*tensors[5], "checksum", "unverified");
  fs::create_directory(Path("sub"));
  WriteFile(Path("a.bin"), a);
  WriteFile(Path("sub/b.bin"), b);
  WriteFile(Path("model.onnx"), model.SerializeAsString());

  absl::StatusOr<LoadedModel> loaded = LoadModel(Path("model.onnx"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(ProtoEqual(loaded->model, expected));
  EXPECT_TRUE(loaded->used_external_data);
}

// --- Deferred data (passes/graph/deferred_data.h) --------------------------------------------

// The bytes ForEachChunk gives for `tensor`, read in chunks of `chunk` bytes.
std::string ChunkedBytes(const TensorProto& tensor, uint64_t chunk) {
  std::string bytes;
  const absl::Status status = ForEachChunk(tensor, chunk, [&](const char* data, uint64_t size) {
    EXPECT_LE(size, chunk);
    bytes.append(data, size);
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
  return bytes;
}

TEST_F(ModelIoTest, DeferredTensorsStayInTheirFilesAndReadBackInChunks) {
  const onnx::ModelProto model = MakeModel();
  ASSERT_TRUE(SaveModel(model, Path("in.onnx"), {.external_data = External::kAlways}).ok());
  absl::StatusOr<LoadedModel> loaded = LoadModel(Path("in.onnx"), {.defer_min_bytes = 1});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::vector<TensorProto*> expected = Tensors(const_cast<onnx::ModelProto&>(model));
  const std::vector<TensorProto*> deferred = Tensors(loaded->model);
  ASSERT_EQ(deferred.size(), expected.size());
  for (size_t i = 0; i < deferred.size(); ++i) {
    EXPECT_TRUE(IsDeferred(*deferred[i])) << deferred[i]->name();
    EXPECT_FALSE(deferred[i]->has_raw_data());
    EXPECT_EQ(ChunkedBytes(*deferred[i], 300), expected[i]->raw_data()) << deferred[i]->name();
  }
  // Saved, the deferred data is copied to the output's own file and reads back as it was.
  ASSERT_TRUE(SaveModel(loaded->model, Path("out.onnx"), {.keep = loaded->data_files}).ok());
  absl::StatusOr<LoadedModel> again = LoadModel(Path("out.onnx"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(ProtoEqual(again->model, model));
  EXPECT_EQ(ReadFile(Path("in.onnx.data")).size() % 4096, 2048u);  // the input's data, untouched
}

TEST_F(ModelIoTest, ADataFileThatShrankAfterLoadingIsAnErrorNamingFileAndTensor) {
  ASSERT_TRUE(SaveModel(MakeModel(), Path("in.onnx"), {.external_data = External::kAlways}).ok());
  absl::StatusOr<LoadedModel> loaded = LoadModel(Path("in.onnx"), {.defer_min_bytes = 1});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(::truncate(Path("in.onnx.data").c_str(), 100), 0);
  const TensorProto& tensor = loaded->model.graph().initializer(0);
  const absl::Status status =
      ForEachChunk(tensor, 1 << 20, [](const char*, uint64_t) { return absl::OkStatus(); });
  EXPECT_THAT(status.message(), HasSubstr("in.onnx.data"));
  EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("'", tensor.name(), "'")));
  EXPECT_THAT(status.message(), HasSubstr("ended before its data"));
}

TEST_F(ModelIoTest, TensorsConvertedDuringACompileGoStraightToTheOutputsData) {
  ASSERT_TRUE(SaveModel(MakeModel(), Path("in.onnx"), {.external_data = External::kAlways}).ok());
  absl::StatusOr<LoadedModel> loaded = LoadModel(Path("in.onnx"), {.defer_min_bytes = 1});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  SaveOptions options{.keep = loaded->data_files};
  absl::StatusOr<std::unique_ptr<ExternalDataWriter>> data =
      OpenOutputData(Path("out.onnx"), options);
  ASSERT_TRUE(data.ok()) << data.status();
  options.data = data->get();
  // What a conversion does: the tensor's new bytes written to the sink as they are made.
  TensorProto& first = *loaded->model.mutable_graph()->mutable_initializer(0);
  const std::string replaced = Pattern(2048, 42);
  absl::StatusOr<uint64_t> offset = options.data->Begin(replaced.size());
  ASSERT_TRUE(offset.ok()) << offset.status();
  ASSERT_TRUE(options.data->Write(replaced.data(), replaced.size()).ok());
  MakeDeferred(first, {kSinkFile, *offset, replaced.size()});
  EXPECT_FALSE(fs::exists(Path("out.onnx.data")));  // a temporary file until the save
  ASSERT_TRUE(SaveModel(loaded->model, Path("out.onnx"), options).ok());
  absl::StatusOr<LoadedModel> saved = LoadModel(Path("out.onnx"));
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->model.graph().initializer(0).raw_data(), replaced);
  EXPECT_EQ(Files(),
            (std::vector<std::string>{"in.onnx", "in.onnx.data", "out.onnx", "out.onnx.data"}));
}

// --- Load errors -----------------------------------------------------------------------------

TEST_F(ModelIoTest, MissingFileIsNotFound) {
  absl::Status status = LoadModel(Path("none.onnx")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), StartsWith(Path("none.onnx") + ": "));
}

TEST_F(ModelIoTest, DirectoryIsRefused) {
  fs::create_directory(Path("dir.onnx"));
  absl::Status status = LoadModel(Path("dir.onnx")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), Path("dir.onnx") + ": is a directory, not a file");
}

TEST_F(ModelIoTest, EmptyFileIsRefused) {
  WriteFile(Path("empty.onnx"), "");
  absl::Status status = LoadModel(Path("empty.onnx")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), StartsWith(Path("empty.onnx") + ": is empty"));
}

TEST_F(ModelIoTest, UnreadableFileIsRefused) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file";
  WriteFile(Path("locked.onnx"), MakeModel().SerializeAsString());
  fs::permissions(Path("locked.onnx"), fs::perms::none);
  absl::Status status = LoadModel(Path("locked.onnx")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), StartsWith(Path("locked.onnx") + ": cannot open"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("Permission denied"));
}

TEST_F(ModelIoTest, RandomBytesAreNotAModel) {
  std::mt19937 random(42);
  std::string bytes(4096, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  WriteFile(Path("random.onnx"), bytes);
  absl::Status status = LoadModel(Path("random.onnx")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              StartsWith(Path("random.onnx") + ": not a valid ONNX model"));
  EXPECT_THAT(std::string(status.message()), Not(HasSubstr("truncated")));
}

TEST_F(ModelIoTest, TruncatedFileSaysSo) {
  std::string bytes = MakeModel().SerializeAsString();
  WriteFile(Path("cut.onnx"), bytes.substr(0, bytes.size() * 3 / 5));
  absl::Status status = LoadModel(Path("cut.onnx")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              StartsWith(Path("cut.onnx") + ": not a valid ONNX model "
                                            "(protobuf parse failed)"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("may be truncated"));
}

TEST_F(ModelIoTest, TextModelsAreRecognised) {
  const std::vector<std::string> texts = {
      "<\n  ir_version: 8,\n  opset_import: [\"\" : 17]\n>\n"
      "agraph (float[N] X) => (float[N] Y) {\n  Y = Relu(X)\n}\n",
      "ir_version: 8\ngraph {\n  name: \"g\"\n}\n",
      "# a comment\nagraph (float[N] X) => (float[N] Y) {\n  Y = Relu(X)\n}\n",
      "hello, this is just some text\n"};
  for (const std::string& text : texts) {
    WriteFile(Path("model.txt"), text);
    absl::Status status = LoadModel(Path("model.txt")).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()),
                StartsWith(Path("model.txt") + ": is text, not a binary ONNX model"));
    EXPECT_EQ(status.message().find('\n'), absl::string_view::npos);
  }
}

TEST_F(ModelIoTest, ModelWithoutGraphIsInvalid) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  WriteFile(Path("nograph.onnx"), model.SerializeAsString());
  absl::Status status = LoadModel(Path("nograph.onnx")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), Path("nograph.onnx") + ": not a valid ONNX model (it has no graph)");
}

TEST_F(ModelIoTest, ExternalDataWithoutOffsetOrLengthLoads) {
  EXPECT_TRUE(LoadWithExternalW("w.bin", "64", "").ok());
  EXPECT_TRUE(LoadWithExternalW("w.bin", "64", "2048").ok());
}

struct BadExternal {
  std::string location, offset, length;
  absl::StatusCode code;
  std::string message;
};

TEST_F(ModelIoTest, BadExternalDataIsRefusedNamingFileAndTensor) {
  const std::vector<BadExternal> cases = {
      {"/etc/passwd", "", "", absl::StatusCode::kInvalidArgument, "relative path inside"},
      {Path("w.bin"), "64", "", absl::StatusCode::kInvalidArgument, "relative path inside"},
      {"../w.bin", "64", "", absl::StatusCode::kInvalidArgument, "relative path inside"},
      {"sub/../../w.bin", "64", "", absl::StatusCode::kInvalidArgument, "relative path inside"},
      {"", "64", "", absl::StatusCode::kInvalidArgument, "relative path inside"},
      {"gone.bin", "64", "", absl::StatusCode::kNotFound, "file not found"},
      {"w.bin", "100", "", absl::StatusCode::kInvalidArgument, "too short for offset 100"},
      {"w.bin", "99999999999", "", absl::StatusCode::kInvalidArgument, "too short"},
      {"w.bin", "64", "2044", absl::StatusCode::kInvalidArgument, "does not match dims"},
      {"w.bin", "abc", "", absl::StatusCode::kInvalidArgument, "offset 'abc' is not a number"},
      {"w.bin", "-4", "", absl::StatusCode::kInvalidArgument, "is not a number"},
  };
  for (const BadExternal& bad : cases) {
    SCOPED_TRACE(bad.location + " " + bad.offset + " " + bad.length);
    absl::Status status = LoadWithExternalW(bad.location, bad.offset, bad.length);
    EXPECT_EQ(status.code(), bad.code);
    EXPECT_THAT(std::string(status.message()), StartsWith(Path("model.onnx") + ": tensor 'W': "));
    EXPECT_THAT(std::string(status.message()), HasSubstr("external data '" + bad.location + "'"));
    EXPECT_THAT(std::string(status.message()), HasSubstr(bad.message));
  }
}

TEST_F(ModelIoTest, ExternalAttributeErrorNamesTheNode) {
  onnx::ModelProto model = MakeModel();
  MakeExternal(*Tensors(model)[1], "missing.bin", "", "");
  WriteFile(Path("model.onnx"), model.SerializeAsString());
  absl::Status status = LoadModel(Path("model.onnx")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("tensor 'c_value' in attribute 'value' of node 'const'"));
}

// --- Save errors ---------------------------------------------------------------------------

TEST_F(ModelIoTest, SaveIntoAMissingDirectoryIsUnavailable) {
  for (External mode : {External::kNever, External::kAlways}) {
    absl::Status status = SaveModel(MakeModel(), Path("nope/out.onnx"), {.external_data = mode});
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(std::string(status.message()), StartsWith(Path("nope/out.onnx")));
    EXPECT_THAT(std::string(status.message()), HasSubstr(Path("nope") + " does not exist"));
  }
  EXPECT_TRUE(Files().empty());
}

TEST_F(ModelIoTest, SaveUnderARegularFileIsUnavailable) {
  WriteFile(Path("file"), "x");
  absl::Status status = SaveModel(MakeModel(), Path("file/out.onnx"));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(status.message()), StartsWith(Path("file/out.onnx") + ": "));
  EXPECT_THAT(std::string(status.message()), HasSubstr(Path("file") + " is not a directory"));
  EXPECT_EQ(Files(), std::vector<std::string>{"file"});
}

// When the input reads OUT.data, saves to OUT take turns between the two other names and never
// write or remove the input's file (a resumed or repeated save used to fail the second time).
TEST_F(ModelIoTest, SavesNextToTheInputsDataFileTakeTurnsAroundIt) {
  onnx::ModelProto model = MakeModel();
  ASSERT_TRUE(SaveModel(model, Path("out.onnx"), {.external_data = External::kAlways}).ok());
  fs::rename(Path("out.onnx"), Path("in.onnx"));  // in.onnx reads out.onnx.data
  const std::string input_data = ReadFile(Path("out.onnx.data"));
  SaveOptions options{.external_data = External::kAlways, .keep = {Path("out.onnx.data")}};
  for (const char* expected : {"out.onnx.alt.data", "out.onnx.alt2.data", "out.onnx.alt.data"}) {
    ASSERT_TRUE(SaveModel(model, Path("out.onnx"), options).ok()) << expected;
    EXPECT_EQ(Files(),
              (std::vector<std::string>{"in.onnx", "out.onnx", expected, "out.onnx.data"}));
    EXPECT_EQ(ReadFile(Path("out.onnx.data")), input_data);
    ASSERT_TRUE(LoadModel(Path("in.onnx")).ok());
    absl::StatusOr<LoadedModel> saved = LoadModel(Path("out.onnx"));
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_TRUE(ProtoEqual(saved->model, model));
  }
}

// An inline save over a model with external data removes the data it no longer reads, unless
// the input reads it.
TEST_F(ModelIoTest, AnInlineSaveRemovesTheDataFileItReplaced) {
  onnx::ModelProto model = MakeModel();
  ASSERT_TRUE(SaveModel(model, Path("out.onnx"), {.external_data = External::kAlways}).ok());
  ASSERT_TRUE(SaveModel(model, Path("out.onnx"), {.external_data = External::kNever}).ok());
  EXPECT_EQ(Files(), (std::vector<std::string>{"out.onnx"}));
  ASSERT_TRUE(SaveModel(model, Path("out.onnx"), {.external_data = External::kAlways}).ok());
  ASSERT_TRUE(SaveModel(model, Path("out.onnx"),
                        {.external_data = External::kNever, .keep = {Path("out.onnx.data")}})
                  .ok());
  EXPECT_EQ(Files(), (std::vector<std::string>{"out.onnx", "out.onnx.data"}));
  absl::StatusOr<LoadedModel> loaded = LoadModel(Path("out.onnx"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(ProtoEqual(loaded->model, model));
}

TEST_F(ModelIoTest, FailedSaveLeavesThePreviousOutputIntact) {
  ASSERT_TRUE(SaveModel(MakeModel(), Path("out.onnx"), {.external_data = External::kNever}).ok());
  const std::string before = ReadFile(Path("out.onnx"));
  fs::create_directory(Path("out.onnx.data"));  // the data file cannot replace it
  WriteFile(Path("out.onnx.data/keep"), "k");
  onnx::ModelProto changed = MakeModel();
  changed.set_producer_name("changed");
  absl::Status status = SaveModel(changed, Path("out.onnx"), {.external_data = External::kAlways});
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(status.message()),
              StartsWith(Path("out.onnx.data") + ": cannot write: a directory"));
  EXPECT_EQ(ReadFile(Path("out.onnx")), before);
  EXPECT_EQ(Files(), (std::vector<std::string>{"out.onnx", "out.onnx.data/keep"}));
}

TEST_F(ModelIoTest, SavedFilesHaveUsualPermissions) {
  ASSERT_TRUE(SaveModel(MakeModel(), Path("out.onnx")).ok());
  mode_t mask = ::umask(0);
  ::umask(mask);
  fs::perms perms = fs::status(Path("out.onnx")).permissions();
  EXPECT_EQ(static_cast<mode_t>(perms), 0666 & ~mask);
}

// --- SameFile -------------------------------------------------------------------------------

TEST_F(ModelIoTest, SameFileComparesInodesOrNormalizedPaths) {
  WriteFile(Path("a.onnx"), "a");
  WriteFile(Path("b.onnx"), "b");
  fs::create_directory(Path("sub"));
  fs::create_hard_link(Path("a.onnx"), Path("hard.onnx"));
  fs::create_symlink(Path("a.onnx"), Path("soft.onnx"));
  EXPECT_TRUE(SameFile(Path("a.onnx"), Path("a.onnx")));
  EXPECT_TRUE(SameFile(Path("a.onnx"), Path("sub/../a.onnx")));
  EXPECT_TRUE(SameFile(Path("a.onnx"), Path("./a.onnx")));
  EXPECT_TRUE(SameFile(Path("a.onnx"), Path("hard.onnx")));
  EXPECT_TRUE(SameFile(Path("a.onnx"), Path("soft.onnx")));
  EXPECT_FALSE(SameFile(Path("a.onnx"), Path("b.onnx")));
  EXPECT_TRUE(SameFile(Path("new.onnx"), Path("sub/../new.onnx")));
  EXPECT_FALSE(SameFile(Path("new.onnx"), Path("other.onnx")));
  EXPECT_FALSE(SameFile(Path("a.onnx"), Path("new.onnx")));
}

// The sanitizer build found RemoveStaleTempFiles reading each name through a string_view of a
// destroyed temporary; under ASan this test fails on that read.
TEST_F(ModelIoTest, StaleTempFilesOfAGoneProcessAreRemovedAndOthersKept) {
  // 2^31 - 1 is above any pid_max, so kill() says no such process.
  const std::string dead = "out.onnx.tmp.2147483647.abcdef";
  const std::string live = absl::StrCat("out.onnx.tmp.", ::getpid(), ".abcdef");
  for (const std::string& name :
       {dead, live, std::string("out.onnx"), std::string("other.tmp.1.x")}) {
    WriteFile(Path(name), "x");
  }
  RemoveStaleTempFiles(Path("out.onnx"));
  EXPECT_EQ(Files(), (std::vector<std::string>{"other.tmp.1.x", "out.onnx", live}));
}

}  // namespace
}  // namespace ampc
