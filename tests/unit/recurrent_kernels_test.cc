// RNN, GRU and LSTM on the CPU backend. Inputs are multiples of 1/16 in [-1, 1] (exact in every
// float type); the expected values were computed once from ONNX's formulas in float64 numpy, one
// step at a time (independently of the kernel), and pasted here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/session.h"

namespace ampc {
namespace {

using ::testing::DoubleNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

Tensor Make(DType dtype, Shape shape, const std::vector<double>& values) {
  Tensor t = Tensor::Host(dtype, std::move(shape));
  Dispatch<AMPC_FLOAT_TYPES, DType::kInt32>(dtype, [&]<typename T>() {
    for (size_t i = 0; i < values.size(); ++i) {
      t.data<T>()[i] = Compute<T>::Store(static_cast<typename Compute<T>::type>(values[i]));
    }
  });
  return t;
}

std::vector<double> Read(const Tensor& t) {
  std::vector<double> v;
  Dispatch<AMPC_FLOAT_TYPES>(t.dtype(), [&]<typename T>() {
    for (const T& x : t.span<const T>()) v.push_back(static_cast<double>(Compute<T>::Load(x)));
  });
  return v;
}

std::vector<double> RoundTo(DType dtype, const std::vector<double>& v) {
  return Read(Make(dtype, {static_cast<int64_t>(v.size())}, v));
}

// The values numpy's test script used: ((i * 7 + seed * 13) % 33 - 16) / 16.
std::vector<double> Pattern(int64_t n, int seed) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>((i * 7 + seed * 13) % 33 - 16) / 16;
  return v;
}

Tensor Pat(DType dtype, Shape shape, int seed) {
  const std::vector<double> values = Pattern(ElementCount(shape), seed);
  return Make(dtype, std::move(shape), values);
}

using Inputs = std::vector<std::pair<std::string, Tensor>>;  // an empty name omits the input

void SetInt(onnx::NodeProto& node, const std::string& name, int64_t v) {
  onnx::AttributeProto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void SetFloat(onnx::NodeProto& node, const std::string& name, float v) {
  onnx::AttributeProto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
void SetString(onnx::NodeProto& node, const std::string& name, const std::string& v) {
  onnx::AttributeProto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}
void SetStrings(onnx::NodeProto& node, const std::string& name, const std::vector<std::string>& v) {
  onnx::AttributeProto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRINGS);
  for (const std::string& s : v) a->add_strings(s);
}
void SetFloats(onnx::NodeProto& node, const std::string& name, const std::vector<float>& v) {
  onnx::AttributeProto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float f : v) a->add_floats(f);
}

// A one-node model 'cell' of `op` over `inputs`, producing `outputs` ("" omits one); returns the
// outputs that are present, in order.
absl::StatusOr<std::vector<Tensor>> RunNode(
    const std::string& op, const Inputs& inputs, const std::vector<std::string>& outputs,
    const std::function<void(onnx::NodeProto&)>& attributes = {}, int opset = 22) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(opset);
  onnx::GraphProto* graph = model.mutable_graph();
  graph->set_name("g");
  onnx::NodeProto* node = graph->add_node();
  node->set_op_type(op);
  node->set_name("cell");
  std::vector<Tensor> feeds;
  for (const auto& [name, tensor] : inputs) {
    node->add_input(name);
    if (name.empty()) continue;
    onnx::ValueInfoProto* in = graph->add_input();
    in->set_name(name);
    auto* type = in->mutable_type()->mutable_tensor_type();
    type->set_elem_type(static_cast<int>(tensor.dtype()));
    for (int64_t d : tensor.shape()) type->mutable_shape()->add_dim()->set_dim_value(d);
    feeds.push_back(tensor);
  }
  for (const std::string& name : outputs) {
    node->add_output(name);
    if (name.empty()) continue;
    onnx::ValueInfoProto* out = graph->add_output();
    out->set_name(name);
    out->mutable_type()->mutable_tensor_type()->set_elem_type(
        static_cast<int>(inputs[0].second.dtype()));
  }
  if (attributes) attributes(*node);
  static CpuBackend backend(2);
  AMPC_ASSIGN_OR_RETURN(auto session, Session::Create(model, DefaultRegistry(), backend));
  return session->Run(feeds);
}

// Elementwise within 2e-6 (FP32 against float64).
::testing::Matcher<std::vector<double>> Near(const std::vector<double>& expected) {
  return Pointwise(DoubleNear(2e-6), expected);
}

// ---- RNN ----

// S=3, B=2, I=2, H=2 with bias and initial_h; the default Tanh.
Inputs RnnForwardInputs(DType t) {
  return {{"X", Pat(t, {3, 2, 2}, 1)},
          {"W", Pat(t, {1, 2, 2}, 2)},
          {"R", Pat(t, {1, 2, 2}, 3)},
          {"B", Pat(t, {1, 4}, 4)},
          {"", Tensor()},
          {"h0", Pat(t, {1, 2, 2}, 5)}};
}

