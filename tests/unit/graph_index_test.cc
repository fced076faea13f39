#include "passes/graph/graph_index.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/model_text.h"

namespace ampc {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

onnx::ModelProto Parse(const std::string& text) { return ampc::testing::ParseModelText(text); }

std::unique_ptr<GraphIndex> BuildOk(const onnx::GraphProto& graph) {
  absl::StatusOr<std::unique_ptr<GraphIndex>> index = GraphIndex::Build(graph);
  EXPECT_TRUE(index.ok()) << index.status();
  return index.ok() ? *std::move(index) : nullptr;
}

// Uses as (node position, slot) pairs, for readable expectations.
std::vector<std::pair<int, int>> Uses(const GraphIndex& index, std::string_view value) {
  std::vector<std::pair<int, int>> uses;
  for (const ValueUse& use : index.Consumers(value)) {
    uses.emplace_back(index.NodeIndex(*use.node), use.slot);
  }
  return uses;
}

constexpr int kImplicit = ValueUse::kImplicitSlot;

TEST(GraphIndexTest, ProducerAndConsumerSlots) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X) => (float[2] Y, float[1] B) {
        T = Relu(X)
        A, B = Split(T)
        Y = Add(T, X)
      })");
  std::unique_ptr<GraphIndex> index = BuildOk(model.graph());
  ASSERT_NE(index, nullptr);
  const onnx::GraphProto& g = model.graph();

  const ValueSource* t = index->Source("T");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->kind, ValueSource::Kind::kNode);
  EXPECT_EQ(t->node, &g.node(0));
  EXPECT_EQ(t->slot, 0);
  EXPECT_EQ(index->Source("B")->node, &g.node(1));
  EXPECT_EQ(index->Source("B")->slot, 1);
  EXPECT_EQ(index->Source("X")->kind, ValueSource::Kind::kGraphInput);
  EXPECT_EQ(index->Source("nothing"), nullptr);

  EXPECT_THAT(Uses(*index, "X"), ElementsAre(std::pair(0, 0), std::pair(2, 1)));
  EXPECT_THAT(Uses(*index, "T"), ElementsAre(std::pair(1, 0), std::pair(2, 0)));
  EXPECT_THAT(Uses(*index, "Y"), IsEmpty());
  EXPECT_TRUE(index->IsGraphOutput("Y"));
  EXPECT_TRUE(index->IsGraphOutput("B"));
  EXPECT_FALSE(index->IsGraphOutput("T"));
  EXPECT_EQ(index->NodeIndex(g.node(2)), 2);
  EXPECT_TRUE(index->OuterScopeRefs().empty());
}

TEST(GraphIndexTest, EmptyInputIsNotAValue) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X, float M) => (float[2] Y) { Y = Clip(X, M, M) })");
  model.mutable_graph()->mutable_node(0)->set_input(1, "");  // min omitted
  std::unique_ptr<GraphIndex> index = BuildOk(model.graph());
  ASSERT_NE(index, nullptr);
  EXPECT_EQ(index->Source(""), nullptr);
  EXPECT_THAT(Uses(*index, ""), IsEmpty());
  EXPECT_THAT(Uses(*index, "M"), ElementsAre(std::pair(0, 2)));
}

