// --policy FILE.json: a valid file changes the categories and names itself as their source; every
// mistake is one InvalidArgument line naming the file and the entry, and changes nothing.
#include "compiler/policy_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "models/model_builder.h"
#include "tests/support/subprocess.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class PolicyFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ampc-policy-XXXXXX";
    dir_ = mkdtemp(pattern);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& text) {
    const std::string path = (dir_ / "policy.json").string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  // Applies `text` expecting an error: one line, naming the file, containing `expected`.
  void ExpectError(const std::string& text, const std::string& expected) {
    const std::string path = Write(text);
    AutocastPolicy policy = AutocastPolicy::Defaults(onnx::TensorProto::FLOAT16);
    const absl::Status status = ApplyPolicyFile(path, policy);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(status.message()), StartsWith(path + ": ")) << text;
    EXPECT_THAT(std::string(status.message()), HasSubstr(expected)) << text;
    EXPECT_EQ(status.message().find('\n'), absl::string_view::npos) << status.message();
    EXPECT_EQ(policy.Source("", "Softmax"), "default table") << "a bad file changed the policy";
  }

  fs::path dir_;
};

TEST_F(PolicyFileTest, ValidFileChangesLookupAndSource) {
  const std::string path = Write(R"({
    "version": 1,
    "comment": "Softmax measured fine in FP16 on our model",
    "ops": {"Softmax": "FOLLOW", "com.example.MyOp": "LOWER", "Relu": "FP32", "Erf": "KEEP"}
  })");
  AutocastPolicy policy = AutocastPolicy::Defaults(onnx::TensorProto::FLOAT16);
  ASSERT_TRUE(ApplyPolicyFile(path, policy).ok());
  const std::string source = "--policy " + path;
  EXPECT_EQ(policy.Lookup("", "Softmax"), Category::kFollow);
  EXPECT_EQ(policy.Source("", "Softmax"), source);
  EXPECT_EQ(policy.Lookup("com.example", "MyOp"), Category::kLower);
  EXPECT_EQ(policy.Source("com.example", "MyOp"), source);
  EXPECT_EQ(policy.Lookup("", "Relu"), Category::kFp32);
  EXPECT_EQ(policy.Lookup("ai.onnx", "Erf"), Category::kKeep);
  EXPECT_EQ(policy.Source("", "Erf"), source);
  EXPECT_EQ(policy.Lookup("", "MatMul"), Category::kLower);  // untouched
  EXPECT_EQ(policy.Source("", "MatMul"), "default table");
}

TEST_F(PolicyFileTest, EmptyOpsChangeNothing) {
  AutocastPolicy policy = AutocastPolicy::Defaults(onnx::TensorProto::FLOAT16);
  ASSERT_TRUE(ApplyPolicyFile(Write(R"({"version": 1, "ops": {}})"), policy).ok());
  EXPECT_EQ(policy.Source("", "Softmax"), "default table");
}

TEST_F(PolicyFileTest, MissingFile) {
  const std::string path = (dir_ / "absent.json").string();
  AutocastPolicy policy;
  const absl::Status status = ApplyPolicyFile(path, policy);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);  // exit code 1, as a missing model
  EXPECT_THAT(std::string(status.message()), StartsWith(path + ": "));
  EXPECT_THAT(std::string(status.message()), HasSubstr("No such file or directory"));
}

TEST_F(PolicyFileTest, DirectoryIsNotAFile) {
  AutocastPolicy policy;
  const absl::Status status = ApplyPolicyFile(dir_.string(), policy);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), StartsWith(dir_.string() + ": "));
}

TEST_F(PolicyFileTest, InvalidJsonGivesThePosition) {
  ExpectError("{\"version\": 1,\n  \"ops\": {\"Softmax\": FOLLOW}}", "line 2, column 22");
  ExpectError("{\"version\": 1,\n  \"ops\": {\"Softmax\": FOLLOW}}", "invalid JSON at byte");
  ExpectError("", "invalid JSON");
  ExpectError("{\"version\": 1, \"ops\": {}", "the end of the file");
  ExpectError("{\"version\": 1e400, \"ops\": {}}",
              "invalid JSON: number overflow parsing '1e400'");  // was an uncaught exception
}

TEST_F(PolicyFileTest, TopLevelMustBeAnObject) {
  ExpectError(R"(["Softmax", "FOLLOW"])", "expected an object");
}

TEST_F(PolicyFileTest, WrongOrMissingVersion) {
  ExpectError(R"({"ops": {}})", "missing \"version\"");
  ExpectError(R"({"version": 2, "ops": {}})", "\"version\": expected 1");
  ExpectError(R"({"version": "1", "ops": {}})", "got string \"1\"");
  ExpectError(R"({"version": 1.5, "ops": {}})", "got number 1.5");
}

