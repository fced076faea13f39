// The bundled models (docs/models.md): each passes the ONNX checker and strict
// type inference with the documented outputs, and builds deterministically from its seed.
#include <onnx/checker.h>

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/cnn.h"
#include "models/mlp.h"
#include "models/transformer.h"
#include "passes/graph/onnx_status.h"
#include "passes/infer_types.h"

namespace ampc::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

onnx::ModelProto Cnn(const CnnOptions& options = {}) {
  absl::StatusOr<onnx::ModelProto> model = BuildCnn(options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : onnx::ModelProto();
}

onnx::ModelProto Transformer(const TransformerOptions& options = {}) {
  absl::StatusOr<onnx::ModelProto> model = BuildTransformer(options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : onnx::ModelProto();
}

std::string Bytes(const onnx::ModelProto& model) {
  std::string bytes;
  EXPECT_TRUE(model.SerializeToString(&bytes));
  return bytes;
}

// "elem_type[dim,dim]" with dim_param names for symbolic dims.
std::string TypeString(const onnx::TypeProto& type) {
  std::vector<std::string> dims;
  for (const onnx::TensorShapeProto::Dimension& dim : type.tensor_type().shape().dim()) {
    dims.push_back(dim.has_dim_value() ? std::to_string(dim.dim_value()) : dim.dim_param());
  }
  return onnx::TensorProto::DataType_Name(type.tensor_type().elem_type()) + "[" +
         absl::StrJoin(dims, ",") + "]";
}

// The checker accepts `model`; strict inference, with the declared output shapes taken away,
// infers the output types given.
void ExpectValidWithOutputs(const onnx::ModelProto& model, const std::string& logits,
                            const std::string& loss) {
  absl::Status status = CatchOnnx("checker", [&] { onnx::checker::check_model(model); });
  ASSERT_TRUE(status.ok()) << status;
  onnx::ModelProto inferred = model;
  for (onnx::ValueInfoProto& output : *inferred.mutable_graph()->mutable_output()) {
    output.mutable_type()->mutable_tensor_type()->clear_shape();
  }
  status = InferTypesStrict(inferred, "model");
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(inferred.graph().output_size(), 2);
  EXPECT_EQ(inferred.graph().output(0).name(), "logits");
  EXPECT_EQ(TypeString(inferred.graph().output(0).type()), logits);
  EXPECT_EQ(inferred.graph().output(1).name(), "loss");
  EXPECT_EQ(TypeString(inferred.graph().output(1).type()), loss);
}

void ExpectUniqueNodeNames(const onnx::ModelProto& model) {
  std::set<std::string> names;
  for (const onnx::NodeProto& node : model.graph().node()) {
    EXPECT_FALSE(node.name().empty()) << node.op_type();
    EXPECT_TRUE(names.insert(node.name()).second) << "duplicate node name " << node.name();
  }
}

std::vector<std::string> InputTypes(const onnx::ModelProto& model) {
  std::vector<std::string> types;
  for (const onnx::ValueInfoProto& input : model.graph().input()) {
    types.push_back(input.name() + ":" + TypeString(input.type()));
  }
  return types;
}

int CountOps(const onnx::ModelProto& model, const std::string& op) {
  int count = 0;
  for (const onnx::NodeProto& node : model.graph().node()) count += node.op_type() == op;
  return count;
}

TEST(Models, EveryModelIsOpset17IrVersion8) {
  for (const onnx::ModelProto& model : {BuildMlp(), Cnn(), Transformer()}) {
    EXPECT_EQ(model.ir_version(), 8);
    ASSERT_EQ(model.opset_import_size(), 1);
    EXPECT_EQ(model.opset_import(0).domain(), "");
    EXPECT_EQ(model.opset_import(0).version(), 17);
    ExpectUniqueNodeNames(model);
  }
}

TEST(Models, MlpPassesCheckerAndStrictInference) {
  ExpectValidWithOutputs(BuildMlp(), "FLOAT[N,10]", "FLOAT[]");
}

TEST(Models, CnnPassesCheckerAndStrictInference) {
  const onnx::ModelProto model = Cnn();
  EXPECT_THAT(InputTypes(model), ElementsAre("image:FLOAT[N,1,28,28]", "label:INT64[N]"));
  ExpectValidWithOutputs(model, "FLOAT[N,10]", "FLOAT[]");
  EXPECT_EQ(CountOps(model, "Conv"), 2);
  EXPECT_EQ(CountOps(model, "BatchNormalization"), 2);
  EXPECT_EQ(CountOps(model, "MaxPool"), 2);
  EXPECT_EQ(CountOps(model, "Gemm"), 2);
}

TEST(Models, CnnOtherSizesPassStrictInference) {
  CnnOptions options;
  options.channels = {3, 8, 8, 16};
  options.image_size = 32;
  options.hidden = 20;
  options.classes = 7;
  ExpectValidWithOutputs(Cnn(options), "FLOAT[N,7]", "FLOAT[]");
}

TEST(Models, TransformerPassesCheckerAndStrictInference) {
  const onnx::ModelProto model = Transformer();
  EXPECT_THAT(InputTypes(model), ElementsAre("tokens:INT64[N,32]", "label:INT64[N]"));
  ExpectValidWithOutputs(model, "FLOAT[N,10]", "FLOAT[]");
  EXPECT_EQ(CountOps(model, "LayerNormalization"), 2 * 2 + 1);
  EXPECT_EQ(CountOps(model, "Softmax"), 2);
  EXPECT_EQ(CountOps(model, "Erf"), 2);
}

TEST(Models, TransformerOtherSizesPassStrictInference) {
  TransformerOptions options;
  options.vocab = 50;
  options.seq = 7;
  options.hidden = 24;
  options.heads = 3;
  options.layers = 3;
  options.ffn = 40;
  options.classes = 5;
  const onnx::ModelProto model = Transformer(options);
  EXPECT_THAT(InputTypes(model), ElementsAre("tokens:INT64[N,7]", "label:INT64[N]"));
  ExpectValidWithOutputs(model, "FLOAT[N,5]", "FLOAT[]");
  EXPECT_EQ(CountOps(model, "Softmax"), 3);
}

TEST(Models, TransformerNodeNamesSayWhere) {
  const onnx::ModelProto model = Transformer();
  std::set<std::string> names;
  for (const onnx::NodeProto& node : model.graph().node()) names.insert(node.name());
  for (const char* name :
       {"/embed/tokens/Gather", "/layer0/norm1/LayerNormalization", "/layer0/attn/q/MatMul",
        "/layer1/attn/scores/Softmax", "/layer1/mlp/gelu/Erf", "/final_norm/LayerNormalization",
        "/pool/ReduceMean", "/head/Gemm", "/loss"}) {
    EXPECT_TRUE(names.count(name)) << name;
  }
}

TEST(Models, SameOptionsGiveIdenticalBytes) {
  EXPECT_EQ(Bytes(BuildMlp()), Bytes(BuildMlp()));
  EXPECT_EQ(Bytes(Cnn()), Bytes(Cnn()));
  EXPECT_EQ(Bytes(Transformer()), Bytes(Transformer()));
}

TEST(Models, DifferentSeedsGiveDifferentWeights) {
  MlpOptions mlp;
  mlp.seed = 1;
  EXPECT_NE(Bytes(BuildMlp()), Bytes(BuildMlp(mlp)));
  CnnOptions cnn;
  cnn.seed = 1;
  EXPECT_NE(Bytes(Cnn()), Bytes(Cnn(cnn)));
  TransformerOptions transformer;
  transformer.seed = 1;
  EXPECT_NE(Bytes(Transformer()), Bytes(Transformer(transformer)));
}

TEST(Models, TransformerRejectsHeadsThatDoNotDivideHidden) {
  TransformerOptions options;
  options.heads = 5;
  absl::StatusOr<onnx::ModelProto> model = BuildTransformer(options);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("multiple of heads"));
}

TEST(Models, CnnRejectsMorePoolingThanTheImageAllows) {
  CnnOptions options;
  options.channels = {1, 2, 2, 2, 2, 2, 2};  // 28 pooled six times is 0
  absl::StatusOr<onnx::ModelProto> model = BuildCnn(options);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ampc::models
