// Gradients of losses, softmax, normalization, convolution and pooling: ai.ampc gradient ops
// (docs/training-design.md, "Gradient ops"), since standard ONNX has no clean expression.
#include <onnx/defs/attr_proto_util.h>

#include <algorithm>

#include "passes/autodiff/gradient_rules.h"
#include "passes/opset/training_ops.h"

namespace ampc {
namespace {

// Appends ai.ampc `op` with `outputs` outputs; output i is named only where input slot
// `output_slots[i]` needs a gradient ("" otherwise), and becomes that slot's gradient. Trailing
// unnamed outputs stay: the node calls a model-local function with every one of its outputs
// (ONNX's function inference rejects a call with fewer).
absl::Status AmpcGrad(GradientContext& c, const std::string& op,
                      const std::vector<std::string>& inputs, const std::vector<int>& output_slots,
                      std::vector<onnx::AttributeProto> attributes) {
  onnx::NodeProto& node =
      c.b().Node(op, inputs, static_cast<int>(output_slots.size()), kAmpcDomain);
  for (onnx::AttributeProto& attribute : attributes) *node.add_attribute() = std::move(attribute);
  for (size_t i = 0; i < output_slots.size(); ++i) {
    if (!c.NeedsGrad(output_slots[i])) node.set_output(static_cast<int>(i), "");
    c.SetGrad(output_slots[i], node.output(static_cast<int>(i)));
  }
  return absl::OkStatus();
}

absl::Status SoftmaxCrossEntropyLossGrad(GradientContext& c) {
  const std::string log_prob = c.EnsureOutput(1, "log_prob");
  std::vector<std::string> inputs = {c.dy(), log_prob, c.input(1)};
  if (c.num_inputs() > 2 && !c.input(2).empty()) inputs.push_back(c.input(2));
  return AmpcGrad(c, "SoftmaxCrossEntropyLossGrad", inputs, {0},
                  c.CopyAttributes({"reduction", "ignore_index"}));
}

// The input's gradient -k * onehot(target) needs the input only for its shape and type.
absl::Status NegativeLogLikelihoodLossGrad(GradientContext& c) {
  std::vector<std::string> inputs = {c.dy(), c.input(0), c.input(1)};
  if (c.num_inputs() > 2 && !c.input(2).empty()) inputs.push_back(c.input(2));
  return AmpcGrad(c, "NegativeLogLikelihoodLossGrad", inputs, {0},
                  c.CopyAttributes({"reduction", "ignore_index"}));
}

// Dropout runs as the model states it (no training_mode input: inference, Y = X); with one,
// dx = dy * mask * s where s = 1/(1 - ratio) in training and 1 otherwise (the kernel's mask is
// all true then, and training with ratio 0 gives s = 1). The mask is the forward's own output, so
// the backward sees the elements that this step's forward dropped.
absl::Status DropoutGrad(GradientContext& c) {
  if (c.num_inputs() < 3 || c.input(2).empty()) {
    c.SetGrad(0, c.dy());
    return absl::OkStatus();
  }
  GradientBuilder& b = c.b();
  const std::string& x = c.input(0);
  const std::string mask = c.EnsureOutput(1, "mask");
  const std::string one = b.Scalar(1.0, b.ElemType(x));
  const std::string scale =  // 1 / (1 - 0.5) without a ratio input
      c.input(1).empty()
          ? b.Scalar(2.0, b.ElemType(x))
          : b.Op("Reciprocal", {b.Op("Sub", {one, b.Op("CastLike", {c.input(1), x})})});
  const std::string factor = b.Op("Where", {c.input(2), scale, one});
  const std::string kept = b.Op("Mul", {c.dy(), b.Op("CastLike", {mask, x})});
  c.SetGrad(0, b.Op("Mul", {kept, factor}));
  return absl::OkStatus();
}

GradientRule SoftmaxLike(const char* grad_op) {
  return {[grad_op](GradientContext& c) {
            return AmpcGrad(c, grad_op, {c.dy(), c.output(0)}, {0},
                            {onnx::MakeAttribute("axis", c.Int("axis", -1))});
          },
          {}};
}

absl::Status LayerNormalizationGrad(GradientContext& c) {
  const std::string mean = c.EnsureOutput(1, "mean");
  const std::string inv_std_dev = c.EnsureOutput(2, "inv_std_dev");
  return AmpcGrad(c, "LayerNormalizationGrad", {c.dy(), c.input(0), c.input(1), mean, inv_std_dev},
                  {0, 1, 2}, c.CopyAttributes({"axis"}));
}

// The step trains with batch statistics: the forward copy gets training_mode = 1 and its running
// mean and variance outputs (the step binds them to the running statistics, training-step.cc);
// the saved mean and 1/sqrt(var + epsilon) over every axis but 1 come from standard ops.
absl::Status BatchNormalizationGrad(GradientContext& c) {
  absl::StatusOr<std::vector<Dim>> dims = c.DimsOf(c.input(0));
  if (!dims.ok()) return dims.status();
  if (dims->size() < 2) return c.Error("BatchNormalization of a rank < 2 input has no gradient");
  c.SetTrainingMode();
  c.EnsureOutput(1, "running_mean");
  c.EnsureOutput(2, "running_var");
  GradientBuilder& b = c.b();
  std::vector<int64_t> axes = {0};
  for (int64_t axis = 2; axis < static_cast<int64_t>(dims->size()); ++axis) axes.push_back(axis);
  const std::string& x = c.input(0);
  // The statistics in FP32 (a sum of FP16 activations overflows long before their mean), as
  // ReduceSum over the samples divided by their count, not ReduceMean: ReduceMean's axes moved
  // from an attribute to an input at opset 18, ReduceSum's at 13, and the step is in the model's
  // opset (13 and up). The count, Size(x) / C, is read at run time (the batch is often symbolic).
  const std::string xf =
      b.Op("Cast", {x}, {onnx::MakeAttribute("to", int64_t{onnx::TensorProto::FLOAT})});
  const std::string axes_input = b.Ints(axes);
  const std::string count =
      b.Op("CastLike", {b.Op("Div", {b.Op("Size", {x}), b.Op("Size", {c.input(1)})}), xf});
  auto mean = [&](const std::string& value) {
    return b.Op("Div", {b.Op("ReduceSum", {value, axes_input}), count});
  };
  const std::string batch_mean = mean(xf);
  const std::string centered = b.Op("Sub", {xf, batch_mean});
  const std::string variance = mean(b.Op("Mul", {centered, centered}));
  const float epsilon = c.Float("epsilon", 1e-5f);
  const std::string shifted = b.Op("Add", {variance, b.Scalar(epsilon, onnx::TensorProto::FLOAT)});
  const std::string inv_std = b.Op("Reciprocal", {b.Op("Sqrt", {shifted})});
  const std::string flat = b.Ints({-1});
  auto saved = [&](const std::string& value) {
    return b.Op("Reshape", {b.Op("CastLike", {value, x}), flat});
  };
  return AmpcGrad(c, "BatchNormalizationGrad",
                  {c.dy(), x, c.input(1), saved(batch_mean), saved(inv_std)}, {0, 1, 2},
                  {onnx::MakeAttribute("epsilon", epsilon)});
}

// True when the forward pads explicitly (auto_pad absent or NOTSET).
bool ExplicitPads(const GradientContext& c) {
  const auto& attributes = c.node().attribute();
  return std::none_of(attributes.begin(), attributes.end(),
                      [](const auto& a) { return a.name() == "auto_pad" && a.s() != "NOTSET"; });
}

// States strides, dilations, group and pads (unless auto_pad) with their defaults when the
// forward leaves them out: the model-local function's shape follows what a node states, and all
// ConvGrad nodes of a model share one function.
absl::Status ConvGrad(GradientContext& c) {
  absl::StatusOr<std::vector<Dim>> dims = c.DimsOf(c.input(0));
  if (!dims.ok()) return dims.status();
  if (dims->size() < 3) return c.Error("Conv of a rank < 3 input has no gradient");
  const size_t rank = dims->size() - 2;
  std::vector<onnx::AttributeProto> attributes = c.CopyAttributes({"auto_pad", "kernel_shape"});
  for (const char* name : {"strides", "dilations"}) {
    std::vector<int64_t> values = c.Ints(name);
    if (values.empty()) values.assign(rank, 1);
    attributes.push_back(onnx::MakeAttribute(name, values));
  }
  attributes.push_back(onnx::MakeAttribute("group", c.Int("group", 1)));
  if (ExplicitPads(c)) {
    std::vector<int64_t> pads = c.Ints("pads");
    if (pads.empty()) pads.assign(2 * rank, 0);
    attributes.push_back(onnx::MakeAttribute("pads", pads));
  }
  return AmpcGrad(c, "ConvGrad", {c.dy(), c.input(0), c.input(1)}, {0, 1, 2},
                  std::move(attributes));
}

absl::Status MaxPoolGrad(GradientContext& c) {
  if (c.Int("storage_order", 0) != 0)
    return c.Error("MaxPool with storage_order 1 has no gradient");
  const std::string indices = c.EnsureOutput(1, "indices");
  return AmpcGrad(c, "MaxPoolGrad", {c.dy(), indices, c.input(0)}, {0}, {});
}

// States strides and count_include_pad (and pads without auto_pad) with their defaults when the
// forward leaves them out: the model-local function's shape follows what a node states, and all
// AveragePoolGrad nodes of a model share one function.
absl::Status AveragePoolGrad(GradientContext& c) {
  for (int64_t d : c.Ints("dilations")) {
    if (d != 1) return c.Error("AveragePool with dilations (opset 19) has no gradient");
  }
  std::vector<onnx::AttributeProto> attributes =
      c.CopyAttributes({"auto_pad", "ceil_mode", "kernel_shape"});
  const size_t rank = c.Ints("kernel_shape").size();
  std::vector<int64_t> strides = c.Ints("strides"), pads = c.Ints("pads");
  if (strides.empty()) strides.assign(rank, 1);
  attributes.push_back(onnx::MakeAttribute("strides", strides));
  attributes.push_back(onnx::MakeAttribute("count_include_pad", c.Int("count_include_pad", 0)));
  if (ExplicitPads(c)) {
    if (pads.empty()) pads.assign(2 * rank, 0);
    attributes.push_back(onnx::MakeAttribute("pads", pads));
  }
  return AmpcGrad(c, "AveragePoolGrad", {c.dy(), c.input(0)}, {0}, std::move(attributes));
}

}  // namespace

void AddNnGradientRules(GradientRuleTable& table) {
  table.emplace_back("SoftmaxCrossEntropyLoss", GradientRule{SoftmaxCrossEntropyLossGrad, {2}});
  table.emplace_back("NegativeLogLikelihoodLoss", GradientRule{NegativeLogLikelihoodLossGrad, {2}});
  table.emplace_back("Dropout", GradientRule{DropoutGrad, {1}});
  table.emplace_back("Softmax", SoftmaxLike("SoftmaxGrad"));
  table.emplace_back("LogSoftmax", SoftmaxLike("LogSoftmaxGrad"));
  table.emplace_back("LayerNormalization", GradientRule{LayerNormalizationGrad, {}});
  table.emplace_back("BatchNormalization", GradientRule{BatchNormalizationGrad, {3, 4}});
  table.emplace_back("Conv", GradientRule{ConvGrad, {}});
  table.emplace_back("MaxPool", GradientRule{MaxPoolGrad, {}});
  table.emplace_back("AveragePool", GradientRule{AveragePoolGrad, {}});
}

}  // namespace ampc
