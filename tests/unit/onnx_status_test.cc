#include "passes/graph/onnx_status.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace ampc {
namespace {

TEST(OneLineTest, JoinsTrimmedNonEmptyLines) {
  EXPECT_EQ(OneLine("\n  first problem \r\n\n==> Context: node X\n"),
            "first problem; ==> Context: node X");
  EXPECT_EQ(OneLine("single"), "single");
  EXPECT_EQ(OneLine("\n \n"), "");
}

// ONNX's assertions begin with a source path of the library's build; the message follows it.
TEST(OneLineTest, DropsTheSourceLocationOfAnOnnxAssertion) {
  EXPECT_EQ(OneLine("/deps/onnx/inliner/inliner.cc:418: GetType: Assertion `false` failed: x"),
            "GetType: Assertion `false` failed: x");
  EXPECT_EQ(OneLine("/not/a/location: kept"), "/not/a/location: kept");
  EXPECT_EQ(OneLine("no path: 12: kept"), "no path: 12: kept");
}

TEST(CatchOnnxTest, ConvertsExceptionsToOneLineStatus) {
  absl::Status status = CatchOnnx("m.onnx: checker",
                                  [] { throw std::runtime_error("bad node\n  ==> Context: Add"); });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "m.onnx: checker: bad node; ==> Context: Add");
  EXPECT_EQ(CatchOnnx("x", [] { throw 42; }).code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(CatchOnnx("x", [] {}).ok());
}

}  // namespace
}  // namespace ampc