TEST(GraphIndexTest, InitializersAndTheirTypes) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X, float[2] W = {1.0, 2.0}) => (float[2] Y) <int64[2] S = {2, 1}> {
        Y = Add(X, W)
      })");
  onnx::TensorProto* s = model.mutable_graph()->mutable_initializer(1);
  ASSERT_EQ(s->name(), "S");
  s->clear_dims();  // give it a shape no declaration states
  s->add_dims(2);
  s->add_dims(1);
  model.mutable_graph()->clear_value_info();
  std::unique_ptr<GraphIndex> index = BuildOk(model.graph());
  ASSERT_NE(index, nullptr);

  // An initializer that is also a graph input is the input's default value.
  EXPECT_EQ(index->Source("W")->kind, ValueSource::Kind::kGraphInput);
  EXPECT_EQ(index->Initializer("W"), &model.graph().initializer(0));
  EXPECT_EQ(index->Type("W"), &model.graph().input(1).type());

  EXPECT_EQ(index->Source("S")->kind, ValueSource::Kind::kInitializer);
  const onnx::TypeProto* type = index->Type("S");
  ASSERT_NE(type, nullptr);
  EXPECT_EQ(type->tensor_type().elem_type(), onnx::TensorProto::INT64);
  ASSERT_EQ(type->tensor_type().shape().dim_size(), 2);
  EXPECT_EQ(type->tensor_type().shape().dim(0).dim_value(), 2);
  EXPECT_EQ(type->tensor_type().shape().dim(1).dim_value(), 1);
  EXPECT_EQ(index->Initializer("X"), nullptr);
}

TEST(GraphIndexTest, ValueTypesFromValueInfoAndOutputs) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X) => (double[2] Y) <float16[2] T> {
        T = Cast<to = 10>(X)
        U = Relu(T)
        Y = Cast<to = 11>(U)
      })");
  std::unique_ptr<GraphIndex> index = BuildOk(model.graph());
  ASSERT_NE(index, nullptr);
  EXPECT_EQ(index->Type("X")->tensor_type().elem_type(), onnx::TensorProto::FLOAT);
  EXPECT_EQ(index->Type("T")->tensor_type().elem_type(), onnx::TensorProto::FLOAT16);
  EXPECT_EQ(index->Type("Y")->tensor_type().elem_type(), onnx::TensorProto::DOUBLE);
  EXPECT_EQ(index->Type("U"), nullptr);
}

constexpr char kIfModel[] = R"(<ir_version: 8, opset_import: ["" : 17]>
    g (bool C, float[2] X, float[2] W = {1.0, 2.0}) => (float[2] Y) {
      T = Relu(X)
      Y = If(C) <
        then_branch = then_g () => (float[2] A) {
          A = Add(T, W)
        },
        else_branch = else_g () => (float[2] B) {
          B = Mul(X, T)
        }>
    })";

TEST(GraphIndexTest, IfBranchesReadOuterScope) {
  onnx::ModelProto model = Parse(kIfModel);
  std::unique_ptr<GraphIndex> index = BuildOk(model.graph());
  ASSERT_NE(index, nullptr);
  const onnx::NodeProto& if_node = model.graph().node(1);

  // Both branches read T: the If reads it implicitly, once.
  EXPECT_THAT(Uses(*index, "T"), ElementsAre(std::pair(1, kImplicit)));
  EXPECT_THAT(Uses(*index, "X"), ElementsAre(std::pair(0, 0), std::pair(1, kImplicit)));
  EXPECT_THAT(Uses(*index, "C"), ElementsAre(std::pair(1, 0)));
  EXPECT_TRUE(index->OuterScopeRefs().empty());

  std::vector<const GraphIndex*> branches = index->Subgraphs(if_node);
  ASSERT_EQ(branches.size(), 2u);
  const GraphIndex& then_index = *branches[0];
  EXPECT_EQ(&then_index.graph(), &if_node.attribute(0).g());
  EXPECT_EQ(then_index.outer(), index.get());
  EXPECT_THAT(then_index.OuterScopeRefs(), ElementsAre("T", "W"));
  EXPECT_THAT(branches[1]->OuterScopeRefs(), ElementsAre("X", "T"));
  EXPECT_EQ(then_index.Source("T")->kind, ValueSource::Kind::kOuterScope);
  EXPECT_EQ(then_index.Source("A")->kind, ValueSource::Kind::kNode);
  EXPECT_EQ(then_index.Source("B"), nullptr);  // the other branch's value
  EXPECT_THAT(Uses(then_index, "T"), ElementsAre(std::pair(0, 0)));
  // Types and initializers are searched outward.
  EXPECT_EQ(then_index.Type("X"), &model.graph().input(1).type());
  EXPECT_EQ(then_index.Initializer("W"), &model.graph().initializer(0));
  EXPECT_TRUE(then_index.IsGraphOutput("A"));
  EXPECT_FALSE(then_index.IsGraphOutput("Y"));
  EXPECT_TRUE(index->Subgraphs(model.graph().node(0)).empty());
}

