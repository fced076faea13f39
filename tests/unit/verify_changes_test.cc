// The linear output check against ONNX's full one: every invalid change the full check catches,
// VerifyChanges must catch too, and a valid compile passes both.
#include "passes/verify_changes.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "passes/graph/graph_index.h"
#include "passes/infer_types.h"
#include "passes/verify.h"
#include "tests/support/model_text.h"

namespace ampc {
namespace {

using testing::ParseModelText;

constexpr char kModel[] = R"(<ir_version: 10, opset_import: ["" : 21]>
g (float[2,3] x, float[3,4] w) => (float[2,4] y) <float[4] b = {1, 2, 3, 4}> {
  m = MatMul(x, w)
  a = Add(m, b)
  y = Relu(a)
})";

// The full check of verify --verify=full.
absl::Status FullCheck(onnx::ModelProto model) {
  ModelContext context(model, "m.onnx");
  return Verify(/*full=*/true).Run(context).status();
}

// Infers types, snapshots them, applies `change` and returns VerifyChanges' verdict, after
// checking that the full check agrees.
absl::Status CheckAfter(const std::function<void(onnx::GraphProto&)>& change,
                        const char* text = kModel) {
  onnx::ModelProto model = ParseModelText(text);
  EXPECT_TRUE(InferTypesKeepingIo(model, "m.onnx").ok());
  const TypeSnapshot before(model, **GraphIndex::Build(model.graph()));
  change(*model.mutable_graph());
  EXPECT_TRUE(CanVerifyChanges(model));
  const absl::Status full = FullCheck(model);
  const absl::StatusOr<bool> verified = VerifyChanges(model, before, "m.onnx (ampc output)");
  EXPECT_TRUE(!verified.ok() || *verified) << "VerifyChanges left this model to the full check";
  const absl::Status changes = verified.status();
  EXPECT_EQ(full.ok(), changes.ok()) << "full: " << full << "\nchanges: " << changes;
  return changes;
}

onnx::ValueInfoProto* InfoOf(onnx::GraphProto& graph, const std::string& name) {
  for (onnx::ValueInfoProto& info : *graph.mutable_value_info()) {
    if (info.name() == name) return &info;
  }
  return nullptr;
}

TEST(VerifyChangesTest, UnchangedAndValidlyChangedModelsPass) {
  EXPECT_TRUE(CheckAfter([](onnx::GraphProto&) {}).ok());
  // A Cast inserted before Relu, typed as its 'to' says, and Relu retyped to match.
  const absl::Status status = CheckAfter([](onnx::GraphProto& graph) {
    onnx::NodeProto& relu = *graph.mutable_node(2);
    relu.set_input(0, "a16");
    onnx::NodeProto cast;
    cast.set_op_type("Cast");
    cast.add_input("a");
    cast.add_output("a16");
    onnx::AttributeProto& to = *cast.add_attribute();
    to.set_name("to");
    to.set_type(onnx::AttributeProto::INT);
    to.set_i(onnx::TensorProto::FLOAT16);
    *graph.mutable_node()->Add() = cast;
    graph.mutable_node()->SwapElements(2, 3);
    onnx::ValueInfoProto& info = *graph.add_value_info();
    info = *InfoOf(graph, "a");
    info.set_name("a16");
    info.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT16);
    graph.mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
        onnx::TensorProto::FLOAT16);
  });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(VerifyChangesTest, OutputTypeTheSchemaDoesNotInferIsCaught) {
  // Relu of a float declared float16: strict inference's "inferred elem type differs".
  const absl::Status status = CheckAfter([](onnx::GraphProto& graph) {
    graph.mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
        onnx::TensorProto::FLOAT16);
  });
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("m.onnx (ampc output): type inference"), std::string::npos)
      << status;
}

// b as FLOAT16 data (1, 2, 3, 4 as half bits).
void BiasToHalf(onnx::GraphProto& graph) {
  onnx::TensorProto& b = *graph.mutable_initializer(0);
  b.set_data_type(onnx::TensorProto::FLOAT16);
  b.clear_float_data();
  for (int bits : {0x3c00, 0x4000, 0x4200, 0x4400}) b.add_int32_data(bits);
}

TEST(VerifyChangesTest, InputsAgainstTheTypeConstraintsAreCaught) {
  // Add(float, float16): T binds to two types.
  const absl::Status status = CheckAfter(BiasToHalf);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("Add"), std::string::npos) << status;
}

TEST(VerifyChangesTest, InitializerAgainstItsDeclaredTypeIsCaught) {
  const absl::Status status = CheckAfter([](onnx::GraphProto& graph) {
    BiasToHalf(graph);
    onnx::ValueInfoProto& input = *graph.add_input();  // declared float: Add reads that
    input.set_name("b");
    input.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    input.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(4);
  });
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("initializer 'b'"), std::string::npos) << status;
}

