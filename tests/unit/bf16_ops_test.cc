// The ai.ampc versions of Conv, MaxPool, AveragePool and GlobalAveragePool
// (passes/opset/standard_op_versions.h): ampc's kernels on BF16 give exactly the standard op in
// FP32 on the same values, rounded to BF16 once; the model-local function body, inlined, gives the
// same bits; the schemas admit bfloat16 only; one function per op, so nodes of one op must agree in
// arity and stated attributes.
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/defs/attr_proto_util.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "absl/strings/substitute.h"
#include "passes/opset/standard_op_versions.h"
#include "passes/opset/training_ops.h"
#include "tests/support/grad_op_check.h"

namespace ampc {
namespace {

using testing::As;
using testing::Dims;
using testing::Model;
using testing::ModelOf;
using testing::Pseudo;
using testing::ToDoubles;
using testing::Value;

constexpr DType kBf16 = DType::kBFloat16;

struct Case {
  std::string op, attributes;
  std::vector<Shape> inputs;
  std::vector<std::string> outputs;  // "T[dims]" or "int64[dims]"
};

// `domain.op<attributes>(x...)` over element type $T as a model in ONNX text.
std::string Graph(const Case& c, const std::string& domain) {
  std::vector<std::string> ins, args, outs, results;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    ins.push_back(absl::StrCat("$T[", Dims(c.inputs[i]), "] x", i));
    args.push_back(absl::StrCat("x", i));
  }
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    outs.push_back(absl::StrCat(c.outputs[i], " y", i));
    results.push_back(absl::StrCat("y", i));
  }
  return absl::Substitute("f ($0) => ($1) { $2 = $3$4$5($6) }", absl::StrJoin(ins, ", "),
                          absl::StrJoin(outs, ", "), absl::StrJoin(results, ", "), domain, c.op,
                          c.attributes.empty() ? "" : absl::StrCat("<", c.attributes, ">"),
                          absl::StrJoin(args, ", "));
}

std::vector<Value> Inputs(const Case& c) {
  std::vector<Value> values;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    values.push_back(Pseudo(kBf16, c.inputs[i], -2, 2, 7 + 13 * static_cast<uint32_t>(i)));
  }
  return values;
}

// The ai.ampc node's function body inlined in its place, run on the CPU runtime.
std::vector<Tensor> RunBody(const Case& c, const std::vector<Value>& inputs) {
  RegisterAmpcSchemas();
  onnx::ModelProto model = ModelOf(Graph(c, "ai.ampc."), kBf16);
  const onnx::NodeProto node = model.graph().node(0);
  absl::StatusOr<FunctionText> text = AmpcVersionBody(node);
  EXPECT_TRUE(text.ok()) << text.status();
  if (!text.ok()) return {};
  absl::StatusOr<onnx::FunctionProto> body = ParseAmpcFunction(c.op, *text, 17);
  EXPECT_TRUE(body.ok()) << body.status();
  if (!body.ok()) return {};
  model.mutable_graph()->clear_node();
  onnx::FunctionExpandHelper(node, *body, *model.mutable_graph(), "body_");
  return Model(model).Run(inputs);
}

void CheckCase(const Case& c) {
  SCOPED_TRACE(Graph(c, "ai.ampc."));
  RegisterAmpcSchemas();
  const std::vector<Value> inputs = Inputs(c);
  const std::vector<Tensor> native = Model(Graph(c, "ai.ampc."), kBf16).Run(inputs);
  std::vector<Value> wide;
  for (const Value& v : inputs) wide.push_back(As(v, DType::kFloat));  // exact
  const std::vector<Tensor> fp32 = Model(Graph(c, ""), DType::kFloat).Run(wide);
  const std::vector<Tensor> body = RunBody(c, inputs);
  ASSERT_EQ(native.size(), c.outputs.size());
  ASSERT_EQ(fp32.size(), c.outputs.size());
  ASSERT_EQ(body.size(), c.outputs.size());
  for (size_t k = 0; k < c.outputs.size(); ++k) {
    const std::vector<double> got = ToDoubles(native[k]);
    std::vector<double> want = ToDoubles(fp32[k]);
    if (native[k].dtype() == kBf16) {
      want = As({DType::kDouble, fp32[k].shape(), want}, kBf16).values;  // one rounding
    }
    EXPECT_EQ(got, want) << "output " << k << ": the kernel in BF16 vs FP32 rounded once";
    EXPECT_EQ(ToDoubles(body[k]), got) << "output " << k << ": the inlined function body";
  }
}

