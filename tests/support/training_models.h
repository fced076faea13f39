// Hand-written training models (docs/training-design.md, "The compiled file") for the trainer's
// tests, until the training compiler writes them: the inference graph, the initialization and
// the algorithm are each ONNX text, with `__` standing for `.` in names (the text parser does
// not accept dots), assembled into one ModelProto.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_replace.h"
#include "tests/support/model_text.h"

namespace ampc::testing {

inline void DotNames(onnx::GraphProto& graph) {
  auto fix = [](std::string* name) { *name = absl::StrReplaceAll(*name, {{"__", "."}}); };
  for (auto& v : *graph.mutable_input()) fix(v.mutable_name());
  for (auto& v : *graph.mutable_output()) fix(v.mutable_name());
  for (auto& v : *graph.mutable_value_info()) fix(v.mutable_name());
  for (auto& t : *graph.mutable_initializer()) fix(t.mutable_name());
  for (auto& node : *graph.mutable_node()) {
    for (auto& name : *node.mutable_input()) fix(&name);
    for (auto& name : *node.mutable_output()) fix(&name);
  }
}

// `inference`, `initialization` and `algorithm` are model texts; the model is the first with
// the other two as training_info[0]; update_binding is every algorithm output X.ampc.next -> X.
inline onnx::ModelProto AssembleTrainingModel(const std::string& inference,
                                              const std::string& initialization,
                                              const std::string& algorithm) {
  onnx::ModelProto model = ParseModelText(inference);
  onnx::TrainingInfoProto* info = model.add_training_info();
  *info->mutable_initialization() = ParseModelText(initialization).graph();
  *info->mutable_algorithm() = ParseModelText(algorithm).graph();
  DotNames(*info->mutable_initialization());
  DotNames(*info->mutable_algorithm());
  for (const onnx::ValueInfoProto& output : info->algorithm().output()) {
    const std::string& name = output.name();
    const std::string suffix = ".ampc.next";
    if (name.size() <= suffix.size() || name.substr(name.size() - suffix.size()) != suffix) {
      continue;
    }
    onnx::StringStringEntryProto* binding = info->add_update_binding();
    binding->set_key(name.substr(0, name.size() - suffix.size()));
    binding->set_value(name);
  }
  return model;
}

// y = x w + b (x float[N,2], w float[2,1], b float[1]); loss = mean((y - t)^2); SGD with
// momentum 0.9 (buf = 0.9 buf + g; p -= lr buf), the gradient computed from the loss scaled by
// ampc.scale (4) and unscaled; ampc.step counts steps; ampc.grad_norm is the L2 norm of (gw, gb).
inline onnx::ModelProto LinearRegressionTrainingModel() {
  return AssembleTrainingModel(R"(
<ir_version: 8, opset_import: ["" : 17]>
linear (float[N, 2] x) => (float[N, 1] y)
<float[2, 1] w = {0.5, -0.25}, float[1] b = {0.1}>
{
  xw = MatMul(x, w)
  y = Add(xw, b)
}
)",
                               R"(
<ir_version: 8, opset_import: ["" : 17]>
init () => (float[2, 1] w__ampc__momentum, float[1] b__ampc__momentum, float ampc__scale,
            int64 ampc__step)
{
  zero = Constant <value_float = 0.0> ()
  w_shape = Constant <value_ints = [2, 1]> ()
  b_shape = Constant <value_ints = [1]> ()
  w__ampc__momentum = Expand(zero, w_shape)
  b__ampc__momentum = Expand(zero, b_shape)
  ampc__scale = Constant <value_float = 4.0> ()
  ampc__step = Constant <value_int = 0> ()
}
)",
                               R"(
<ir_version: 8, opset_import: ["" : 17]>
step (float[N, 2] x, float[N, 1] t, float ampc__lr)
  => (float loss, bool ampc__applied, float ampc__grad_norm, float[2, 1] w__ampc__next,
      float[1] b__ampc__next, float[2, 1] w__ampc__momentum__ampc__next,
      float[1] b__ampc__momentum__ampc__next, float ampc__scale__ampc__next,
      int64 ampc__step__ampc__next)
<float mu = {0.9}, float two = {2}, int64 one = {1}, int64[1] axis0 = {0}>
{
  xw = MatMul(x, w)
  y = Add(xw, b)
  d = Sub(y, t)
  sq = Mul(d, d)
  loss = ReduceMean <keepdims = 0> (sq)
  count = Size(d)
  countf = Cast <to = 1> (count)
  two_scaled = Mul(two, ampc__scale)
  k = Div(two_scaled, countf)
  gy = Mul(d, k)
  xt = Transpose(x)
  gw_scaled = MatMul(xt, gy)
  gb_scaled = ReduceSum <keepdims = 0> (gy, axis0)
  gw = Div(gw_scaled, ampc__scale)
  gb = Div(gb_scaled, ampc__scale)
  sw = ReduceSumSquare <keepdims = 0> (gw)
  sb = ReduceSumSquare <keepdims = 0> (gb)
  ss = Add(sw, sb)
  ampc__grad_norm = Sqrt(ss)
  ampc__applied = Equal(one, one)
  w_decayed = Mul(mu, w__ampc__momentum)
  w__ampc__momentum__ampc__next = Add(w_decayed, gw)
  b_decayed = Mul(mu, b__ampc__momentum)
  b__ampc__momentum__ampc__next = Add(b_decayed, gb)
  w_delta = Mul(ampc__lr, w__ampc__momentum__ampc__next)
  w__ampc__next = Sub(w, w_delta)
  b_delta = Mul(ampc__lr, b__ampc__momentum__ampc__next)
  b__ampc__next = Sub(b, b_delta)
  ampc__scale__ampc__next = Identity(ampc__scale)
  ampc__step__ampc__next = Add(ampc__step, one)
}
)");
}

