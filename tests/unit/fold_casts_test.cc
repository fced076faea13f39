#include "passes/fold_casts.h"

#include <onnx/checker.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/numerics/half.h"
#include "passes/graph/deferred_data.h"
#include "passes/graph/onnx_status.h"
#include "passes/infer_types.h"
#include "tests/support/model_text.h"

namespace ampc {
namespace {

using onnx::TensorProto;
using ::testing::ElementsAre;

onnx::ModelProto Parse(const std::string& text) { return ampc::testing::ParseModelText(text); }

// As the pipeline hands it over: value_info filled by strict inference.
onnx::ModelProto Typed(const std::string& text) {
  onnx::ModelProto model = Parse(text);
  absl::Status status = InferTypesStrict(model, "input");
  EXPECT_TRUE(status.ok()) << status;
  return model;
}

void ExpectValid(const onnx::ModelProto& model) {
  absl::Status status = CatchOnnx("checker", [&] { onnx::checker::check_model(model); });
  EXPECT_TRUE(status.ok()) << status;
  onnx::ModelProto copy = model;
  status = InferTypesStrict(copy, "output");
  EXPECT_TRUE(status.ok()) << status;
}

// Runs fold-casts, checks the result is a valid model, and returns whether it changed anything.
bool Fold(onnx::ModelProto& model) {
  ModelContext context(model, "test.onnx");
  absl::StatusOr<PassResult> changed = FoldCasts(false).Run(context);
  EXPECT_TRUE(changed.ok()) << changed.status();
  ExpectValid(model);
  return changed.ok() && changed->changed;
}

// "Y = Op(A, B)" per node, "Y = Cast<10>(A)" for casts.
std::vector<std::string> Nodes(const onnx::GraphProto& graph) {
  std::vector<std::string> nodes;
  for (const onnx::NodeProto& node : graph.node()) {
    std::string op = node.op_type();
    if (op == "Cast") absl::StrAppend(&op, "<", node.attribute(0).i(), ">");
    nodes.push_back(absl::StrCat(absl::StrJoin(node.output(), ", "), " = ", op, "(",
                                 absl::StrJoin(node.input(), ", "), ")"));
  }
  return nodes;
}

std::vector<std::string> InitializerNames(const onnx::GraphProto& graph) {
  std::vector<std::string> names;
  for (const TensorProto& initializer : graph.initializer()) names.push_back(initializer.name());
  return names;
}

// The elem type value_info (or a graph output) declares for `name`; 0 if none does.
int DeclaredDtype(const onnx::GraphProto& graph, const std::string& name) {
  for (const auto* infos : {&graph.value_info(), &graph.output()}) {
    for (const onnx::ValueInfoProto& info : *infos) {
      if (info.name() == name) return info.type().tensor_type().elem_type();
    }
  }
  return 0;
}

std::vector<uint16_t> Bits16(const TensorProto& tensor) {
  std::vector<uint16_t> bits(tensor.raw_data().size() / 2);
  std::memcpy(bits.data(), tensor.raw_data().data(), bits.size() * 2);
  return bits;
}

TEST(FoldCastsTest, LowToFp32ToLowFolds) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float16[2] X) => (float16[2] Y) {
        A = Cast<to = 1>(X)
        B = Cast<to = 10>(A)
        Y = Neg(B)
      })");
  EXPECT_TRUE(Fold(model));
  EXPECT_THAT(Nodes(model.graph()), ElementsAre("Y = Neg(X)"));
}

TEST(FoldCastsTest, Bf16RoundTripFolds) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (bfloat16[2] X) => (bfloat16[2] Y) {
        A = Cast<to = 1>(X)
        B = Cast<to = 16>(A)
        Y = Neg(B)
      })");
  EXPECT_TRUE(Fold(model));
  EXPECT_THAT(Nodes(model.graph()), ElementsAre("Y = Neg(X)"));
}

TEST(FoldCastsTest, RoundTripKeepsFp32ValueOthersRead) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float16[2] X) => (float16[2] Y, float[2] Z) {
        A = Cast<to = 1>(X)
        B = Cast<to = 10>(A)
        Y = Neg(B)
        Z = Exp(A)
      })");
  EXPECT_TRUE(Fold(model));
  EXPECT_THAT(Nodes(model.graph()), ElementsAre("A = Cast<1>(X)", "Y = Neg(X)", "Z = Exp(A)"));
}