TEST(AmpcVersionTest, ConvIsFp32RoundedOnceAndItsBodyAgrees) {
  CheckCase({"Conv", "pads = [1, 1, 1, 1]", {{2, 3, 5, 5}, {4, 3, 3, 3}, {4}}, {"$T[2,4,5,5]"}});
  CheckCase({"Conv",
             "group = 2, strides = [2, 1], dilations = [1, 2], pads = [0, 1, 1, 0]",
             {{1, 4, 6, 7}, {2, 2, 2, 3}},
             {"$T[1,2,3,3]"}});
  CheckCase(
      {"Conv", "auto_pad = \"SAME_UPPER\", strides = [2]", {{2, 2, 7}, {3, 2, 3}}, {"$T[2,3,4]"}});
}

TEST(AmpcVersionTest, PoolsAreFp32RoundedOnceAndTheirBodiesAgree) {
  CheckCase({"MaxPool",
             "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]",
             {{2, 3, 6, 6}},
             {"$T[2,3,3,3]", "int64[2,3,3,3]"}});
  CheckCase({"MaxPool", "kernel_shape = [2, 2]", {{1, 2, 4, 4}}, {"$T[1,2,3,3]"}});
  CheckCase({"AveragePool",
             "kernel_shape = [3, 3], pads = [1, 1, 1, 1], count_include_pad = 1",
             {{2, 2, 5, 5}},
             {"$T[2,2,5,5]"}});
  CheckCase({"GlobalAveragePool", "", {{2, 3, 4, 5}}, {"$T[2,3,1,1]"}});
  // Attributes the pool kernels honour from opset 10 on: the versions are the opset-17 ops.
  CheckCase({"MaxPool",
             "kernel_shape = [3, 3], strides = [2, 2], ceil_mode = 1",
             {{1, 2, 8, 8}},
             {"$T[1,2,4,4]"}});
  CheckCase(
      {"MaxPool", "kernel_shape = [2, 2], dilations = [2, 2]", {{1, 2, 8, 8}}, {"$T[1,2,6,6]"}});
  CheckCase({"AveragePool",
             "kernel_shape = [3, 3], strides = [2, 2], ceil_mode = 1",
             {{1, 2, 8, 8}},
             {"$T[1,2,4,4]"}});
}

bool InfersStrictly(onnx::ModelProto model) {
  const onnx::ShapeInferenceOptions strict(/*check_type_val=*/true, /*strict_mode_val=*/1);
  try {
    onnx::checker::check_model(model);
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), strict);
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

// The schema is the standard op's with T = bfloat16 only: the checker and strict shape inference
// accept Conv's output shape in bfloat16, and refuse another shape or float32.
TEST(AmpcVersionTest, SchemaAdmitsBfloat16OnlyWithTheStandardShapes) {
  RegisterAmpcSchemas();
  Case conv{"Conv", "pads = [1, 1, 1, 1]", {{1, 2, 4, 4}, {3, 2, 3, 3}}, {"$T[1,3,4,4]"}};
  EXPECT_TRUE(InfersStrictly(ModelOf(Graph(conv, "ai.ampc."), kBf16)));
  EXPECT_FALSE(InfersStrictly(ModelOf(Graph(conv, "ai.ampc."), DType::kFloat)));
  conv.outputs = {"$T[1,3,5,5]"};
  EXPECT_FALSE(InfersStrictly(ModelOf(Graph(conv, "ai.ampc."), kBf16)));
}

onnx::TypeProto TensorType(const std::vector<std::string>& dims) {
  onnx::TypeProto type;
  type.mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  auto* shape = type.mutable_tensor_type()->mutable_shape();
  for (const std::string& d : dims) {
    if (d.empty() || !std::isdigit(d[0])) {
      shape->add_dim()->set_dim_param(d);
    } else {
      shape->add_dim()->set_dim_value(std::stoll(d));
    }
  }
  return type;
}

std::vector<std::string> AttributeNames(const onnx::NodeProto& node) {
  std::vector<std::string> names;
  for (const onnx::AttributeProto& a : node.attribute()) names.push_back(a.name());
  std::sort(names.begin(), names.end());
  return names;
}

