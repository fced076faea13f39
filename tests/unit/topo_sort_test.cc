#include "passes/graph/topo_sort.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/model_text.h"

namespace ampc {
namespace {

using ::testing::ElementsAre;

onnx::ModelProto Parse(const std::string& text) { return ampc::testing::ParseModelText(text); }

// The first output of each node, in node order.
std::vector<std::string> Order(const onnx::GraphProto& graph) {
  std::vector<std::string> order;
  for (const onnx::NodeProto& node : graph.node()) order.push_back(node.output(0));
  return order;
}

void Reverse(onnx::GraphProto& graph) {
  std::vector<onnx::NodeProto> nodes(graph.node().begin(), graph.node().end());
  graph.clear_node();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) *graph.add_node() = *it;
}

TEST(TopoSortTest, SortedGraphIsUnchanged) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X) => (float[2] Y) {
        A = Relu(X)
        B = Abs(X)
        C = Add(A, B)
        Y = Neg(C)
      })");
  const std::string before = model.SerializeAsString();
  absl::StatusOr<bool> moved = TopologicalSort(*model.mutable_graph());
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_FALSE(*moved);
  EXPECT_EQ(model.SerializeAsString(), before);
}

TEST(TopoSortTest, ReversedChain) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X) => (float[2] Y) { A = Relu(X) B = Abs(A) C = Neg(B) Y = Exp(C) })");
  Reverse(*model.mutable_graph());
  ASSERT_THAT(Order(model.graph()), ElementsAre("Y", "C", "B", "A"));
  absl::StatusOr<bool> moved = TopologicalSort(*model.mutable_graph());
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_TRUE(*moved);
  EXPECT_THAT(Order(model.graph()), ElementsAre("A", "B", "C", "Y"));
}

TEST(TopoSortTest, Diamond) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X) => (float[2] D) {
        D = Add(B, C)
        C = Abs(A)
        B = Relu(A)
        A = Neg(X)
      })");
  ASSERT_TRUE(TopologicalSort(*model.mutable_graph()).ok());
  // Among ready nodes the earlier one goes first: C before B, as given.
  EXPECT_THAT(Order(model.graph()), ElementsAre("A", "C", "B", "D"));
}

TEST(TopoSortTest, StableAmongIndependentNodes) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X) => (float[2] P2, float[2] Q, float[2] R) {
        P2 = Relu(P1)
        Q = Abs(X)
        P1 = Neg(X)
        R = Exp(X)
      })");
  ASSERT_TRUE(TopologicalSort(*model.mutable_graph()).ok());
  EXPECT_THAT(Order(model.graph()), ElementsAre("Q", "P1", "P2", "R"));
}

TEST(TopoSortTest, CycleNamesANodeAndValueOnIt) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X) => (float[2] Y) {
        Y = Relu(A)
        A = Add(X, B)
        B = Mul(A, X)
      })");
  model.mutable_graph()->mutable_node(1)->set_name("a");
  model.mutable_graph()->mutable_node(2)->set_name("b");
  absl::StatusOr<bool> moved = TopologicalSort(*model.mutable_graph());
  ASSERT_FALSE(moved.ok());
  EXPECT_EQ(moved.status().code(), absl::StatusCode::kInvalidArgument);
  // Y waits on the cycle but is not on it; the message names a node that is.
  EXPECT_EQ(moved.status().message(),
            "graph 'g' has a cycle: node 'a' (Add) waits for value 'B', produced by node 'b' "
            "(Mul), which depends on node 'a'");
}

TEST(TopoSortTest, NodeReadingItsOwnOutput) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X) => (float[2] Y) { Y = Add(X, Y) })");
  absl::StatusOr<bool> moved = TopologicalSort(*model.mutable_graph());
  ASSERT_FALSE(moved.ok());
  EXPECT_EQ(moved.status().message(),
            "graph 'g' has a cycle: node #0 (Add) waits for value 'Y', produced by itself");
}

TEST(TopoSortTest, SubgraphReadsAreEdges) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (bool C, float[2] X) => (float[2] Y) {
        Y = If(C) <
          then_branch = then_g () => (float[2] A) {
            A = If(C) <
              then_branch = deep () => (float[2] D) { D = Add(T, X) },
              else_branch = deep_else () => (float[2] E) { E = Identity(X) }>
          },
          else_branch = else_g () => (float[2] B) { B = Identity(X) }>
        T = Relu(X)
      })");
  absl::StatusOr<bool> moved = TopologicalSort(*model.mutable_graph());
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_TRUE(*moved);
  EXPECT_THAT(Order(model.graph()), ElementsAre("T", "Y"));
}

TEST(TopoSortTest, SortsInsideSubgraphs) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (bool C, float[2] X) => (float[2] Y) {
        Y = If(C) <
          then_branch = then_g () => (float[2] A) { A = Neg(M) M = Relu(X) },
          else_branch = else_g () => (float[2] B) { B = Identity(X) }>
      })");
  absl::StatusOr<bool> moved = TopologicalSort(*model.mutable_graph());
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_TRUE(*moved);
  EXPECT_THAT(Order(model.graph().node(0).attribute(0).g()), ElementsAre("M", "A"));
}

TEST(TopoSortTest, CycleInsideSubgraph) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (bool C, float[2] X) => (float[2] Y) {
        Y = If(C) <
          then_branch = then_g () => (float[2] A) { A = Neg(M) M = Relu(A) },
          else_branch = else_g () => (float[2] B) { B = Identity(X) }>
      })");
  absl::StatusOr<bool> moved = TopologicalSort(*model.mutable_graph());
  ASSERT_FALSE(moved.ok());
  EXPECT_EQ(moved.status().message(),
            "graph 'then_g' has a cycle: node #0 (Neg) waits for value 'M', produced by node #1 "
            "(Relu), which depends on node #0");
}

TEST(TopoSortTest, ValueProducedTwice) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] X) => (float[2] Y) { Y = Relu(X) Y = Abs(X) })");
  absl::StatusOr<bool> moved = TopologicalSort(*model.mutable_graph());
  ASSERT_FALSE(moved.ok());
  EXPECT_EQ(moved.status().message(),
            "graph 'g': value 'Y' is produced twice, by node #0 (Relu) and by node #1 (Abs)");
}

// A quadratic sort would take minutes here; this finishes in well under a second.
TEST(TopoSortTest, LongReversedChain) {
  constexpr int kLength = 200000;
  onnx::GraphProto graph;
  graph.set_name("chain");
  graph.add_input()->set_name("v0");
  for (int i = kLength; i >= 1; --i) {
    onnx::NodeProto* node = graph.add_node();
    node->set_op_type("Relu");
    node->add_input(absl::StrCat("v", i - 1));
    node->add_output(absl::StrCat("v", i));
  }
  graph.add_output()->set_name(absl::StrCat("v", kLength));
  absl::StatusOr<bool> moved = TopologicalSort(graph);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_TRUE(*moved);
  for (int i = 0; i < kLength; ++i) ASSERT_EQ(graph.node(i).input(0), absl::StrCat("v", i));
  moved = TopologicalSort(graph);
  ASSERT_TRUE(moved.ok());
  EXPECT_FALSE(*moved);
}

}  // namespace
}  // namespace ampc