TEST(FoldCastsTest, Fp32ToLowToFp32IsLossyAndKept) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X) => (float[2] Y) {
        A = Cast<to = 10>(X)
        B = Cast<to = 1>(A)
        Y = Neg(B)
      })");
  const std::string before = model.SerializeAsString();
  EXPECT_FALSE(Fold(model));
  EXPECT_EQ(model.SerializeAsString(), before);
}

TEST(FoldCastsTest, Fp16ToFp32ToBf16IsKept) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float16[2] X) => (bfloat16[2] Y) {
        A = Cast<to = 1>(X)
        B = Cast<to = 16>(A)
        Y = Neg(B)
      })");
  EXPECT_FALSE(Fold(model));
  EXPECT_THAT(Nodes(model.graph()), ElementsAre("A = Cast<1>(X)", "B = Cast<16>(A)", "Y = Neg(B)"));
}

TEST(FoldCastsTest, SameDtypeCastIsRemoved) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X) => (float[2] Y) {
        A = Cast<to = 1>(X)
        Y = Neg(A)
      })");
  EXPECT_TRUE(Fold(model));
  EXPECT_THAT(Nodes(model.graph()), ElementsAre("Y = Neg(X)"));
  EXPECT_EQ(DeclaredDtype(model.graph(), "A"), 0);  // its value_info went with it
}

TEST(FoldCastsTest, CastOfValueOfUnknownDtypeIsKept) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X) => (float[2] Y) {
        A = Neg(X)
        B = Cast<to = 1>(A)
        Y = Neg(B)
      })");
  EXPECT_FALSE(Fold(model));
  EXPECT_THAT(Nodes(model.graph()), ElementsAre("A = Neg(X)", "B = Cast<1>(A)", "Y = Neg(B)"));
}

TEST(FoldCastsTest, InitializerCastFoldsIntoConvertedInitializer) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float16[4] X) => (float16[4] Y) <float[4] W = {1.0, 0.1, 70000.0, -0.0000001}> {
        Wh = Cast<to = 10>(W)
        Y = Add(X, Wh)
      })");
  EXPECT_TRUE(Fold(model));
  EXPECT_THAT(Nodes(model.graph()), ElementsAre("Y = Add(X, W_fp16)"));
  // The FP32 original lost its only reader to the fold, so it goes.
  ASSERT_THAT(InitializerNames(model.graph()), ElementsAre("W_fp16"));
  const TensorProto& converted = model.graph().initializer(0);
  EXPECT_EQ(converted.data_type(), TensorProto::FLOAT16);
  EXPECT_THAT(converted.dims(), ElementsAre(4));
  EXPECT_THAT(Bits16(converted), ElementsAre(FloatToHalf(1.0f), FloatToHalf(0.1f),
                                             FloatToHalf(70000.0f), FloatToHalf(-0.0000001f)));
}

// A weight left in its data file (passes/graph/deferred_data.h) folds as one in memory would.
TEST(FoldCastsTest, DeferredInitializerCastFoldsFromItsFile) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float16[4] X) => (float16[4] Y) <float[4] W = {0, 0, 0, 0}> {
        Wh = Cast<to = 10>(W)
        Y = Add(X, Wh)
      })");
  const float values[4] = {1.0f, 0.1f, 70000.0f, -0.0000001f};
  FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(std::fwrite(values, sizeof(values), 1, file), 1u);
  ASSERT_EQ(std::fflush(file), 0);
  const int index = AddDeferredFile(::dup(::fileno(file)), "test.onnx.data");
  std::fclose(file);
  TensorProto& weight = *model.mutable_graph()->mutable_initializer(0);
  weight.clear_float_data();
  MakeDeferred(weight, {index, 0, sizeof(values)});
  EXPECT_TRUE(Fold(model));
  EXPECT_THAT(Nodes(model.graph()), ElementsAre("Y = Add(X, W_fp16)"));
  ASSERT_THAT(InitializerNames(model.graph()), ElementsAre("W_fp16"));
  EXPECT_THAT(Bits16(model.graph().initializer(0)),
              ElementsAre(FloatToHalf(1.0f), FloatToHalf(0.1f), FloatToHalf(70000.0f),
                          FloatToHalf(-0.0000001f)));
}

TEST(FoldCastsTest, ConstantNodeCastFolds) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float16[2] X) => (float16[2] Y) {
        C = Constant<value = float[2] {1.5, -2.25}>()
        Ch = Cast<to = 10>(C)
        Y = Add(X, Ch)
      })");
  EXPECT_TRUE(Fold(model));
  EXPECT_THAT(Nodes(model.graph()), ElementsAre("Y = Add(X, C_fp16)"));
  ASSERT_THAT(InitializerNames(model.graph()), ElementsAre("C_fp16"));
  EXPECT_THAT(Bits16(model.graph().initializer(0)),
              ElementsAre(FloatToHalf(1.5f), FloatToHalf(-2.25f)));
}

