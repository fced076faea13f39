// If, Loop and Scan run through a Session: branch choice, outer-scope values, loop-carried values,
// scan outputs, and errors inside subgraphs reported at session creation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/session.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

using testing::Make;
using testing::Values;

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ControlFlowKernelsTest : public ::testing::Test {
 protected:
  std::unique_ptr<Session> Load(const std::string& text) {
    return Load(testing::ParseModelText(text));
  }
  std::unique_ptr<Session> Load(onnx::ModelProto model) {
    auto session = Session::Create(std::move(model), DefaultRegistry(), backend_);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? *std::move(session) : nullptr;
  }
  std::vector<Tensor> Run(const Session& session, std::vector<Tensor> inputs) {
    auto outputs = session.Run(inputs);
    EXPECT_TRUE(outputs.ok()) << outputs.status();
    return outputs.ok() ? *std::move(outputs) : std::vector<Tensor>();
  }
  CpuBackend backend_{2};
};

constexpr char kIf[] = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (bool c, float[2] x) => (float[2] y) {
  t = Relu(x)
  y = If(c) <then_branch = then_g () => (float[2] a) { a = Neg(t) },
             else_branch = else_g () => (float[2] b) { b = Add(t, x) }>
}
)";

TEST_F(ControlFlowKernelsTest, IfChoosesABranchThatReadsAnOuterValue) {
  auto session = Load(kIf);
  ASSERT_NE(session, nullptr);
  const Tensor x = Make<float>(DType::kFloat, {2}, {-1, 2});  // t = relu(x) = [0, 2]
  auto then_out = Run(*session, {Make<bool>(DType::kBool, {}, {true}), x});
  ASSERT_EQ(then_out.size(), 1u);
  EXPECT_THAT(Values<float>(then_out[0]), ElementsAre(0, -2));  // -t
  auto else_out = Run(*session, {Make<bool>(DType::kBool, {}, {false}), x});
  ASSERT_EQ(else_out.size(), 1u);
  EXPECT_THAT(Values<float>(else_out[0]), ElementsAre(-1, 4));  // t + x
}

TEST_F(ControlFlowKernelsTest, UnsupportedOpInsideABranchFailsAtSessionCreation) {
  auto session = Session::Create(testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17, "com.example" : 1]>
g (bool c, float[2] x) => (float[2] y) {
  y = If(c) <then_branch = then_g () => (float[2] a) { a = com.example.Frobnicate(x) },
             else_branch = else_g () => (float[2] b) { b = Identity(x) }>
}
)"),
                                 DefaultRegistry(), backend_);
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(session.status().message(), HasSubstr("then_branch"));
  EXPECT_THAT(session.status().message(), HasSubstr("Frobnicate"));
}

// Running sum s += k * i for i = 0..M-1 starting from s0, where k is an outer value; the scan
// output collects s after each iteration.
constexpr char kLoop[] = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (int64 m, float s0, float k) => (float s, float[N] sums) {
  s, sums = Loop(m, , s0) <body = body (int64 i, bool c, float acc) => (bool co, float next, float out) {
    co = Identity(c)
    fi = Cast<to = 1>(i)
    step = Mul(fi, k)
    next = Add(acc, step)
    out = Identity(next)
  }>
}
)";