TEST(GraphIndexTest, NestedSubgraphsTwoLevels) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (bool C, float[2] X) => (float[2] Y) {
        Y = If(C) <
          then_branch = mid () => (float[2] M) {
            A = Relu(X)
            M = If(C) <
              then_branch = inner () => (float[2] I) { I = Add(A, X) },
              else_branch = inner_else () => (float[2] E) { E = Identity(A) }>
          },
          else_branch = mid_else () => (float[2] N) { N = Identity(X) }>
      })");
  std::unique_ptr<GraphIndex> top = BuildOk(model.graph());
  ASSERT_NE(top, nullptr);
  const GraphIndex& mid = *top->Subgraphs(model.graph().node(0))[0];
  const onnx::NodeProto& inner_if = mid.graph().node(1);
  const GraphIndex& inner = *mid.Subgraphs(inner_if)[0];

  EXPECT_THAT(inner.OuterScopeRefs(), ElementsAre("A", "X"));
  EXPECT_EQ(inner.Source("X")->kind, ValueSource::Kind::kOuterScope);
  EXPECT_EQ(inner.outer()->outer(), top.get());
  // The middle graph reads X itself and through its nested If; A is its own value.
  EXPECT_THAT(mid.OuterScopeRefs(), ElementsAre("X", "C"));
  EXPECT_THAT(Uses(mid, "A"), ElementsAre(std::pair(1, kImplicit)));
  EXPECT_THAT(Uses(mid, "X"), ElementsAre(std::pair(0, 0), std::pair(1, kImplicit)));
  EXPECT_THAT(Uses(*top, "X"), ElementsAre(std::pair(0, kImplicit)));
  EXPECT_THAT(Uses(*top, "C"), ElementsAre(std::pair(0, 0), std::pair(0, kImplicit)));
  EXPECT_TRUE(top->OuterScopeRefs().empty());
}

TEST(GraphIndexTest, LoopBodyInputsAreLocal) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (int64 N, bool C, float[2] X) => (float[2] Y) {
        Y = Loop(N, C, X) <body = body (int64 i, bool c, float[2] v) => (bool co, float[2] vo) {
          co = Identity(c)
          vo = Add(v, X)
        }>
      })");
  std::unique_ptr<GraphIndex> index = BuildOk(model.graph());
  ASSERT_NE(index, nullptr);
  const GraphIndex& body = *index->Subgraphs(model.graph().node(0))[0];
  EXPECT_THAT(body.OuterScopeRefs(), ElementsAre("X"));
  EXPECT_EQ(body.Source("v")->kind, ValueSource::Kind::kGraphInput);
  EXPECT_THAT(Uses(*index, "X"), ElementsAre(std::pair(0, 2), std::pair(0, kImplicit)));
}

TEST(GraphIndexTest, ValueProducedByTwoNodes) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X) => (float[2] T) { T = Relu(X) T = Abs(X) })");
  model.mutable_graph()->mutable_node(0)->set_name("first");
  absl::StatusOr<std::unique_ptr<GraphIndex>> index = GraphIndex::Build(model.graph());
  ASSERT_FALSE(index.ok());
  EXPECT_EQ(index.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(index.status().message(),
            "graph 'g': value 'T' is produced twice, by node 'first' (Relu) and by node #1 (Abs)");
}