TEST(FoldCastsTest, Fp16InitializerCastUpFolds) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X) => (float[2] Y) {
        W32 = Cast<to = 1>(Wh)
        Y = Add(X, W32)
      })");
  TensorProto* wh = model.mutable_graph()->add_initializer();
  wh->set_name("Wh");
  wh->set_data_type(TensorProto::FLOAT16);
  wh->add_dims(2);
  const uint16_t bits[2] = {0x3c01, 0x8001};  // 1 + 2^-10 and the smallest negative subnormal
  wh->set_raw_data(std::string(reinterpret_cast<const char*>(bits), sizeof(bits)));
  ASSERT_TRUE(InferTypesStrict(model, "input").ok());

  EXPECT_TRUE(Fold(model));
  EXPECT_THAT(Nodes(model.graph()), ElementsAre("Y = Add(X, Wh_fp32)"));
  ASSERT_THAT(InitializerNames(model.graph()), ElementsAre("Wh_fp32"));
  const TensorProto& converted = model.graph().initializer(0);
  EXPECT_EQ(converted.data_type(), TensorProto::FLOAT);
  float values[2];
  ASSERT_EQ(converted.raw_data().size(), sizeof(values));
  std::memcpy(values, converted.raw_data().data(), sizeof(values));
  EXPECT_EQ(values[0], HalfToFloat(bits[0]));
  EXPECT_EQ(values[1], HalfToFloat(bits[1]));
}

// Folding FP32 -> FP16 -> FP32 of a constant keeps the rounding: it is done at compile time, and
// the FP16 copy made on the way is dropped.
TEST(FoldCastsTest, LossyConstantRoundTripFoldsToRoundedValues) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X) => (float[2] Y) <float[2] W = {0.1, 3.0}> {
        Wh = Cast<to = 10>(W)
        W32 = Cast<to = 1>(Wh)
        Y = Add(X, W32)
      })");
  EXPECT_TRUE(Fold(model));
  EXPECT_THAT(Nodes(model.graph()), ElementsAre("Y = Add(X, W_fp16_fp32)"));
  ASSERT_THAT(InitializerNames(model.graph()), ElementsAre("W_fp16_fp32"));
  float values[2];
  std::memcpy(values, model.graph().initializer(0).raw_data().data(), sizeof(values));
  EXPECT_EQ(values[0], HalfToFloat(FloatToHalf(0.1f)));
  EXPECT_NE(values[0], 0.1f);
  EXPECT_EQ(values[1], 3.0f);
}

TEST(FoldCastsTest, InitializerThatIsAGraphInputIsNotFolded) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float16[2] X, float[2] W = {1.0, 2.0}) => (float16[2] Y) {
        Wh = Cast<to = 10>(W)
        Y = Add(X, Wh)
      })");
  EXPECT_FALSE(Fold(model));
  EXPECT_THAT(Nodes(model.graph()), ElementsAre("Wh = Cast<10>(W)", "Y = Add(X, Wh)"));
  EXPECT_THAT(InitializerNames(model.graph()), ElementsAre("W"));
}

TEST(FoldCastsTest, DuplicateCastsMerge) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X) => (float16[2] Y) {
        A = Cast<to = 10>(X)
        N = Neg(X)
        B = Cast<to = 10>(X)
        Y = Add(A, B)
      })");
  EXPECT_TRUE(Fold(model));
  EXPECT_THAT(Nodes(model.graph()), ElementsAre("A = Cast<10>(X)", "N = Neg(X)", "Y = Add(A, A)"));
}

constexpr char kMotionModel[] = R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float16[2, 3] X) => (float16[2, 3] Y) <int64[2] S = {3, 2}> {
      A = Cast<to = 1>(X)
      R = Reshape(A, S)
      T = Transpose<perm = [1, 0]>(R)
      Th = Cast<to = 10>(T)
      Y = Neg(Th)
    })";

TEST(FoldCastsTest, CastMovesAcrossReshapeAndTranspose) {
  onnx::ModelProto model = Typed(kMotionModel);
  EXPECT_TRUE(Fold(model));
  EXPECT_THAT(Nodes(model.graph()),
              ElementsAre("R = Reshape(X, S)", "T = Transpose(R)", "Y = Neg(T)"));
  EXPECT_EQ(DeclaredDtype(model.graph(), "R"), TensorProto::FLOAT16);
  EXPECT_EQ(DeclaredDtype(model.graph(), "T"), TensorProto::FLOAT16);
}