// Softmax regression for 28x28 images: logits = image W + b (image float[N,784], W float[784,10]
// and b float[10], zeros), loss = SoftmaxCrossEntropyLoss(logits, label); plain SGD with the
// gradient (softmax - onehot) / N; ampc.step counts steps; no scale.
inline onnx::ModelProto SoftmaxRegressionTrainingModel() {
  onnx::ModelProto model = AssembleTrainingModel(R"(
<ir_version: 8, opset_import: ["" : 17]>
softmax_regression (float[N, 784] image) => (float[N, 10] logits)
{
  xw = MatMul(image, W)
  logits = Add(xw, b)
}
)",
                                                 R"(
<ir_version: 8, opset_import: ["" : 17]>
init () => (int64 ampc__step) { ampc__step = Constant <value_int = 0> () }
)",
                                                 R"(
<ir_version: 8, opset_import: ["" : 17]>
step (float[N, 784] image, int64[N] label, float ampc__lr)
  => (float loss, bool ampc__applied, float ampc__grad_norm, float[784, 10] W__ampc__next,
      float[10] b__ampc__next, int64 ampc__step__ampc__next)
<int64 one = {1}, int64[1] axis0 = {0}, float[2] off_on = {0, 1}, int64 depth = {10}>
{
  xw = MatMul(image, W)
  logits = Add(xw, b)
  loss = SoftmaxCrossEntropyLoss(logits, label)
  p = Softmax <axis = 1> (logits)
  onehot = OneHot <axis = -1> (label, depth, off_on)
  diff = Sub(p, onehot)
  count = Size(label)
  countf = Cast <to = 1> (count)
  g = Div(diff, countf)
  image_t = Transpose(image)
  gW = MatMul(image_t, g)
  gb = ReduceSum <keepdims = 0> (g, axis0)
  sw = ReduceSumSquare <keepdims = 0> (gW)
  sb = ReduceSumSquare <keepdims = 0> (gb)
  ss = Add(sw, sb)
  ampc__grad_norm = Sqrt(ss)
  ampc__applied = Equal(one, one)
  W_delta = Mul(ampc__lr, gW)
  W__ampc__next = Sub(W, W_delta)
  b_delta = Mul(ampc__lr, gb)
  b__ampc__next = Sub(b, b_delta)
  ampc__step__ampc__next = Add(ampc__step, one)
}
)");
  for (auto [name, dims] :
       {std::pair<const char*, std::vector<int64_t>>{"W", {784, 10}}, {"b", {10}}}) {
    onnx::TensorProto* init = model.mutable_graph()->add_initializer();
    init->set_name(name);
    init->set_data_type(onnx::TensorProto::FLOAT);
    int64_t count = 1;
    for (int64_t d : dims) {
      init->add_dims(d);
      count *= d;
    }
    init->set_raw_data(std::string(count * sizeof(float), '\0'));
  }
  return model;
}

}  // namespace ampc::testing
