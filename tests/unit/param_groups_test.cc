// Parameter groups through `ampc --train --train-config` (the real binary): each parameter gets
// the optimizer node, attributes, state and learning rate of the first group that matches it,
// all groups share one found flag and skip, groups that take no parameter are errors; and two
// AdamW groups (no weight decay and twice the rate on the bias) over several steps, one skipped,
// match a plain implementation of PyTorch's AdamW formulas.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "kernels/cpu/cpu_kernels.h"
#include "models/mlp.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/training_session.h"
#include "tests/support/model_text.h"
#include "tests/support/subprocess.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

class ParamGroupsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ampc-param-groups-XXXXXX";
    dir_ = mkdtemp(pattern);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  // `ampc MODEL -o out.onnx --train --loss loss --train-config cfg.json` plus `flags`.
  testing::ProcessResult Compile(const onnx::ModelProto& model, const std::string& config,
                                 std::vector<std::string> flags = {}) {
    std::vector<std::string> args = {AMPC_BINARY,
                                     Write("model.onnx", model.SerializeAsString()),
                                     "-o",
                                     (dir_ / "out.onnx").string(),
                                     "--train",
                                     "--loss=loss",
                                     "--train-config=" + Write("cfg.json", config)};
    args.insert(args.end(), flags.begin(), flags.end());
    return testing::RunProcess(args, dir_.string());
  }
  onnx::ModelProto Output() {
    onnx::ModelProto model;
    EXPECT_TRUE(model.ParseFromString(testing::ReadFileOrEmpty((dir_ / "out.onnx").string())));
    return model;
  }

  fs::path dir_;
};

const onnx::AttributeProto* Attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}
float F(const onnx::NodeProto& node, const std::string& name) {
  const onnx::AttributeProto* a = Attribute(node, name);
  return a == nullptr ? NAN : a->f();
}
int64_t I(const onnx::NodeProto& node, const std::string& name) {
  const onnx::AttributeProto* a = Attribute(node, name);
  return a == nullptr ? -1 : a->i();
}
std::string Metadata(const onnx::ModelProto& model, const std::string& key) {
  for (const auto& entry : model.metadata_props()) {
    if (entry.key() == key) return entry.value();
  }
  return "(none)";
}

