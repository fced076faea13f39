#include "passes/graph/name_allocator.h"

#include <string>

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"
#include "tests/support/model_text.h"

namespace ampc {
namespace {

onnx::ModelProto Parse(const std::string& text) { return ampc::testing::ParseModelText(text); }

// Names everywhere a model can hold one: graph, nested subgraph, initializer, function.
constexpr char kModel[] = R"(<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
    g (bool C, float[2] X) => (float[2] Y) <float[2] W = {1.0, 2.0}> {
      T = local.F(X)
      Y = If(C) <
        then_branch = then_g () => (float[2] A) {
          A = If(C) <
            then_branch = deep () => (float[2] D) { D = Add(T, W) },
            else_branch = deep_else () => (float[2] E) { E = Identity(T) }>
        },
        else_branch = else_g () => (float[2] B) { B = Identity(X) }>
    }
    <domain: "local", opset_import: ["" : 17]>
    F (fin) => (fout) { fmid = Relu(fin) fout = Neg(fmid) })";

TEST(NameAllocatorTest, ReturnsTheHintWhenUnused) {
  NameAllocator names(Parse(kModel));
  EXPECT_FALSE(names.Contains("cast"));
  EXPECT_EQ(names.Fresh("cast"), "cast");
  EXPECT_TRUE(names.Contains("cast"));
  EXPECT_EQ(names.Fresh("cast"), "cast_1");
  EXPECT_EQ(names.Fresh("cast"), "cast_2");
}

TEST(NameAllocatorTest, AvoidsNamesAnywhereInTheModel) {
  onnx::ModelProto model = Parse(kModel);
  model.mutable_graph()->mutable_node(0)->set_name("node_name");
  model.mutable_functions(0)->mutable_node(0)->set_name("function_node");
  onnx::TrainingInfoProto* training = model.add_training_info();
  training->mutable_algorithm()->set_name("step");
  training->mutable_algorithm()->add_node()->add_output("grad");
  NameAllocator names(model);
  for (const char* used : {"g",
                           "C",
                           "X",
                           "Y",
                           "W",
                           "T",
                           "A",
                           "B",
                           "D",
                           "E",
                           "then_g",
                           "deep",
                           "deep_else",
                           "F",
                           "fin",
                           "fmid",
                           "fout",
                           "node_name",
                           "function_node",
                           "step",
                           "grad"}) {
    EXPECT_TRUE(names.Contains(used)) << used;
    EXPECT_EQ(names.Fresh(used), std::string(used) + "_1");
  }
  EXPECT_FALSE(names.Contains(""));
}

TEST(NameAllocatorTest, SkipsSuffixesAlreadyTaken) {
  onnx::ModelProto model = Parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2] T) => (float[2] T_2) { T_1 = Relu(T) T_2 = Abs(T_1) })");
  NameAllocator names(model);
  EXPECT_EQ(names.Fresh("T"), "T_3");
  EXPECT_EQ(names.Fresh("T"), "T_4");
  EXPECT_EQ(names.Fresh("T_1"), "T_1_1");
}

TEST(NameAllocatorTest, ReservedNamesAreNotReturned) {
  NameAllocator names(Parse(kModel));
  names.Reserve("loss_scale");
  names.Reserve("loss_scale_1");
  EXPECT_EQ(names.Fresh("loss_scale"), "loss_scale_2");
}

TEST(NameAllocatorTest, EmptyHintNeverGivesTheEmptyName) {
  NameAllocator names(Parse(kModel));
  EXPECT_EQ(names.Fresh(""), "v");
  EXPECT_EQ(names.Fresh(""), "v_1");
}

TEST(NameAllocatorTest, ManyFreshNamesFromOneHint) {
  NameAllocator names(Parse(kModel));
  absl::flat_hash_set<std::string> seen;
  constexpr int kCount = 200000;
  for (int i = 0; i < kCount; ++i) {
    std::string name = names.Fresh("X");
    ASSERT_TRUE(seen.insert(name).second) << name;
  }
  EXPECT_TRUE(seen.contains("X_1"));
  EXPECT_TRUE(seen.contains("X_200000"));
  EXPECT_FALSE(seen.contains("X"));
}

}  // namespace
}  // namespace ampc