TEST_F(PolicyFileTest, UnknownKeys) {
  ExpectError(R"({"version": 1, "ops": {}, "opps": {}})", "unknown key \"opps\"");
  ExpectError(R"({"version": 1, "Ops": {}})", "unknown key \"Ops\"");
}

TEST_F(PolicyFileTest, OpsMustBeAnObject) {
  ExpectError(R"({"version": 1})", "missing \"ops\"");
  ExpectError(R"({"version": 1, "ops": ["Softmax"]})", "\"ops\": expected an object");
  ExpectError(R"({"version": 1, "comment": 7, "ops": {}})", "\"comment\": expected a string");
}

TEST_F(PolicyFileTest, CategoryMustBeAString) {
  ExpectError(R"({"version": 1, "ops": {"Softmax": 3}})",
              "\"ops\": \"Softmax\": expected a category string");
  ExpectError(R"({"version": 1, "ops": {"Softmax": null}})", "got null");
  AutocastPolicy policy;
  EXPECT_THAT(
      std::string(
          ApplyPolicyFile(Write(R"({"version": 1, "ops": {"Softmax": null}})"), policy).message()),
      EndsWith("KEEP), got null"));  // not "got null null"
  ExpectError(R"({"version": 1, "ops": {"Softmax": ["FP32"]}})", "got array");
}

TEST_F(PolicyFileTest, UnknownCategory) {
  ExpectError(
      R"({"version": 1, "ops": {"Softmax": "fp16"}})",
      "\"ops\": \"Softmax\": unknown category 'fp16' (expected LOWER, FP32, FOLLOW or KEEP)");
}

TEST_F(PolicyFileTest, UnknownOpOrBadOpName) {
  ExpectError(R"({"version": 1, "ops": {"Softmx": "FP32"}})",
              "\"ops\": \"Softmx\": no op Softmx in the default domain of ONNX 1.");
  ExpectError(R"({"version": 1, "ops": {"ai.onnx.Softmax": "FP32"}})", "by op type alone");
  ExpectError(R"({"version": 1, "ops": {"ai.onnx.ml.NoSuchOp": "FP32"}})",
              "no op NoSuchOp in ai.onnx.ml of ONNX");
  ExpectError(R"({"version": 1, "ops": {"": "FP32"}})", "expected \"OpType\" or \"domain.OpType\"");
  ExpectError(R"({"version": 1, "ops": {"com.example.": "FP32"}})", "expected \"OpType\"");
}

TEST_F(PolicyFileTest, RepeatedKeys) {
  ExpectError(R"({"version": 1, "ops": {"Softmax": "FP32", "Softmax": "FOLLOW"}})",
              "\"ops\": \"Softmax\" appears twice");
  ExpectError(R"({"version": 1, "version": 1, "ops": {}})", "\"version\" appears twice");
}

// A bad entry after good ones: nothing is applied.
TEST_F(PolicyFileTest, BadFileChangesNothing) {
  ExpectError(R"({"version": 1, "ops": {"Softmax": "FOLLOW", "Exp": "HALF"}})", "\"Exp\"");
}

// Through the real binary: the policy decides, the report names it, and a bad file is exit 1.
TEST_F(PolicyFileTest, EndToEnd) {
  onnx::ModelProto model = models::NewModel("g");
  onnx::GraphProto* graph = model.mutable_graph();
  models::AddTensorValue(graph->add_input(), "x", onnx::TensorProto::FLOAT, {2, 4});
  models::AddTensorValue(graph->add_output(), "y", onnx::TensorProto::FLOAT, {2, 4});
  models::AddNode(graph, "Relu", {"x"}, {"r"}, "relu");
  models::AddNode(graph, "Softmax", {"r"}, {"y"}, "softmax");
  const std::string in = (dir_ / "m.onnx").string();
  std::ofstream(in, std::ios::binary) << model.SerializeAsString();
  const std::string policy = Write(R"({"version": 1, "ops": {"Relu": "LOWER"}})");
  auto r = testing::RunProcess({AMPC_BINARY, "explain", in, "--policy", policy}, dir_.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("category LOWER (--policy " + policy + ")"));
  Write(R"({"version": 1, "ops": {"Relu": "LOW"}})");
  r = testing::RunProcess({AMPC_BINARY, "explain", in, "--policy", policy}, dir_.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(policy + ": \"ops\": \"Relu\": unknown category 'LOW'"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace ampc