TEST_F(ParamGroupsTest, EachParameterGetsTheOptimizerOfTheFirstGroupThatMatchesIt) {
  models::MlpOptions mlp;
  mlp.layers = {16, 32, 4};  // fc1.weight, fc1.bias, fc2.weight, fc2.bias
  auto r = Compile(models::BuildMlp(mlp), R"({
    "groups": [
      {"params": ".*\\.bias", "weight_decay": 0},
      {"params": "fc1\\..*", "optimizer": "momentum", "momentum": 0.8, "nesterov": true,
       "lr_scale": 0.5}
    ],
    "schedule": {"type": "linear_warmup", "warmup_steps": 50},
    "scaler": {"growth_interval": 100, "max_consecutive_skips": 9}
  })",
                   {"--weight-decay=0.05", "--lr=0.002"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const onnx::ModelProto model = Output();
  ASSERT_EQ(model.training_info_size(), 1);
  const onnx::GraphProto& step = model.training_info(0).algorithm();
  std::map<std::string, const onnx::NodeProto*> producer;
  for (const onnx::NodeProto& node : step.node()) {
    for (const std::string& out : node.output()) producer[out] = &node;
  }
  auto updating = [&](const std::string& p) -> const onnx::NodeProto& {
    const onnx::NodeProto* node = producer[p + ".ampc.next"];
    EXPECT_NE(node, nullptr) << p;
    static const onnx::NodeProto kNone;
    return node == nullptr ? kNone : *node;
  };
  // Biases: group 0, AdamW (from --optimizer's default) without weight decay, at ampc.lr.
  for (const std::string p : {"fc1.bias", "fc2.bias"}) {
    const onnx::NodeProto& adam = updating(p);
    EXPECT_EQ(adam.op_type(), "Adam") << p;
    EXPECT_EQ(F(adam, "weight_decay"), 0.0f) << p;
    EXPECT_EQ(I(adam, "decoupled"), 1) << p;
    EXPECT_EQ(F(adam, "beta1"), 0.9f) << p;
    EXPECT_EQ(adam.input(1), "ampc.lr") << p;
  }
  // fc1.weight: group 1 (fc1.bias went to group 0 first): SGD with Nesterov momentum 0.8, the
  // command line's weight decay, at ampc.lr * 0.5.
  const onnx::NodeProto& sgd = updating("fc1.weight");
  EXPECT_EQ(sgd.op_type(), "SGD");
  EXPECT_EQ(F(sgd, "momentum"), 0.8f);
  EXPECT_EQ(I(sgd, "nesterov"), 1);
  EXPECT_EQ(F(sgd, "weight_decay"), 0.05f);
  ASSERT_EQ(sgd.input_size(), 6);  // with the momentum buffer
  EXPECT_EQ(sgd.input(5), "fc1.weight.ampc.momentum");
  const onnx::NodeProto* mul = producer[sgd.input(1)];
  ASSERT_NE(mul, nullptr);
  EXPECT_EQ(mul->op_type(), "Mul");
  EXPECT_EQ(mul->input(0), "ampc.lr");
  const onnx::NodeProto* half = producer[mul->input(1)];
  ASSERT_NE(half, nullptr);
  EXPECT_EQ(F(*half, "value_float"), 0.5f);
  // fc2.weight: no group: the command line's AdamW with --weight-decay.
  const onnx::NodeProto& fallback = updating("fc2.weight");
  EXPECT_EQ(fallback.op_type(), "Adam");
  EXPECT_EQ(F(fallback, "weight_decay"), 0.05f);
  EXPECT_EQ(fallback.input(1), "ampc.lr");
  // One found flag, one scale update, one skip for every group.
  int check_finite = 0, update_scale = 0;
  for (const onnx::NodeProto& node : step.node()) {
    check_finite += node.op_type() == "CheckFinite";
    update_scale += node.op_type() == "UpdateScale";
    if (node.op_type() == "UpdateScale") {
      EXPECT_EQ(I(node, "growth_interval"), 100);
    }
  }
  EXPECT_EQ(check_finite, 1);
  EXPECT_EQ(update_scale, 1);
  for (const std::string p : {"fc1.weight", "fc2.weight", "fc2.bias"}) {
    EXPECT_EQ(updating(p).input(0), updating("fc1.bias").input(0)) << p;
  }
  // The optimizer state of each group.
  std::vector<std::string> moments;
  for (const onnx::ValueInfoProto& v : model.training_info(0).initialization().output()) {
    if (v.name().rfind("fc", 0) == 0) moments.push_back(v.name());
  }
  EXPECT_THAT(moments,
              UnorderedElementsAre("fc1.weight.ampc.momentum", "fc1.bias.ampc.m", "fc1.bias.ampc.v",
                                   "fc2.weight.ampc.m", "fc2.weight.ampc.v", "fc2.bias.ampc.m",
                                   "fc2.bias.ampc.v"));
  EXPECT_EQ(Metadata(model, "ampc.lr"), "0.002");
  EXPECT_EQ(Metadata(model, "ampc.lr_schedule"), R"({"type":"linear_warmup","warmup_steps":50})");
  EXPECT_EQ(Metadata(model, "ampc.max_consecutive_skips"), "9");
}

TEST_F(ParamGroupsTest, AGroupThatTakesNoParameterIsAnErrorNamingIt) {
  models::MlpOptions mlp;
  mlp.layers = {16, 32, 4};
  const onnx::ModelProto model = models::BuildMlp(mlp);
  auto r = Compile(model, R"({"groups": [{"params": ".*bias"}, {"params": "norm.*"}]})");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cfg.json: groups[1].params 'norm.*' matches no trainable "
                               "parameter"));
  EXPECT_FALSE(fs::exists(dir_ / "out.onnx"));
  r = Compile(model, R"({"groups": [{"params": "fc.*"}, {"params": "fc1\\.bias"}]})");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("groups[1].params 'fc1\\.bias' matches only parameters that "
                               "earlier groups take (the first match wins)"));
  r = Compile(model, R"({"groups": [{"params": "fc1\\.weight"}]})", {"--freeze=fc1\\.weight"});
  EXPECT_EQ(r.exit_code, 1);  // a frozen parameter is not trainable
  EXPECT_THAT(r.err, HasSubstr("matches no trainable parameter"));
  EXPECT_FALSE(fs::exists(dir_ / "out.onnx"));
}

TEST_F(ParamGroupsTest, ConfigErrorsAreUsageErrorsAndWriteNothing) {
  models::MlpOptions mlp;
  mlp.layers = {16, 32, 4};
  auto r = Compile(models::BuildMlp(mlp), R"({"groups": [{"params": "fc1.*", "lr": 0.1}]})");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("cfg.json: groups[0].lr: unknown key"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "out.onnx"));
  r = testing::RunProcess({AMPC_BINARY, Write("m.onnx", models::BuildMlp(mlp).SerializeAsString()),
                           "-o", (dir_ / "out.onnx").string(), "--train-config=x.json"},
                          dir_.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--train-config needs --train"));
  EXPECT_FALSE(fs::exists(dir_ / "out.onnx"));
}