TEST(GraphIndexTest, ValueProducedByNodeAndGraphInput) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X) => (float[2] Y) { X = Relu(X) Y = Abs(X) })");
  absl::StatusOr<std::unique_ptr<GraphIndex>> index = GraphIndex::Build(model.graph());
  ASSERT_FALSE(index.ok());
  EXPECT_THAT(index.status().message(), HasSubstr("value 'X' is produced twice"));
  EXPECT_THAT(index.status().message(), HasSubstr("graph input"));
  EXPECT_THAT(index.status().message(), HasSubstr("node #0 (Relu)"));
}

TEST(GraphIndexTest, DanglingInputNamesNodeAndValue) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X) => (float[2] Y) { Y = Add(X, Missing) })");
  model.mutable_graph()->mutable_node(0)->set_name("adder");
  absl::StatusOr<std::unique_ptr<GraphIndex>> index = GraphIndex::Build(model.graph());
  ASSERT_FALSE(index.ok());
  EXPECT_EQ(index.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(index.status().message(),
            "graph 'g': node 'adder' (Add) reads value 'Missing' (input 1), which nothing in "
            "scope defines");
}

TEST(GraphIndexTest, DanglingInputInsideSubgraph) {
  onnx::ModelProto model = Parse(kIfModel);
  onnx::GraphProto* else_branch =
      model.mutable_graph()->mutable_node(1)->mutable_attribute(1)->mutable_g();
  else_branch->mutable_node(0)->set_input(1, "Later");
  absl::StatusOr<std::unique_ptr<GraphIndex>> index = GraphIndex::Build(model.graph());
  ASSERT_FALSE(index.ok());
  EXPECT_THAT(index.status().message(), HasSubstr("graph 'else_g': node #0 (Mul) reads value "
                                                  "'Later'"));
  EXPECT_THAT(index.status().message(), HasSubstr("node #1 (If)"));
  EXPECT_THAT(index.status().message(), Not(HasSubstr("\n")));
}

TEST(GraphIndexTest, UndefinedGraphOutput) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X) => (float[2] Y) { Z = Relu(X) })");
  absl::StatusOr<std::unique_ptr<GraphIndex>> index = GraphIndex::Build(model.graph());
  ASSERT_FALSE(index.ok());
  EXPECT_THAT(index.status().message(), HasSubstr("output 'Y'"));
}

// Check is Build without the index: the same verdict and message on every graph, subgraphs too.
TEST(GraphIndexTest, CheckFailsWhereBuildFailsWithTheSameMessage) {
  std::vector<onnx::ModelProto> models = {Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
          g (float[2] X) => (float[2] T) { T = Relu(X) T = Abs(X) })"),
                                          Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
          g (float[2] X) => (float[2] Y) { X = Relu(X) Y = Abs(X) })"),
                                          Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
          g (float[2] X) => (float[2] Y) { Y = Add(X, Missing) })"),
                                          Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
          g (float[2] X) => (float[2] Y) { Z = Relu(X) })"),
                                          Parse(kIfModel),
                                          Parse(kIfModel)};
  models.back()
      .mutable_graph()
      ->mutable_node(1)
      ->mutable_attribute(1)
      ->mutable_g()
      ->mutable_node(0)
      ->set_input(1, "Later");
  for (const onnx::ModelProto& model : models) {
    absl::StatusOr<std::unique_ptr<GraphIndex>> index = GraphIndex::Build(model.graph());
    EXPECT_EQ(GraphIndex::Check(model.graph()), index.status());
  }
  EXPECT_TRUE(GraphIndex::Check(models[4].graph()).ok());
}

TEST(GraphIndexTest, DescribeNode) {
  onnx::NodeProto node;
  node.set_op_type("MatMul");
  EXPECT_EQ(DescribeNode(node, 7), "node #7 (MatMul)");
  node.set_name("mm");
  EXPECT_EQ(DescribeNode(node, 7), "node 'mm' (MatMul)");
}

}  // namespace
}  // namespace ampc
