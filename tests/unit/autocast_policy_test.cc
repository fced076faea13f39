// The default tables cover the pinned ONNX: every op of the default domain has a category or a
// stated reason for being kept, so no standard op draws "op not in the policy".
#include "passes/autocast_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/defs/schema.h>

#include <set>
#include <string>

namespace ampc {
namespace {

using onnx::TensorProto;

std::set<std::string> DefaultDomainOps() {
  std::set<std::string> ops;
  for (const onnx::OpSchema& schema : onnx::OpSchemaRegistry::get_all_schemas()) {
    if (schema.domain().empty()) ops.insert(schema.Name());
  }
  return ops;
}

TEST(AutocastPolicyTest, EveryDefaultDomainOpOfThePinnedOnnxHasAnEntry) {
  const std::set<std::string> ops = DefaultDomainOps();
  ASSERT_GT(ops.size(), 190u) << "the schema registry looks empty";
  for (int low : {TensorProto::FLOAT16, TensorProto::BFLOAT16}) {
    const AutocastPolicy policy = AutocastPolicy::Defaults(low);
    for (const std::string& op : ops)
      EXPECT_TRUE(policy.Has("", op)) << op << " (low " << low << ")";
  }
}

TEST(AutocastPolicyTest, KeptOpsSayWhyTheyAreKept) {
  const AutocastPolicy policy = AutocastPolicy::Defaults(TensorProto::FLOAT16);
  EXPECT_EQ(policy.Lookup("", "BitCast"), Category::kKeep);
  EXPECT_THAT(policy.Source("", "BitCast"), ::testing::HasSubstr("states its dtypes"));
  EXPECT_EQ(policy.Lookup("", "DequantizeLinear"), Category::kKeep);
  EXPECT_THAT(policy.Source("", "DequantizeLinear"), ::testing::HasSubstr("quantized"));
}

TEST(AutocastPolicyTest, OpsOfOtherDomainsAreNotInTheDefaults) {
  const AutocastPolicy policy = AutocastPolicy::Defaults(TensorProto::FLOAT16);
  EXPECT_FALSE(policy.Has("com.microsoft", "Gelu"));
  EXPECT_FALSE(policy.Has("ai.onnx.ml", "Scaler"));
  EXPECT_EQ(policy.Lookup("com.microsoft", "Gelu"), Category::kKeep);
  EXPECT_EQ(policy.Source("com.microsoft", "Gelu"), "not in the policy");
}

// The categories of the ops today's exporters emit that opset 17 did not have.
TEST(AutocastPolicyTest, NewOpsGetTheCategoriesOfTheirKind) {
  const AutocastPolicy policy = AutocastPolicy::Defaults(TensorProto::FLOAT16);
  for (const char* op : {"Attention", "CausalConvWithState"}) {
    EXPECT_EQ(policy.Lookup("", op), Category::kLower) << op;
  }
  for (const char* op : {"Sin", "Cos", "CumProd", "LinearAttention", "DFT"}) {
    EXPECT_EQ(policy.Lookup("", op), Category::kFp32) << op;
  }
  for (const char* op : {"HardSwish", "Mish", "Swish", "SwiGLU", "RMSNormalization",
                         "RotaryEmbedding", "CenterCropPad", "Col2Im", "TensorScatter"}) {
    EXPECT_EQ(policy.Lookup("", op), Category::kFollow) << op;
  }
}

}  // namespace
}  // namespace ampc