// y = x w + b; loss = mean((y - t)^2) over all elements.
constexpr char kLinearRegression[] = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[4, 3] x, float[4, 2] t) => (float loss, float[4, 2] y)
<float[3, 2] w = {0.5, -0.25, 0.125, -0.5, 0.75, 0.25}, float[2] b = {0.1, -0.2}>
{
  xw = MatMul(x, w)
  y = Add(xw, b)
  d = Sub(y, t)
  sq = Mul(d, d)
  loss = ReduceMean <keepdims = 0> (sq)
}
)";

// PyTorch's AdamW (torch.optim.AdamW, amsgrad=False) for one tensor, in double.
struct AdamW {
  double lr_scale, weight_decay;
  std::vector<double> m, v;
  void Step(std::vector<double>& p, const std::vector<double>& g, double lr, int t) {
    lr *= lr_scale;
    const double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] *= 1 - lr * weight_decay;
      m[i] = beta1 * m[i] + (1 - beta1) * g[i];
      v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
      const double m_hat = m[i] / (1 - std::pow(beta1, t));
      const double v_hat = v[i] / (1 - std::pow(beta2, t));
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
};

TEST_F(ParamGroupsTest, TwoAdamWGroupsMatchAPlainAdamWOverSteps) {
  auto r = Compile(
      testing::ParseModelText(kLinearRegression),
      R"({"groups": [{"params": "b", "weight_decay": 0, "lr_scale": 2}]})",
      {"--passes=infer-types", "--optimizer=adamw", "--weight-decay=0.1", "--loss-scale=none"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  CpuBackend backend(1);
  auto session = TrainingSession::Create(Output(), DefaultRegistry(), backend);
  ASSERT_TRUE(session.ok()) << session.status();

  const std::vector<float> x = {1, 2, -1, 0.5, -1.5, 2, -2, 1, 0, 0.25, 0.5, -0.75};
  const std::vector<float> t = {1, 0, -1, 2, 0.5, 0.5, 0, -1};
  std::vector<double> w = {0.5, -0.25, 0.125, -0.5, 0.75, 0.25}, b = {0.1, -0.2};
  AdamW w_opt{1.0, 0.1, std::vector<double>(6), std::vector<double>(6)};
  AdamW b_opt{2.0, 0.0, std::vector<double>(2), std::vector<double>(2)};
  int applied = 0;
  for (int k = 0; k < 8; ++k) {
    const bool poisoned = k == 3;  // a NaN input: the step is skipped
    std::vector<float> xk = x;
    if (poisoned) xk[4] = NAN;
    const float lr = 0.01f * static_cast<float>(k + 1);
    absl::StatusOr<StepResult> result = (*session)->Step(
        {{"x", testing::Floats({4, 3}, xk)}, {"t", testing::Floats({4, 2}, t)}}, lr);
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->applied, !poisoned) << "step " << k;
    if (!poisoned) {
      // dloss/dy = 2 (y - t) / 8; dw = x^T dy; db = the column sums of dy.
      std::vector<double> gw(6, 0.0), gb(2, 0.0);
      for (int n = 0; n < 4; ++n) {
        for (int c = 0; c < 2; ++c) {
          double y = b[c];
          for (int j = 0; j < 3; ++j) y += x[n * 3 + j] * w[j * 2 + c];
          const double dy = 2 * (y - t[n * 2 + c]) / 8;
          gb[c] += dy;
          for (int j = 0; j < 3; ++j) gw[j * 2 + c] += x[n * 3 + j] * dy;
        }
      }
      ++applied;
      w_opt.Step(w, gw, lr, applied);
      b_opt.Step(b, gb, lr, applied);
    }
    EXPECT_EQ(result->step, applied);
    const std::vector<float> got_w = testing::Values<float>(*(*session)->State("w"));
    const std::vector<float> got_b = testing::Values<float>(*(*session)->State("b"));
    for (int i = 0; i < 6; ++i) EXPECT_NEAR(got_w[i], w[i], 2e-6) << "w[" << i << "] step " << k;
    for (int i = 0; i < 2; ++i) EXPECT_NEAR(got_b[i], b[i], 2e-6) << "b[" << i << "] step " << k;
    const std::vector<float> got_bm = testing::Values<float>(*(*session)->State("b.ampc.m"));
    for (int i = 0; i < 2; ++i) EXPECT_NEAR(got_bm[i], b_opt.m[i], 1e-6) << "b.m step " << k;
  }
  EXPECT_EQ(applied, 7);
}

}  // namespace
}  // namespace ampc