TEST(RnnTest, ForwardWithBiasAndInitialState) {
  auto out = RunNode("RNN", RnnForwardInputs(DType::kFloat), {"Y", "Y_h"},
                     [](onnx::NodeProto& n) { SetInt(n, "hidden_size", 2); });
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{3, 1, 2, 2}));
  EXPECT_THAT(Read((*out)[0]), Near({-0.933828043, -0.0429423249, 0.554599722, -0.0818477444,
                                     -0.438850146, 0.0883516665, -0.938091814, -0.166067984,
                                     -0.596436115, 0.475718289, -0.57569017, -0.366047112}));
  EXPECT_THAT(Read((*out)[1]), Near({-0.596436115, 0.475718289, -0.57569017, -0.366047112}));
}

TEST(RnnTest, ReverseWithSequenceLensPadsYWithZeros) {
  // Row 1 runs one step, at time 0; its later Y rows stay zero and its Y_h is that step.
  const DType t = DType::kFloat;
  auto out =
      RunNode("RNN",
              {{"X", Pat(t, {3, 2, 2}, 1)},
               {"W", Pat(t, {1, 2, 2}, 2)},
               {"R", Pat(t, {1, 2, 2}, 3)},
               {"", Tensor()},
               {"lens", Make(DType::kInt32, {2}, {3, 1})}},
              {"Y", "Y_h"}, [](onnx::NodeProto& n) { SetString(n, "direction", "reverse"); });
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Read((*out)[0]),
              Near({-0.299337072, 0.353247078, 0.878049638, -0.263188609, -0.249330465, 0.519654996,
                    0, 0, -0.13203707, 0.465183668, 0, 0}));
  EXPECT_THAT(Read((*out)[1]), Near({-0.299337072, 0.353247078, 0.878049638, -0.263188609}));
}

TEST(RnnTest, BidirectionalBatchMajorConsumesAlphasAndBetasInOrder) {
  // Affine(alpha 0.5, beta 0.125) forward, LeakyRelu(alpha 0.25) backward, layout 1.
  const DType t = DType::kFloat;
  auto out = RunNode(
      "RNN",
      {{"X", Pat(t, {2, 3, 2}, 1)}, {"W", Pat(t, {2, 2, 2}, 2)}, {"R", Pat(t, {2, 2, 2}, 3)}},
      {"Y", "Y_h"}, [](onnx::NodeProto& n) {
        SetString(n, "direction", "bidirectional");
        SetInt(n, "layout", 1);
        SetStrings(n, "activations", {"Affine", "LeakyRelu"});
        SetFloats(n, "activation_alpha", {0.5f, 0.25f});
        SetFloats(n, "activation_beta", {0.125f});
      });
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 3, 2, 2}));
  EXPECT_EQ((*out)[1].shape(), (Shape{2, 2, 2}));
  EXPECT_THAT(
      Read((*out)[0]),
      Near({-0.05859375,  0.162109375,    0.288402557,  0.0638999939, 0.811706543, 0.0386352539,
            -0.168273926, -0.00347900391, -0.25728035,  0.384275436,  -0.05078125, 0.46484375,
            -0.1640625,   -0.03125,       0.518314362,  -0.090180397, 0.112792969, 0.345703125,
            -0.217712402, 0.824707031,    -0.173126221, 0.209106445,  0.39453125,  -0.068359375}));
  EXPECT_THAT(Read((*out)[1]), Near({-0.25728035, 0.384275436, 0.288402557, 0.0638999939,
                                     -0.173126221, 0.209106445, 0.518314362, -0.090180397}));
}

TEST(RnnTest, OmittedYStillGivesYh) {
  auto out = RunNode("RNN", RnnForwardInputs(DType::kFloat), {"", "Y_h"}, {}, 14);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_THAT(Read((*out)[0]), Near({-0.596436115, 0.475718289, -0.57569017, -0.366047112}));
}

// ---- GRU ----

// S=2, B=1, I=2, H=2 with bias and initial_h.
Inputs GruInputs(DType t) {
  return {{"X", Pat(t, {2, 1, 2}, 6)},
          {"W", Pat(t, {1, 6, 2}, 7)},
          {"R", Pat(t, {1, 6, 2}, 8)},
          {"B", Pat(t, {1, 12}, 9)},
          {"", Tensor()},
          {"h0", Pat(t, {1, 1, 2}, 10)}};
}

TEST(GruTest, ResetBeforeTheRecurrentProduct) {
  auto out = RunNode("GRU", GruInputs(DType::kFloat), {"Y", "Y_h"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Read((*out)[0]), Near({0.827839955, 0.0303708539, 0.298502597, 0.599282428}));
  EXPECT_THAT(Read((*out)[1]), Near({0.298502597, 0.599282428}));
}

TEST(GruTest, LinearBeforeReset) {
  auto out = RunNode("GRU", GruInputs(DType::kFloat), {"Y", "Y_h"},
                     [](onnx::NodeProto& n) { SetInt(n, "linear_before_reset", 1); });
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Read((*out)[0]), Near({0.81394802, -0.250444554, 0.223197071, 0.510104601}));
}

