// The CUDA elementwise and copy kernels (kernels/cuda/elementwise_ops.cc, copy_ops.cc) against the
// CPU backend on fresh random inputs (tests/support/cuda_parity.h): every op and element type they
// register, with same-shape, broadcast and single-element operands. Without a GPU each test still
// checks on the host that every case's model runs on the CPU and finds a CUDA kernel for every
// node, then skips (counted as skipped).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/session.h"
#include "tests/support/cuda_parity.h"
#include "tests/support/model_text.h"

namespace ampc {
namespace {

using testing::ParityCase;
using testing::ValueRange;

constexpr char kHeader[] = "<ir_version: 8, opset_import: [\"\" : 17]>\n";

const std::vector<std::string> kFloats = {"float", "float16", "bfloat16", "double"};
const std::vector<std::string> kNumeric = {"float", "float16", "bfloat16", "double",
                                           "int8",  "uint8",   "int32",    "int64"};
const std::vector<std::string> kAll = {"float", "float16", "bfloat16", "double", "int8",
                                       "uint8", "int32",   "int64",    "bool"};

bool IsFloat(const std::string& type) {
  return type == "float" || type == "float16" || type == "bfloat16" || type == "double";
}

// "float16[2,3]"; "float16[]" for a scalar.
std::string Typed(const std::string& type, const Shape& shape) {
  return absl::StrCat(type, "[", absl::StrJoin(shape, ","), "]");
}

// Host memory under the name "cuda": sessions on it choose the CUDA kernels (never run here).
class FakeCuda final : public Backend {
 public:
  const std::string& name() const override { return name_; }
  absl::StatusOr<std::shared_ptr<Buffer>> Allocate(size_t bytes) override {
    return std::make_shared<Buffer>(new char[bytes + 1], bytes, this);
  }
  absl::Status CopyFromHost(const void* host, Tensor& tensor) override {
    std::memcpy(tensor.raw(), host, tensor.bytes());
    return absl::OkStatus();
  }
  absl::Status CopyToHost(const Tensor& tensor, void* host) override {
    std::memcpy(host, tensor.raw(), tensor.bytes());
    return absl::OkStatus();
  }
  absl::Status Synchronize() override { return absl::OkStatus(); }
  MemoryStats memory_stats() const override { return {}; }
  void ResetPeak() override {}

 protected:
  void Release(void* data, size_t) override { delete[] static_cast<char*>(data); }

