// Session-time Conv fusion (runtime/conv_fusion.h): which graphs are rewritten, into what, and
// that a fused session computes what the separate Conv, BatchNormalization and Relu compute
// (a direct double-precision reference written here).
#include "runtime/conv_fusion.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/core/tensor_proto.h"
#include "runtime/session.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

using testing::Floats;
using testing::Values;

// x [2, 2, 4, 4], W [3, 2, 3, 3], pads 1: y [2, 3, 4, 4]. Initializers are added by AddWeights.
constexpr char kConvBnRelu[] = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 2, 4, 4] x) => (float[2, 3, 4, 4] y) {
  c = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (x, w, b)
  n = BatchNormalization <epsilon = 0.01> (c, scale, bias, mean, var)
  y = Relu(n)
}
)";

std::vector<float> Sequence(int n, float start, float step) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + step * static_cast<float>((i * 7) % 11);
  return v;
}

const std::vector<float> kX = Sequence(2 * 2 * 16, -1.0f, 0.2f);
const std::vector<float> kW = Sequence(3 * 2 * 9, -0.5f, 0.1f);
const std::vector<float> kB = {0.25f, -0.5f, 0.125f};
const std::vector<float> kScale = {1.5f, -0.75f, 2.0f}, kBias = {0.1f, 0.2f, -0.3f};
const std::vector<float> kMean = {0.5f, -1.0f, 0.0f}, kVar = {0.25f, 2.0f, 0.5f};

void AddInitializer(onnx::GraphProto& graph, const std::string& name, Shape shape,
                    const std::vector<float>& values) {
  *graph.add_initializer() = TensorToProto(Floats(std::move(shape), values), name);
}

onnx::ModelProto ConvBnRelu() {
  onnx::ModelProto model = testing::ParseModelText(kConvBnRelu);
  onnx::GraphProto& g = *model.mutable_graph();
  AddInitializer(g, "w", {3, 2, 3, 3}, kW);
  AddInitializer(g, "b", {3}, kB);
  AddInitializer(g, "scale", {3}, kScale);
  AddInitializer(g, "bias", {3}, kBias);
  AddInitializer(g, "mean", {3}, kMean);
  AddInitializer(g, "var", {3}, kVar);
  return model;
}

// Relu(BatchNormalization(Conv(x))) in double, with the given BN scale.
std::vector<double> Reference(const std::vector<float>& scale) {
  std::vector<double> y;
  for (int n = 0; n < 2; ++n) {
    for (int m = 0; m < 3; ++m) {
      for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 4; ++j) {
          double s = kB[m];
          for (int c = 0; c < 2; ++c) {
            for (int a = 0; a < 3; ++a) {
              for (int b = 0; b < 3; ++b) {
                const int r = i + a - 1, q = j + b - 1;
                if (r < 0 || r >= 4 || q < 0 || q >= 4) continue;
                s += double{kX[((n * 2 + c) * 4 + r) * 4 + q]} * kW[((m * 2 + c) * 3 + a) * 3 + b];
              }
            }
          }
          const double v = (s - kMean[m]) / std::sqrt(kVar[m] + 0.01) * scale[m] + kBias[m];
          y.push_back(v < 0 ? 0 : v);
        }
      }
    }
  }
  return y;
}

std::vector<float> RunSession(onnx::ModelProto model, std::vector<Tensor> inputs) {
  static CpuBackend* backend = new CpuBackend(2);
  auto session = Session::Create(std::move(model), DefaultRegistry(), *backend);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return {};
  auto out = (*session)->Run(inputs);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? Values<float>((*out)[0]) : std::vector<float>{};
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << i;
  }
}

TypeMap TypesOf(const onnx::ModelProto& model) {
  TypeMap types;
  CollectTypes(model.graph(), types);
  return types;
}

TEST(ConvFusionTest, FoldsBatchNormAndFusesReluIntoOneFusedConv) {
  onnx::ModelProto model = ConvBnRelu();
  EXPECT_EQ(FuseConvs(*model.mutable_graph(), {{"c", DType::kFloat}, {"n", DType::kFloat}}), 2);
  const onnx::GraphProto& g = model.graph();
  ASSERT_EQ(g.node_size(), 1);
  EXPECT_EQ(g.node(0).op_type(), "FusedConv");
  EXPECT_EQ(g.node(0).domain(), kRuntimeDomain);
  EXPECT_EQ(g.node(0).output(0), "y");
  ASSERT_EQ(g.node(0).attribute_size(), 3);  // kernel_shape, pads, activation
  EXPECT_EQ(g.node(0).attribute(2).s(), "Relu");
  // W and B replaced by folded copies; the originals and the statistics are gone.
  ASSERT_EQ(g.initializer_size(), 2);
  EXPECT_EQ(g.initializer(0).name(), g.node(0).input(1));
  EXPECT_EQ(g.initializer(1).name(), g.node(0).input(2));
  auto w = TensorFromProto(g.initializer(0));
  ASSERT_TRUE(w.ok());
  // W'[m] = W[m] * scale[m] / sqrt(var[m] + eps): channel 1, first element.
  EXPECT_FLOAT_EQ(w->data<float>()[18], kW[18] * kScale[1] / std::sqrt(kVar[1] + 0.01f));
}

TEST(ConvFusionTest, FusedSessionMatchesConvBatchNormReluReference) {
  ExpectNear(RunSession(ConvBnRelu(), {Floats({2, 2, 4, 4}, kX)}), Reference(kScale));
}

TEST(ConvFusionTest, KeepsBatchNormWhoseScaleAGraphInputCanOverride) {
  onnx::ModelProto model = ConvBnRelu();
  onnx::ValueInfoProto* input = model.mutable_graph()->add_input();
  input->set_name("scale");
  input->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  input->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(3);
  onnx::ModelProto copy = model;
  EXPECT_EQ(FuseConvs(*copy.mutable_graph(), TypesOf(copy)), 0);
  const std::vector<float> scale = {-1.0f, 0.5f, 3.0f};
  ExpectNear(RunSession(model, {Floats({2, 2, 4, 4}, kX), Floats({3}, scale)}), Reference(scale));
}

TEST(ConvFusionTest, LeavesAConvWhoseOutputHasAnotherReader) {
  onnx::ModelProto model = ConvBnRelu();
  onnx::ValueInfoProto* output = model.mutable_graph()->add_output();
  output->set_name("c");
  EXPECT_EQ(FuseConvs(*model.mutable_graph(), TypesOf(model)), 0);
  EXPECT_EQ(model.graph().node_size(), 3);
}

TEST(ConvFusionTest, LeavesTrainingModeBatchNormAndFp16ReluAlone) {
  onnx::ModelProto model = testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float16[1, 1, 3, 3] x, float16[1, 1, 1, 1] w) => (float16[1, 1, 3, 3] y) {
  c = Conv(x, w)
  y = Relu(c)
}
)");
  EXPECT_EQ(FuseConvs(*model.mutable_graph(), {{"c", DType::kFloat16}}), 0);
  model = ConvBnRelu();
  onnx::AttributeProto* training = model.mutable_graph()->mutable_node(1)->add_attribute();
  training->set_name("training_mode");
  training->set_type(onnx::AttributeProto::INT);
  training->set_i(1);
  // The BatchNormalization stays; the Relu follows it, not the Conv, so it stays too.
  EXPECT_EQ(FuseConvs(*model.mutable_graph(), TypesOf(model)), 0);
}

}  // namespace
}  // namespace ampc