TEST(GruTest, DoubleComputesInDouble) {
  auto out = RunNode("GRU", GruInputs(DType::kDouble), {"", "Y_h"}, {}, 7);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype(), DType::kDouble);
  EXPECT_THAT(Read((*out)[0]), Pointwise(DoubleNear(1e-9), {0.298502597, 0.599282428}));
}

// ---- LSTM ----

// S=2, B=1, I=2, H=2 with bias, initial_h, initial_c and peepholes.
Inputs LstmInputs(DType t) {
  return {{"X", Pat(t, {2, 1, 2}, 6)},
          {"W", Pat(t, {1, 8, 2}, 11)},
          {"R", Pat(t, {1, 8, 2}, 12)},
          {"B", Pat(t, {1, 16}, 13)},
          {"", Tensor()},
          {"h0", Pat(t, {1, 1, 2}, 14)},
          {"c0", Pat(t, {1, 1, 2}, 15)},
          {"P", Pat(t, {1, 6}, 16)}};
}

const std::vector<double> kLstmY = {0.0869955775, -0.143882191, 0.0813599523, -0.0934522736};
const std::vector<double> kLstmYh = {0.0813599523, -0.0934522736};
const std::vector<double> kLstmYc = {0.224598007, -0.215441344};

TEST(LstmTest, PeepholesAndInitialStates) {
  auto out = RunNode("LSTM", LstmInputs(DType::kFloat), {"Y", "Y_h", "Y_c"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Read((*out)[0]), Near(kLstmY));
  EXPECT_THAT(Read((*out)[1]), Near(kLstmYh));
  EXPECT_THAT(Read((*out)[2]), Near(kLstmYc));
}

TEST(LstmTest, InputForgetAndClip) {
  auto out = RunNode("LSTM", LstmInputs(DType::kFloat), {"", "Y_h", "Y_c"}, [](onnx::NodeProto& n) {
    SetInt(n, "input_forget", 1);
    SetFloat(n, "clip", 0.5f);
  });
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Read((*out)[0]), Near({0.0711816988, -0.143815622}));
  EXPECT_THAT(Read((*out)[1]), Near({0.190823421, -0.36681919}));
}

TEST(LstmTest, HalfAndBFloat16RoundEachOutputOnce) {
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    auto out = RunNode("LSTM", LstmInputs(t), {"Y", "Y_h", "Y_c"});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].dtype(), t);
    EXPECT_EQ(Read((*out)[0]), RoundTo(t, kLstmY)) << DTypeName(t);
    EXPECT_EQ(Read((*out)[1]), RoundTo(t, kLstmYh)) << DTypeName(t);
    EXPECT_EQ(Read((*out)[2]), RoundTo(t, kLstmYc)) << DTypeName(t);
  }
}

TEST(LstmTest, ZeroLengthRowHasZeroFinalStates) {
  // Row 1 of two takes no step: Y and both final states are zero there (as in onnxruntime), and
  // row 0 is the one-row result.
  const DType t = DType::kFloat;
  Inputs in = LstmInputs(t);
  std::vector<double> x = Pattern(4, 6), x2 = {x[0], x[1], 0, 0, x[2], x[3], 0, 0};
  std::vector<double> h = Pattern(2, 14), c = Pattern(2, 15);
  in[0].second = Make(t, {2, 2, 2}, x2);
  in[4] = {"lens", Make(DType::kInt32, {2}, {2, 0})};
  in[5].second = Make(t, {1, 2, 2}, {h[0], h[1], 1, 1});
  in[6].second = Make(t, {1, 2, 2}, {c[0], c[1], 1, 1});
  auto out = RunNode("LSTM", in, {"Y", "Y_h", "Y_c"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Read((*out)[0]), Near({kLstmY[0], kLstmY[1], 0, 0, kLstmY[2], kLstmY[3], 0, 0}));
  EXPECT_THAT(Read((*out)[1]), Near({kLstmYh[0], kLstmYh[1], 0, 0}));
  EXPECT_THAT(Read((*out)[2]), Near({kLstmYc[0], kLstmYc[1], 0, 0}));
}

// ---- Errors name the node ----

TEST(RecurrentErrorTest, UnknownActivation) {
  auto out = RunNode("RNN", RnnForwardInputs(DType::kFloat), {"Y"},
                     [](onnx::NodeProto& n) { SetStrings(n, "activations", {"Swish"}); });
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("'cell'"));
  EXPECT_THAT(out.status().message(), HasSubstr("unknown activation function 'Swish'"));
}

TEST(RecurrentErrorTest, SequenceLengthBeyondTheSequence) {
  Inputs in = RnnForwardInputs(DType::kFloat);
  in[4] = {"lens", Make(DType::kInt32, {2}, {3, 4})};
  auto out = RunNode("RNN", in, {"Y"});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("'cell'"));
  EXPECT_THAT(out.status().message(), HasSubstr("sequence_lens[1] is 4, outside [0, 3]"));
}

TEST(RecurrentErrorTest, BiasOfTheWrongShape) {
  Inputs in = GruInputs(DType::kFloat);
  in[3].second = Pat(DType::kFloat, {1, 6}, 9);
  auto out = RunNode("GRU", in, {"Y"});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("B has shape [1,6], expected [1,12]"));
}

}  // namespace
}  // namespace ampc