 private:
  const std::string name_ = "cuda";
};

// On the host: the case's model runs on the CPU backend and has a CUDA kernel for every node.
void CheckOnHost(const ParityCase& parity) {
  const onnx::ModelProto model = testing::ParseModelText(parity.model);
  CpuBackend cpu(1);
  auto session = Session::Create(model, DefaultRegistry(), cpu);
  ASSERT_TRUE(session.ok()) << session.status() << "\n" << parity.model;
  auto outputs = (*session)->Run(testing::RandomInputs(model, parity.ranges, parity.seed));
  ASSERT_TRUE(outputs.ok()) << outputs.status() << "\n" << parity.model;
#ifdef AMPC_HAVE_CUDA
  FakeCuda cuda;
  auto on_cuda = Session::Create(model, DefaultRegistry(), cuda);
  EXPECT_TRUE(on_cuda.ok()) << on_cuda.status() << "\n" << parity.model;
#endif
}

// Checks every case on the host, then (where a GPU is) against the CPU backend.
void RunCases(const std::vector<ParityCase>& cases) {
  for (const ParityCase& parity : cases) {
    CheckOnHost(parity);
    if (::testing::Test::HasFatalFailure()) return;
  }
  if (!testing::CudaUsable()) {
    GTEST_SKIP() << cases.size() << " cases checked on the host; no usable CUDA GPU here";
  }
  for (const ParityCase& parity : cases) {
    SCOPED_TRACE(parity.model);
    testing::ExpectCudaMatchesCpu(parity);
  }
}

#ifdef AMPC_HAVE_CUDA
// The host check above is only worth something if a node without a CUDA kernel fails it.
TEST(CudaElementwiseParityTest, HostCheckFailsForAnOpWithoutACudaKernel) {
  FakeCuda cuda;
  const std::string model = absl::StrCat(kHeader, "g (float[3] x) => (float[3] y) { y = Sin(x) }");
  auto session = Session::Create(testing::ParseModelText(model), DefaultRegistry(), cuda);
  EXPECT_FALSE(session.ok());
}
#endif

std::string BinaryModel(const std::string& op, const std::string& attributes,
                        const std::string& a_type, const Shape& a, const std::string& b_type,
                        const Shape& b, const std::string& out_type) {
  const std::optional<Shape> out = BroadcastShapes(a, b);
  EXPECT_TRUE(out.has_value());
  return absl::StrCat(kHeader, "g (", Typed(a_type, a), " a, ", Typed(b_type, b), " b) => (",
                      Typed(out_type, out.value_or(Shape{})), " y) { y = ", op, attributes,
                      "(a, b) }\n");
}

// Same shape (vector path), broadcast both ways (index plan), a scalar, a single element with a
// tail after the vector steps, and one long enough for many blocks.
const std::vector<std::pair<Shape, Shape>> kShapePairs = {
    {{2, 3, 4}, {2, 3, 4}}, {{2, 1, 4}, {3, 1}}, {{}, {5, 7}},
    {{33, 17}, {1}},        {{2, 3, 4}, {4}},    {{3000, 7}, {3000, 7}}};

ValueRange RangeOf(const std::string& type) {
  if (IsFloat(type)) return {-4, 4};
  if (type == "uint8") return {0, 40};
  return {-20, 20};  // integer products overflow int8, divisors include 0
}

std::vector<ParityCase> BinaryCases(const std::string& op, const std::string& attributes,
                                    const std::vector<std::string>& types, bool bool_out) {
  std::vector<ParityCase> cases;
  for (const std::string& type : types) {
    // Every shape pair for a few types; the first two (flat and broadcast) for the rest.
    const bool all_shapes = type == "float" || type == "float16" || type == "int64";
    for (size_t s = 0; s < (all_shapes ? kShapePairs.size() : 2); ++s) {
      const auto& [a, b] = kShapePairs[s];
      ParityCase parity{BinaryModel(op, attributes, type, a, type, b, bool_out ? "bool" : type)};
      parity.ranges = {{"a", RangeOf(type)}, {"b", RangeOf(type)}};
      parity.seed = static_cast<uint32_t>(cases.size() + 1);
      cases.push_back(parity);
    }
  }
  return cases;
}

TEST(CudaElementwiseParityTest, Arithmetic) {
  std::vector<ParityCase> cases;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
    for (ParityCase& c : BinaryCases(op, "", kNumeric, false)) cases.push_back(c);
  }
  for (const char* attributes : {"", "<fmod = 1>"}) {
    for (ParityCase& c : BinaryCases("Mod", attributes, kNumeric, false)) cases.push_back(c);
  }
  RunCases(cases);
}

TEST(CudaElementwiseParityTest, ComparisonsAndLogic) {
  std::vector<ParityCase> cases;
  for (ParityCase& c : BinaryCases("Equal", "", kAll, true)) cases.push_back(c);
  for (const char* op : {"Less", "LessOrEqual", "Greater", "GreaterOrEqual"}) {
    for (ParityCase& c : BinaryCases(op, "", kNumeric, true)) cases.push_back(c);
  }
  for (const char* op : {"And", "Or", "Xor"}) {
    for (ParityCase& c : BinaryCases(op, "", {"bool"}, true)) cases.push_back(c);
  }
  RunCases(cases);
}

TEST(CudaElementwiseParityTest, PowWithEveryBaseAndExponentType) {
  std::vector<ParityCase> cases;
  for (const char* base : {"float", "float16", "bfloat16", "double", "int32", "int64"}) {
    for (const std::string& exponent : kNumeric) {
      ParityCase parity{BinaryModel("Pow", "", base, {4, 5}, exponent, {5}, base)};
      const bool int_base = !IsFloat(base);
      parity.ranges = {{"a", int_base ? ValueRange{-3, 4} : ValueRange{0.25, 3}},
                       {"b", IsFloat(exponent) ? ValueRange{-2, 3} : ValueRange{0, 5}}};
      if (int_base && IsFloat(exponent)) parity.ranges["b"] = {0, 3};
      cases.push_back(parity);
    }
  }
  RunCases(cases);
}

std::string UnaryModel(const std::string& op, const std::string& attributes,
                       const std::string& type, const Shape& shape, const std::string& out_type) {
  return absl::StrCat(kHeader, "g (", Typed(type, shape), " x) => (", Typed(out_type, shape),
                      " y) { y = ", op, attributes, "(x) }\n");
}

TEST(CudaElementwiseParityTest, UnaryOps) {
  struct Op {
    const char* name;
    const std::vector<std::string>& types;
    ValueRange range;  // for float types
  };
  const std::vector<Op> ops = {
      {"Neg", kNumeric, {-4, 4}},      {"Abs", kNumeric, {-4, 4}},
      {"Relu", kNumeric, {-4, 4}},     {"Sign", kNumeric, {-4, 4}},
      {"Sqrt", kFloats, {-1, 10}},     {"Reciprocal", kFloats, {-4, 4}},
      {"Exp", kFloats, {-10, 10}},     {"Log", kFloats, {-1, 10}},
      {"Erf", kFloats, {-3, 3}},       {"Tanh", kFloats, {-5, 5}},
      {"Sigmoid", kFloats, {-10, 10}}, {"Floor", kFloats, {-4, 4}},
      {"Ceil", kFloats, {-4, 4}},      {"Round", kFloats, {-4, 4}},
  };
  std::vector<ParityCase> cases;
  for (const Op& op : ops) {
    for (const std::string& type : op.types) {
      for (const Shape& shape : {Shape{3, 5, 7}, Shape{4099}}) {
        ParityCase parity{UnaryModel(op.name, "", type, shape, type)};
        parity.ranges = {{"x", IsFloat(type) ? op.range : RangeOf(type)}};
        cases.push_back(parity);
      }
    }
  }
  cases.push_back(ParityCase{UnaryModel("Not", "", "bool", {3, 5, 7}, "bool")});
  RunCases(cases);
}

// Infinities of both signs and NaNs, made on the device from random inputs: Floor of [-1, 1) is
// -1 or 0, its Reciprocal -1 or inf, Where mixes in the negation, Log of negatives is NaN.
TEST(CudaElementwiseParityTest, IsInfAndIsNaN) {
  std::vector<ParityCase> cases;
  for (const std::string& type : kFloats) {
    const std::string t = Typed(type, {8, 16}), b = Typed("bool", {8, 16});
    ParityCase parity{absl::StrCat(
        kHeader, "g (", t, " x, ", b, " c) => (", b, " inf, ", b, " pos, ", b, " neg, ", b,
        " nan) {\n  f = Floor(x)\n  r = Reciprocal(f)\n  m = Neg(r)\n  w = Where(c, r, m)\n",
        "  l = Log(x)\n  p = Add(w, l)\n  inf = IsInf(p)\n",
        "  pos = IsInf<detect_negative = 0>(p)\n  neg = IsInf<detect_positive = 0>(p)\n",
        "  nan = IsNaN(p)\n}\n")};
    parity.ranges = {{"x", {-1, 1}}};
    cases.push_back(parity);
  }
  RunCases(cases);
}

TEST(CudaElementwiseParityTest, WhereBroadcastsAllThreeInputs) {
  const std::vector<std::vector<Shape>> shapes = {{{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
                                                  {{3, 1}, {2, 1, 4}, {4}},
                                                  {{}, {5, 7}, {1}},
                                                  {{4099}, {4099}, {}}};
  std::vector<ParityCase> cases;
  for (const std::string& type : kAll) {
    for (const std::vector<Shape>& s : shapes) {
      const Shape* all[] = {&s[0], &s[1], &s[2]};
      const std::optional<Shape> out = BroadcastShapes(all);
      ASSERT_TRUE(out.has_value());
      ParityCase parity{absl::StrCat(kHeader, "g (", Typed("bool", s[0]), " c, ", Typed(type, s[1]),
                                     " x, ", Typed(type, s[2]), " y) => (", Typed(type, *out),
                                     " z) { z = Where(c, x, y) }\n")};
      parity.ranges = {{"x", RangeOf(type)}, {"y", RangeOf(type)}};
      cases.push_back(parity);
    }
  }
  RunCases(cases);
}

TEST(CudaElementwiseParityTest, MaxAndMinOfOneAndThreeInputs) {
  std::vector<ParityCase> cases;
  for (const char* op : {"Max", "Min"}) {
    for (const char* type : {"float", "float16", "int32"}) {
      const Shape out = {2, 3, 4};
      cases.push_back({absl::StrCat(kHeader, "g (", Typed(type, {2, 3, 4}), " a, ",
                                    Typed(type, {4}), " b, ", Typed(type, {3, 1}), " c) => (",
                                    Typed(type, out), " y) { y = ", op, "(a, b, c) }\n")});
      cases.push_back({absl::StrCat(kHeader, "g (", Typed(type, {5}), " a) => (", Typed(type, {5}),
                                    " y) { y = ", op, "(a) }\n")});
    }
  }
  RunCases(cases);
}

// Integer and float sources wide enough to overflow FP16, int8 and uint8 (which wrap).
ValueRange CastRange(const std::string& from) {
  if (from == "int8") return {-128, 128};
  if (from == "uint8") return {0, 256};
  return {-70000, 70000};
}

TEST(CudaElementwiseParityTest, CastBetweenEveryPairOfTypes) {
  const std::map<std::string, int> kCodes = {{"float", 1},    {"uint8", 2},   {"int8", 3},
                                             {"int32", 6},    {"int64", 7},   {"bool", 9},
                                             {"float16", 10}, {"double", 11}, {"bfloat16", 16}};
  std::vector<ParityCase> cases;
  for (const std::string& from : kAll) {
    for (const std::string& to : kAll) {
      ParityCase parity{
          UnaryModel("Cast", absl::StrCat("<to = ", kCodes.at(to), ">"), from, {3, 41}, to)};
      parity.ranges = {{"x", CastRange(from)}};
      cases.push_back(parity);
    }
  }
  for (const auto& [from, to] : {std::pair{"float", "float16"}, std::pair{"int64", "bfloat16"},
                                 std::pair{"double", "int8"}, std::pair{"bool", "float"}}) {
    ParityCase parity{absl::StrCat(kHeader, "g (", Typed(from, {3, 41}), " x, ", Typed(to, {1}),
                                   " like) => (", Typed(to, {3, 41}),
                                   " y) { y = CastLike(x, like) }\n")};
    parity.ranges = {{"x", CastRange(from)}};
    cases.push_back(parity);
  }
  RunCases(cases);
}

TEST(CudaElementwiseParityTest, ConstantOfShape) {
  std::vector<ParityCase> cases;
  const std::vector<std::pair<std::string, std::string>> values = {
      // type, attribute
      {"float", ""},
      {"float", "<value = float[1] {1.5}>"},
      {"double", "<value = double[1] {-2.25}>"},
      {"int64", "<value = int64[1] {-7}>"},
      {"int32", "<value = int32[1] {123456}>"},
      {"int8", "<value = int8[1] {-3}>"},
      {"uint8", "<value = uint8[1] {200}>"},
      {"bool", "<value = bool[1] {1}>"}};
  for (const auto& [type, value] : values) {
    for (const Shape& shape : {Shape{2, 3, 4}, Shape{4099}, Shape{3, 0}}) {
      cases.push_back({absl::StrCat(kHeader, "g (float[1] unused) => (", Typed(type, shape),
                                    " y) {\n  s = Constant<value = int64[", shape.size(), "] {",
                                    absl::StrJoin(shape, ", "), "}>()\n  y = ConstantOfShape",
                                    value, "(s)\n}\n")});
    }
  }
  RunCases(cases);
}

TEST(CudaElementwiseParityTest, TransposeWithAndWithoutPerm) {
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases_by_shape = {
      {{3, 5}, {}},       {{2, 3, 4}, {0, 2, 1}},       {{2, 3, 4}, {2, 0, 1}},
      {{2, 3, 4, 5}, {}}, {{2, 3, 4, 5}, {0, 2, 3, 1}}, {{2, 1, 3, 1, 4}, {4, 2, 0, 3, 1}},
      {{64, 130}, {1, 0}}};
  std::vector<ParityCase> cases;
  for (const char* type : {"float", "float16", "int64", "bool", "uint8"}) {
    for (const auto& [shape, perm] : cases_by_shape) {
      Shape out;
      for (size_t d = 0; d < shape.size(); ++d) {
        out.push_back(perm.empty() ? shape[shape.size() - 1 - d] : shape[perm[d]]);
      }
      const std::string attributes =
          perm.empty() ? "" : absl::StrCat("<perm = [", absl::StrJoin(perm, ", "), "]>");
      cases.push_back(
          {absl::StrCat(kHeader, "g (", Typed(type, shape), " x) => (", Typed(type, out),
                        " y) { y = Transpose", attributes, "(x) }\n")});
    }
  }
  RunCases(cases);
}

TEST(CudaElementwiseParityTest, ExpandBroadcastsToTheShapeInput) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 1}, {2, 3, 4}},          {{4}, {2, 3, 4}}, {{}, {5}},
      {{2, 1, 1, 3}, {2, 4, 5, 3}}, {{3, 1}, {1}},    {{1, 4099}, {3, 1}}};
  std::vector<ParityCase> cases;
  for (const char* type : {"float", "bfloat16", "int32", "bool", "double"}) {
    for (const auto& [in, target] : shapes) {
      const std::optional<Shape> out = BroadcastShapes(in, target);
      ASSERT_TRUE(out.has_value());
      cases.push_back({absl::StrCat(kHeader, "g (", Typed(type, in), " x) => (", Typed(type, *out),
                                    " y) {\n  s = Constant<value = int64[", target.size(), "] {",
                                    absl::StrJoin(target, ", "), "}>()\n  y = Expand(x, s)\n}\n")});
    }
  }
  RunCases(cases);
}

}  // namespace
}  // namespace ampc