TEST_F(ControlFlowKernelsTest, LoopComputesARunningSumWithScanOutputs) {
  auto session = Load(kLoop);
  ASSERT_NE(session, nullptr);
  // k = 2, s0 = 10: s = 10, 12, 16, 22 after i = 0, 1, 2, 3.
  auto out =
      Run(*session, {Make<int64_t>(DType::kInt64, {}, {4}), Make<float>(DType::kFloat, {}, {10}),
                     Make<float>(DType::kFloat, {}, {2})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_THAT(Values<float>(out[0]), ElementsAre(22));
  EXPECT_EQ(out[1].shape(), (Shape{4}));
  EXPECT_THAT(Values<float>(out[1]), ElementsAre(10, 12, 16, 22));
}

TEST_F(ControlFlowKernelsTest, LoopWithZeroTripsKeepsInitialValuesAndEmptyScans) {
  auto session = Load(kLoop);
  ASSERT_NE(session, nullptr);
  auto out =
      Run(*session, {Make<int64_t>(DType::kInt64, {}, {0}), Make<float>(DType::kFloat, {}, {10}),
                     Make<float>(DType::kFloat, {}, {2})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_THAT(Values<float>(out[0]), ElementsAre(10));
  EXPECT_EQ(out[1].shape(), (Shape{0}));
  EXPECT_EQ(out[1].dtype(), DType::kFloat);
}

TEST_F(ControlFlowKernelsTest, LoopWithoutTripCountRunsWhileCondHolds) {
  // Doubles x while the doubled value stays below 100: 3 -> 6 -> ... -> 96, then 192 ends it
  // (the iteration that produces cond = false still counts).
  // The text parser cannot write an empty first input: name it, then clear it in the proto.
  onnx::ModelProto model = testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (bool c, int64 x0) => (int64 x, int64[N] seen) {
  x, seen = Loop(no_trip_count, c, x0) <body = body (int64 i, bool cin, int64 v) => (bool co, int64 w, int64 o) {
    two = Constant<value = int64 {2}>()
    limit = Constant<value = int64 {100}>()
    w = Mul(v, two)
    co = Less(w, limit)
    o = Identity(i)
  }>
}
)");
  model.mutable_graph()->mutable_node(0)->set_input(0, "");
  auto session = Load(std::move(model));
  ASSERT_NE(session, nullptr);
  auto out =
      Run(*session, {Make<bool>(DType::kBool, {}, {true}), Make<int64_t>(DType::kInt64, {}, {3})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_THAT(Values<int64_t>(out[0]), ElementsAre(192));  // 3 * 2^6
  EXPECT_THAT(Values<int64_t>(out[1]), ElementsAre(0, 1, 2, 3, 4, 5));
}

TEST_F(ControlFlowKernelsTest, ScanRunsAlongAnAxisInBothDirections) {
  // Cumulative sum of the columns of x [2,3] along axis 1 (scan_input_axes = [1]); the scan
  // output is stacked reversed along axis 0.
  auto session = Load(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] s0, float[2,3] x) => (float[2] s, float[3,2] cums) {
  s, cums = Scan(s0, x) <num_scan_inputs = 1, scan_input_axes = [1], scan_output_directions = [1],
    body = body (float[2] acc, float[2] col) => (float[2] next, float[2] out) {
      next = Add(acc, col)
      out = Identity(next)
    }>
}
)");
  ASSERT_NE(session, nullptr);
  auto out = Run(*session, {Make<float>(DType::kFloat, {2}, {0, 100}),
                            Make<float>(DType::kFloat, {2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_EQ(out.size(), 2u);
  // Columns [1,4], [2,5], [3,6]: sums [1,104], [3,109], [6,115]; stacked in reverse order.
  EXPECT_THAT(Values<float>(out[0]), ElementsAre(6, 115));
  EXPECT_EQ(out[1].shape(), (Shape{3, 2}));
  EXPECT_THAT(Values<float>(out[1]), ElementsAre(6, 115, 3, 109, 1, 104));
}

// Scan slices by whole bytes per element, so a packed 4-bit scan input is refused at creation.
TEST_F(ControlFlowKernelsTest, ScanOverAPackedFourBitTypeIsRefused) {
  auto session = Session::Create(testing::ParseModelText(R"(
<ir_version: 10, opset_import: ["" : 21]>
g (int4[2] s0, int4[3, 2] x) => (int4[2] s) {
  s = Scan(s0, x) <num_scan_inputs = 1,
    body = body (int4[2] acc, int4[2] row) => (int4[2] next) {
      next = Identity(row)
    }>
}
)"),
                                 DefaultRegistry(), backend_);
  ASSERT_FALSE(session.ok());
  EXPECT_THAT(session.status().message(),
              HasSubstr("Scan over INT4 (packed below a byte) is not supported"));
}

TEST_F(ControlFlowKernelsTest, IfConditionWithManyElementsIsAnErrorNamingTheNode) {
  auto session = Load(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (bool[N] c, float[2] x) => (float[2] y) {
  y = If(c) <then_branch = then_g () => (float[2] a) { a = Neg(x) },
             else_branch = else_g () => (float[2] b) { b = Identity(x) }>
}
)");
  ASSERT_NE(session, nullptr);
  std::vector<Tensor> inputs = {Make<bool>(DType::kBool, {2}, {true, false}),
                                Make<float>(DType::kFloat, {2}, {1, 2})};
  auto out = session->Run(inputs);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("If node producing 'y'"));
  EXPECT_THAT(out.status().message(), HasSubstr("cond must be a single bool"));
}

}  // namespace
}  // namespace ampc