// Defaults are stated from what is known: a Conv's spatial rank from its weight's rank (symbolic
// dims or an input of unknown rank do not matter), a pool's from its kernel_shape; Conv's
// kernel_shape is dropped. So Convs stating different subsets end up with one signature.
TEST(AmpcVersionTest, DefaultsStatedFromTheWeightsRankOrTheKernelShape) {
  onnx::NodeProto bare;
  bare.set_op_type("Conv");
  onnx::NodeProto full = bare;
  *full.add_attribute() = onnx::MakeAttribute("kernel_shape", std::vector<int64_t>{3, 3});
  *full.add_attribute() = onnx::MakeAttribute("group", int64_t{1});
  *full.add_attribute() = onnx::MakeAttribute("strides", std::vector<int64_t>{2, 2});
  const onnx::TypeProto symbolic = TensorType({"M", "3", "k", "k"});
  const onnx::TypeProto x = TensorType({"N", "3", "8", "8"});
  NormalizeAmpcVersion(bare, nullptr, &symbolic);
  NormalizeAmpcVersion(full, &x, nullptr);
  const std::vector<std::string> conv = {"auto_pad", "dilations", "group", "pads", "strides"};
  EXPECT_EQ(AttributeNames(bare), conv);
  EXPECT_EQ(AttributeNames(full), conv);
  for (const onnx::AttributeProto& a : bare.attribute()) {
    if (a.name() == "pads") {
      EXPECT_EQ(a.ints_size(), 4);
    }
  }

  onnx::NodeProto pool;
  pool.set_op_type("MaxPool");
  *pool.add_attribute() = onnx::MakeAttribute("kernel_shape", std::vector<int64_t>{2, 2, 2});
  *pool.add_attribute() = onnx::MakeAttribute("auto_pad", std::string("SAME_UPPER"));
  NormalizeAmpcVersion(pool, nullptr, nullptr);
  EXPECT_EQ(AttributeNames(pool),
            (std::vector<std::string>{"auto_pad", "ceil_mode", "dilations", "kernel_shape",
                                      "storage_order", "strides"}));  // no pads with SAME
  for (const onnx::AttributeProto& a : pool.attribute()) {
    if (a.name() == "strides") {
      EXPECT_EQ(a.ints_size(), 3);
    }
  }
}

onnx::ModelProto TwoConvs(const std::string& second_attributes) {
  return ModelOf(absl::Substitute("f ($$T[1,2,4,4] x, $$T[2,2,1,1] w) => ($$T[1,2,4,4] z) {\n"
                                  "  y = ai.ampc.Conv<strides = [1, 1]>(x, w)\n"
                                  "  z = ai.ampc.Conv<$0>(y, w)\n}",
                                  second_attributes),
                 kBf16);
}

TEST(AmpcVersionTest, OneFunctionPerOpAddedOnce) {
  onnx::ModelProto model = TwoConvs("strides = [1, 1]");
  model.clear_opset_import();
  model.add_opset_import()->set_version(17);
  ASSERT_TRUE(AddAmpcVersionFunctions(model).ok());
  ASSERT_EQ(model.functions_size(), 1);
  EXPECT_EQ(model.functions(0).name(), "Conv");
  EXPECT_EQ(model.functions(0).domain(), kAmpcDomain);
  ASSERT_EQ(model.opset_import_size(), 2);
  EXPECT_EQ(model.opset_import(1).domain(), kAmpcDomain);
  ASSERT_TRUE(AddAmpcVersionFunctions(model).ok());
  EXPECT_EQ(model.functions_size(), 1);
  EXPECT_EQ(model.opset_import_size(), 2);
  onnx::checker::check_model(model);
}

TEST(AmpcVersionTest, NodesOfOneOpMustAgreeInSignature) {
  onnx::ModelProto model = TwoConvs("pads = [0, 0, 0, 0]");
  model.mutable_graph()->mutable_node(1)->set_name("second");
  const absl::Status status = AddAmpcVersionFunctions(model);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("node 'second' (ai.ampc.Conv) has 2 inputs, 1 output, "
                                  "attributes {pads}"),
            std::string::npos)
      << status;
  EXPECT_EQ(model.functions_size(), 0);
}

}  // namespace
}  // namespace ampc