TEST(FoldCastsTest, CastMotionKeepsTheUpcastOthersRead) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float16[2, 3] X) => (float16[3, 2] Y, float[2, 3] Z) <int64[2] S = {3, 2}> {
        A = Cast<to = 1>(X)
        R = Reshape(A, S)
        Rh = Cast<to = 10>(R)
        Y = Neg(Rh)
        Z = Exp(A)
      })");
  EXPECT_TRUE(Fold(model));
  EXPECT_THAT(Nodes(model.graph()),
              ElementsAre("A = Cast<1>(X)", "R = Reshape(X, S)", "Y = Neg(R)", "Z = Exp(A)"));
}

TEST(FoldCastsTest, CastMotionNeedsEveryReaderToCastBack) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float16[2, 3] X) => (float16[3, 2] Y, float[3, 2] Z) <int64[2] S = {3, 2}> {
        A = Cast<to = 1>(X)
        R = Reshape(A, S)
        Rh = Cast<to = 10>(R)
        Y = Neg(Rh)
        Z = Exp(R)
      })");
  EXPECT_FALSE(Fold(model));
}

TEST(FoldCastsTest, CastNeverMovesAcrossArithmetic) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float16[2] X) => (float16[2] Y) {
        A = Cast<to = 1>(X)
        S = Sigmoid(A)
        Sh = Cast<to = 10>(S)
        Y = Neg(Sh)
      })");
  EXPECT_FALSE(Fold(model));
}

TEST(FoldCastsTest, NothingToDoReturnsFalse) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X) => (float16[2] Y) {
        A = Cast<to = 10>(X)
        Y = Neg(A)
      })");
  const std::string before = model.SerializeAsString();
  EXPECT_FALSE(Fold(model));
  EXPECT_EQ(model.SerializeAsString(), before);
}

TEST(FoldCastsTest, SecondRunChangesNothing) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float16[2, 3] X, float[2, 3] F) => (float16[2, 3] Y, float[2, 3] Z)
          <int64[2] S = {3, 2}, float[2, 3] W = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0}> {
        A = Cast<to = 1>(X)
        B = Cast<to = 10>(A)
        A2 = Cast<to = 1>(B)
        R = Reshape(A2, S)
        Rh = Cast<to = 10>(R)
        Rf = Cast<to = 1>(Rh)
        Rs = Reshape(Rf, S)
        T = Transpose<perm = [1, 0]>(Rs)
        Th = Cast<to = 10>(T)
        Wh = Cast<to = 10>(W)
        Fh = Cast<to = 10>(F)
        Ff = Cast<to = 1>(Fh)
        Fh2 = Cast<to = 10>(F)
        M = Add(Th, Wh)
        Y = Add(M, Fh2)
        Z = Add(Ff, A)
      })");
  EXPECT_TRUE(Fold(model));
  EXPECT_THAT(Nodes(model.graph()),
              ElementsAre("A = Cast<1>(X)", "R = Reshape(X, S)", "Rs = Reshape(R, S)",
                          "T = Transpose(Rs)", "Fh = Cast<10>(F)", "Ff = Cast<1>(Fh)",
                          "M = Add(T, W_fp16)", "Y = Add(M, Fh)", "Z = Add(Ff, A)"));
  const std::string once = model.SerializeAsString();
  EXPECT_FALSE(Fold(model));
  EXPECT_EQ(model.SerializeAsString(), once);
}

TEST(FoldCastsTest, IfBranchesAreFolded) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (bool C, float16[2] X) => (float16[2] Y) {
        Y = If(C) <
          then_branch = t () => (float16[2] P) {
            A = Cast<to = 1>(X)
            B = Cast<to = 10>(A)
            P = Neg(B)
          },
          else_branch = e () => (float16[2] Q) {
            D = Cast<to = 10>(X)
            Q = Neg(D)
          }>
      })");
  EXPECT_TRUE(Fold(model));
  const onnx::NodeProto& if_node = model.graph().node(0);
  EXPECT_THAT(Nodes(if_node.attribute(0).g()), ElementsAre("P = Neg(X)"));
  EXPECT_THAT(Nodes(if_node.attribute(1).g()), ElementsAre("Q = Neg(X)"));
}

