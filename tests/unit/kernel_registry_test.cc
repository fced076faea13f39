#include "runtime/core/kernel_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/core/cpu_backend.h"

namespace ampc {
namespace {

using ::testing::HasSubstr;

absl::Status Nothing(KernelContext&) { return absl::OkStatus(); }

class KernelRegistryTest : public ::testing::Test {
 protected:
  KernelRegistryTest() {
    node_.set_op_type("ReduceMean");
    node_.set_name("mean");
    // ReduceMean-13 reads `axes` as an attribute; ReduceMean-18 as an input.
    registry_.Register("cpu", "", "ReduceMean", {}, Nothing);
    registry_.Restrict("", "ReduceMean", {.first = 13, .last = 17});
  }
  absl::StatusOr<std::unique_ptr<OpKernel>> Create(int opset) {
    return registry_.Create(
        KernelInfo{node_, opset, {DType::kFloat}, {DType::kFloat}, backend_, {}, {}});
  }

  onnx::NodeProto node_;
  CpuBackend backend_{1};
  KernelRegistry registry_;
};

TEST_F(KernelRegistryTest, AKernelServesTheOpVersionsOfItsRange) {
  EXPECT_TRUE(Create(13).ok());
  EXPECT_TRUE(Create(17).ok());  // still ReduceMean-13
  EXPECT_TRUE(registry_.Has("", "ReduceMean", "cpu", 17));
  EXPECT_FALSE(registry_.Has("", "ReduceMean", "cpu", 18));
}

// The op's version is its schema's since-version at the opset: opset 20 still has ReduceMean-18.
TEST_F(KernelRegistryTest, AVersionOutsideTheRangeIsRefusedNamingItAndTheRange) {
  for (int opset : {11, 18, 20}) {
    absl::StatusOr<std::unique_ptr<OpKernel>> kernel = Create(opset);
    ASSERT_FALSE(kernel.ok()) << opset;
    EXPECT_EQ(kernel.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(kernel.status().message(), HasSubstr("node 'mean' (ReduceMean)"));
    EXPECT_THAT(
        kernel.status().message(),
        HasSubstr(absl::StrCat("(opset ", opset, "); its kernels implement versions 13 to 17")));
  }
  EXPECT_THAT(Create(20).status().message(),
              HasSubstr("no cpu kernel for ReduceMean-18 (opset 20)"));
  EXPECT_THAT(Create(11).status().message(),
              HasSubstr("no cpu kernel for ReduceMean-11 (opset 11)"));
}

TEST_F(KernelRegistryTest, ByDefaultAKernelCoversTheOpsetsItIsCheckedThrough) {
  registry_.Register("cpu", "", "Relu", {}, Nothing);
  node_.set_op_type("Relu");
  EXPECT_TRUE(Create(1).ok());
  EXPECT_TRUE(Create(kKernelsCheckedThroughOpset).ok());
  EXPECT_FALSE(VersionRange{}.Contains(kKernelsCheckedThroughOpset + 1));
}

// Ops of domains without schemas (the runtime's own) have no versions: every kernel serves them.
TEST_F(KernelRegistryTest, OpsWithoutASchemaAreServedAtAnyOpset) {
  registry_.Register("cpu", "ai.ampc.runtime", "LearningRate", {}, Nothing);
  node_.set_op_type("LearningRate");
  node_.set_domain("ai.ampc.runtime");
  EXPECT_TRUE(Create(0).ok());
  EXPECT_TRUE(registry_.Has("ai.ampc.runtime", "LearningRate", "cpu", 0));
}

}  // namespace
}  // namespace ampc