TEST(VerifyChangesTest, NodesOutOfOrderAndUndefinedReadsAreCaught) {
  absl::Status status =
      CheckAfter([](onnx::GraphProto& graph) { graph.mutable_node()->SwapElements(0, 1); });
  EXPECT_NE(status.message().find("not in topological order"), std::string::npos) << status;
  status = CheckAfter([](onnx::GraphProto& graph) { graph.mutable_node(2)->set_input(0, "z"); });
  EXPECT_FALSE(status.ok());
}

TEST(VerifyChangesTest, ChangedNodesGetOnnxsNodeCheck) {
  // A Cast without its required 'to', writing a new value.
  const absl::Status status = CheckAfter([](onnx::GraphProto& graph) {
    onnx::NodeProto& relu = *graph.mutable_node(2);
    relu.set_op_type("Cast");
    relu.set_output(0, "c");
    graph.mutable_output(0)->set_name("c");
  });
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("ONNX checker"), std::string::npos) << status;
  EXPECT_NE(status.message().find("attribute 'to'"), std::string::npos) << status;
}

TEST(VerifyChangesTest, OutputTypeLeftOpenByAnAbsentOptionalInputIsInferred) {
  // QuantizeLinear without y_zero_point: the constraints cannot type y, its inference says
  // uint8, and y declared int8 must fail as under strict inference.
  const char* quantize = R"(<ir_version: 10, opset_import: ["" : 21]>
g (float[4] x) => (uint8[4] y) <float s = {0.5}> {
  y = QuantizeLinear(x, s)
})";
  EXPECT_TRUE(CheckAfter([](onnx::GraphProto&) {}, quantize).ok());
  const absl::Status status = CheckAfter(
      [](onnx::GraphProto& graph) {
        graph.mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
            onnx::TensorProto::INT8);
      },
      quantize);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("QuantizeLinear"), std::string::npos) << status;
}

constexpr char kTwoTypes[] = R"(<ir_version: 10, opset_import: ["" : 21]>
g (float[2] x, float16[2] h) => (float[2] y, float16[2] c) {
  y = Add(x, x)
  c = Cast <to = 10> (x)
})";

TEST(VerifyChangesTest, RewiredInputsAndAttributesChangedInPlaceAreCaught) {
  // Add rewired to an existing float16 value: its inputs no longer agree.
  absl::Status status = CheckAfter(
      [](onnx::GraphProto& graph) { graph.mutable_node(0)->set_input(1, "h"); }, kTwoTypes);
  EXPECT_FALSE(status.ok());
  // Cast's `to` changed in place, its output still declared float16.
  status = CheckAfter(
      [](onnx::GraphProto& graph) {
        graph.mutable_node(1)->mutable_attribute(0)->set_i(onnx::TensorProto::BFLOAT16);
      },
      kTwoTypes);
  EXPECT_FALSE(status.ok());
}

TEST(VerifyChangesTest, ShapesOfChangedNodesAreInferred) {
  // b with 5 values: Add of [2, 4] and [5] does not broadcast.
  const absl::Status status = CheckAfter([](onnx::GraphProto& graph) {
    onnx::TensorProto& b = *graph.mutable_initializer(0);
    b.set_dims(0, 5);
    b.add_float_data(5);
  });
  EXPECT_FALSE(status.ok());
}

TEST(VerifyChangesTest, NewOpsetsAndUntypedValuesAreLeftToTheFullCheck) {
  onnx::ModelProto model = ParseModelText(kModel);
  ASSERT_TRUE(InferTypesKeepingIo(model, "m.onnx").ok());
  const TypeSnapshot before(model, **GraphIndex::Build(model.graph()));
  onnx::ModelProto raised = model;
  raised.mutable_opset_import(0)->set_version(22);
  absl::StatusOr<bool> verified = VerifyChanges(raised, before, "m.onnx");
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_FALSE(*verified);
  onnx::ModelProto untyped = model;  // Relu reads a Cast output no value_info declares
  onnx::NodeProto& cast = *untyped.mutable_graph()->mutable_node()->Add();
  cast.set_op_type("Cast");
  cast.add_input("a");
  cast.add_output("a16");
  untyped.mutable_graph()->mutable_node()->SwapElements(2, 3);
  untyped.mutable_graph()->mutable_node(3)->set_input(0, "a16");
  verified = VerifyChanges(untyped, before, "m.onnx");
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_FALSE(*verified);
}

TEST(VerifyChangesTest, SubgraphsFunctionsAndTrainingGetTheFullCheck) {
  onnx::ModelProto model = ParseModelText(R"(<ir_version: 10, opset_import: ["" : 21]>
g (bool c, float[2] x) => (float[2] y) {
  y = If(c) <then_branch = t () => (float[2] z) { z = Identity(x) },
             else_branch = e () => (float[2] z) { z = Neg(x) }>
})");
  EXPECT_FALSE(CanVerifyChanges(model));
  model = ParseModelText(kModel);
  EXPECT_TRUE(CanVerifyChanges(model));
  model.add_training_info();
  EXPECT_FALSE(CanVerifyChanges(model));
}

}  // namespace
}  // namespace ampc