TEST(FoldCastsTest, EnclosingGraphConstantFoldsInsideBranch) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (bool C, float16[2] X) => (float16[2] Y) <float[2] W = {0.5, 4.0}> {
        Y = If(C) <
          then_branch = t () => (float16[2] P) {
            Wh = Cast<to = 10>(W)
            P = Add(X, Wh)
          },
          else_branch = e () => (float16[2] Q) { Q = Neg(X) }>
      })");
  EXPECT_TRUE(Fold(model));
  const onnx::GraphProto& branch = model.graph().node(0).attribute(0).g();
  EXPECT_THAT(Nodes(branch), ElementsAre("P = Add(X, W_fp16)"));
  ASSERT_THAT(InitializerNames(branch), ElementsAre("W_fp16"));
  EXPECT_THAT(Bits16(branch.initializer(0)), ElementsAre(FloatToHalf(0.5f), FloatToHalf(4.0f)));
  EXPECT_THAT(InitializerNames(model.graph()), ElementsAre("W"));
}

TEST(FoldCastsTest, CastReadBySubgraphIsKept) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (bool C, float16[2] X) => (float16[2] Y) {
        A = Cast<to = 1>(X)
        B = Cast<to = 10>(A)
        Y = If(C) <
          then_branch = t () => (float16[2] P) { P = Neg(B) },
          else_branch = e () => (float16[2] Q) { Q = Abs(B) }>
      })");
  EXPECT_FALSE(Fold(model));
  EXPECT_THAT(Nodes(model.graph()), ElementsAre("A = Cast<1>(X)", "B = Cast<10>(A)", "Y = If(C)"));
}

TEST(FoldCastsTest, GraphOutputProducedByCastKeepsNameAndType) {
  onnx::ModelProto model = Typed(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float16[2] X, float[2] F) => (float16[2] Y, float[2] Z, float16[2] V)
          <float[2] W = {1.0, 2.0}> {
        A = Cast<to = 1>(X)
        Y = Cast<to = 10>(A)
        Z = Cast<to = 1>(F)
        V = Cast<to = 10>(W)
      })");
  EXPECT_FALSE(Fold(model));
  EXPECT_THAT(Nodes(model.graph()), ElementsAre("A = Cast<1>(X)", "Y = Cast<10>(A)",
                                                "Z = Cast<1>(F)", "V = Cast<10>(W)"));
  EXPECT_EQ(DeclaredDtype(model.graph(), "Y"), TensorProto::FLOAT16);
  EXPECT_EQ(DeclaredDtype(model.graph(), "V"), TensorProto::FLOAT16);
}

void AddNode(onnx::GraphProto& graph, const std::string& op, const std::string& input,
             const std::string& output, int to = 0) {
  onnx::NodeProto* node = graph.add_node();
  node->set_op_type(op);
  node->add_input(input);
  node->add_output(output);
  if (to == 0) return;
  onnx::AttributeProto* attribute = node->add_attribute();
  attribute->set_name("to");
  attribute->set_type(onnx::AttributeProto::INT);
  attribute->set_i(to);
}

void Declare(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& infos,
             const std::string& name, int dtype) {
  onnx::ValueInfoProto* info = infos.Add();
  info->set_name(name);
  auto* tensor = info->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(dtype);
  tensor->mutable_shape()->add_dim()->set_dim_value(4);
}

TEST(FoldCastsTest, LongChainFinishes) {
  constexpr int kSteps = 200000 / 3;
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto& graph = *model.mutable_graph();
  graph.set_name("chain");
  Declare(*graph.mutable_input(), "X", TensorProto::FLOAT16);
  std::string previous = "X";
  for (int i = 0; i < kSteps; ++i) {
    const std::string step = absl::StrCat(i);
    AddNode(graph, "Cast", previous, "A" + step, TensorProto::FLOAT);
    AddNode(graph, "Cast", "A" + step, "B" + step, TensorProto::FLOAT16);
    previous = "N" + step;
    AddNode(graph, "Neg", "B" + step, previous);
    Declare(*graph.mutable_value_info(), previous, TensorProto::FLOAT16);
  }
  graph.mutable_value_info()->RemoveLast();
  Declare(*graph.mutable_output(), previous, TensorProto::FLOAT16);

  EXPECT_TRUE(Fold(model));
  ASSERT_EQ(graph.node_size(), kSteps);
  EXPECT_EQ(Nodes(graph).back(), absl::StrCat(previous, " = Neg(N", kSteps - 2, ")"));
  EXPECT_EQ(graph.initializer_size(), 0);
}

}  // namespace
}  // namespace ampc
