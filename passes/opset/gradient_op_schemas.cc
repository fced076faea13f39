// OpSchemas of the ai.ampc gradient ops (docs/training-design.md, "Gradient ops"): type
// constraints and type/shape inference; each gradient has the type of the op's data input and
// the shape of the value it is the gradient of. Registered through RegisterGradientOpSchemas().
#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <mutex>
#include <string>
#include <vector>

#include "passes/opset/gradient_ops.h"
#include "passes/opset/training_ops.h"

namespace ampc {
namespace {

using onnx::AttributeProto;
using onnx::InferenceContext;
using onnx::OpSchema;

const std::vector<std::string> kFloatTypes = {"tensor(float16)", "tensor(bfloat16)",
                                              "tensor(float)", "tensor(double)"};

OpSchema GradSchema(const char* name, int line, const char* doc) {
  OpSchema schema(name, __FILE__, line);
  schema.SetDomain(kAmpcDomain)
      .SinceVersion(kAmpcOpsetVersion)
      .SetDoc(doc)
      .TypeConstraint("T", kFloatTypes, "Float types");
  return schema;
}

// Output `output`, when the node has it, gets input 0's element type and input `like`'s shape.
void Like(InferenceContext& ctx, size_t like, size_t output) {
  if (output >= ctx.getNumOutputs()) return;
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, output);
  if (onnx::hasInputShape(ctx, like)) onnx::propagateShapeFromInputToOutput(ctx, like, output);
}

// Output `output` gets input 0's element type and dims [begin, end) of input `from`'s shape.
void DimsOf(InferenceContext& ctx, size_t from, int begin, int end, size_t output) {
  if (output >= ctx.getNumOutputs()) return;
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, output);
  if (!onnx::hasInputShape(ctx, from)) return;
  const auto& shape = ctx.getInputType(from)->tensor_type().shape();
  auto* out = ctx.getOutputType(output)->mutable_tensor_type()->mutable_shape();
  out->clear_dim();
  for (int d = begin; d < end && d < shape.dim_size(); ++d) *out->add_dim() = shape.dim(d);
}

int Rank(InferenceContext& ctx, size_t input) {
  return onnx::hasInputShape(ctx, input) ? ctx.getInputType(input)->tensor_type().shape().dim_size()
                                         : -1;
}

void SoftmaxLike(const char* name, int line, const char* doc) {
  onnx::RegisterSchema(
      GradSchema(name, line, doc)
          .Input(0, "dy", "Gradient of the output", "T")
          .Input(1, "y", "The forward output", "T")
          .Output(0, "dx", "Gradient of the input", "T")
          .Attr("axis", "The forward's axis", AttributeProto::INT, int64_t{-1})
          .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { Like(ctx, 1, 0); }));
}

// A loss's backward: (dloss, scores-like input 1, labels[, weights]) -> the scores' gradient.
void LossGrad(const char* name, int line, const char* doc, const char* input, const char* what) {
  onnx::RegisterSchema(
      GradSchema(name, line, doc)
          .Input(0, "dloss", "Scalar, or the labels' shape for reduction none", "T")
          .Input(1, input, what, "T")
          .Input(2, "labels", "[N, d...]", "Tind")
          .Input(3, "weights", "[C]", "T", OpSchema::Optional)
          .Output(0, "dscores", "", "T")
          .Attr("reduction", "none, sum or mean", AttributeProto::STRING, std::string("mean"))
          .Attr("ignore_index", "A label that contributes nothing", AttributeProto::INT, false)
          .TypeConstraint("Tind", {"tensor(int32)", "tensor(int64)"}, "Label types")
          .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { Like(ctx, 1, 0); }));
}

void RegisterActivationGrads() {
  SoftmaxLike("SoftmaxGrad", __LINE__, "dx = y * (dy - ReduceSum(dy * y, axis, keepdims=1)).");
  SoftmaxLike("LogSoftmaxGrad", __LINE__, "dx = dy - exp(y) * ReduceSum(dy, axis, keepdims=1).");
  onnx::RegisterSchema(
      GradSchema("GeluGrad", __LINE__,
                 "dx = dy * (Phi(x) + x * phi(x)) (Gelu's erf form; Phi, phi: the standard "
                 "normal CDF and density).")
          .Input(0, "dy", "", "T")
          .Input(1, "x", "", "T")
          .Output(0, "dx", "", "T")
          .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { Like(ctx, 1, 0); }));
  LossGrad("SoftmaxCrossEntropyLossGrad", __LINE__,
           "dscores[n, c, d] = k(n, d) * (exp(log_prob[n, c, d]) - (c == label)), k = dloss "
           "(per sample for reduction none) * weight[label] (/ the sum of the applied weights "
           "for mean), 0 where label == ignore_index.",
           "log_prob", "The forward's second output, [N, C, d...]");
  LossGrad("NegativeLogLikelihoodLossGrad", __LINE__,
           "dinput[n, c, d] = -k(n, d) * (c == label), k as in SoftmaxCrossEntropyLossGrad.",
           "input", "The forward's input (for its shape), [N, C, d...]");
}

void RegisterNormalizationGrads() {
  onnx::RegisterSchema(
      GradSchema("LayerNormalizationGrad", __LINE__,
                 "Backward of LayerNormalization given its Mean and InvStdDev outputs; dscale and "
                 "dbias have the normalized shape x.shape[axis:].")
          .Input(0, "dy", "", "T")
          .Input(1, "x", "", "T")
          .Input(2, "scale", "", "T")
          .Input(3, "mean", "", "U")
          .Input(4, "inv_std_dev", "", "U")
          .Output(0, "dx", "", "T", OpSchema::Optional)
          .Output(1, "dscale", "", "T", OpSchema::Optional)
          .Output(2, "dbias", "", "T", OpSchema::Optional)
          .Attr("axis", "The forward's axis", AttributeProto::INT, int64_t{-1})
          .TypeConstraint("U", kFloatTypes, "Statistics types")
          .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
            Like(ctx, 1, 0);
            const int rank = Rank(ctx, 1);
            const auto* axis_attribute = ctx.getAttribute("axis");
            int64_t axis = axis_attribute != nullptr ? axis_attribute->i() : -1;
            if (rank < 0) return;
            if (axis < -rank || axis >= rank)
              fail_shape_inference("axis ", axis, " is out of range");
            if (axis < 0) axis += rank;
            for (size_t i = 1; i <= 2; ++i) DimsOf(ctx, 1, static_cast<int>(axis), rank, i);
          }));
  onnx::RegisterSchema(
      GradSchema("BatchNormalizationGrad", __LINE__,
                 "Backward of training-mode BatchNormalization (batch statistics over N and the "
                 "spatial axes) given the batch mean and 1/sqrt(var + epsilon).")
          .Input(0, "dy", "", "T")
          .Input(1, "x", "[N, C, ...]", "T")
          .Input(2, "scale", "[C]", "S")
          .Input(3, "saved_mean", "[C]", "U")
          .Input(4, "saved_inv_std", "[C]", "U")
          .Output(0, "dx", "", "T", OpSchema::Optional)
          .Output(1, "dscale", "", "S", OpSchema::Optional)
          .Output(2, "dbias", "", "S", OpSchema::Optional)
          .Attr("epsilon", "The forward's (already in saved_inv_std)", AttributeProto::FLOAT, 1e-5f)
          .TypeConstraint("U", kFloatTypes, "Statistics types")
          .TypeConstraint("S", kFloatTypes,
                          "Scale type: BatchNormalization-15 lets it differ from x's (an FP32 "
                          "scale of an FP16 batch); dscale and dbias have it")
          .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
            Like(ctx, 1, 0);
            for (size_t i = 1; i <= 2; ++i) {
              DimsOf(ctx, 1, 1, 2, i);
              if (i < ctx.getNumOutputs()) onnx::propagateElemTypeFromInputToOutput(ctx, 2, i);
            }
          }));
}

void RegisterConvPoolGrads() {
  onnx::RegisterSchema(
      GradSchema("ConvGrad", __LINE__, "dx, dw, db of Conv(x, w, b) for the output gradient dy.")
          .Input(0, "dy", "", "T")
          .Input(1, "x", "", "T")
          .Input(2, "w", "", "T")
          .Output(0, "dx", "", "T", OpSchema::Optional)
          .Output(1, "dw", "", "T", OpSchema::Optional)
          .Output(2, "db", "", "T", OpSchema::Optional)
          .Attr("auto_pad", "", AttributeProto::STRING, std::string("NOTSET"))
          .Attr("dilations", "", AttributeProto::INTS, false)
          .Attr("group", "", AttributeProto::INT, int64_t{1})
          .Attr("kernel_shape", "", AttributeProto::INTS, false)
          .Attr("pads", "", AttributeProto::INTS, false)
          .Attr("strides", "", AttributeProto::INTS, false)
          .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
            Like(ctx, 1, 0);
            Like(ctx, 2, 1);
            DimsOf(ctx, 2, 0, 1, 2);
          }));
  onnx::RegisterSchema(
      GradSchema("MaxPoolGrad", __LINE__,
                 "dx = zeros like x with dy added at MaxPool's Indices (storage_order 0).")
          .Input(0, "dy", "", "T")
          .Input(1, "indices", "", "tensor(int64)")
          .Input(2, "x", "", "T")
          .Output(0, "dx", "", "T")
          .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { Like(ctx, 2, 0); }));
  onnx::RegisterSchema(
      GradSchema("AveragePoolGrad", __LINE__,
                 "Each dy spread evenly over its window's input elements (divided as the "
                 "forward divides, count_include_pad included).")
          .Input(0, "dy", "", "T")
          .Input(1, "x", "", "T")
          .Output(0, "dx", "", "T")
          .Attr("auto_pad", "", AttributeProto::STRING, std::string("NOTSET"))
          .Attr("ceil_mode", "", AttributeProto::INT, int64_t{0})
          .Attr("count_include_pad", "", AttributeProto::INT, int64_t{0})
          .Attr("kernel_shape", "", AttributeProto::INTS, true)
          .Attr("pads", "", AttributeProto::INTS, false)
          .Attr("strides", "", AttributeProto::INTS, false)
          .TypeAndShapeInferenceFunction([](InferenceContext& ctx) { Like(ctx, 1, 0); }));
}

}  // namespace

void RegisterGradientOpSchemas() {
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterAmpcDomain();
    RegisterActivationGrads();
    RegisterNormalizationGrads();
    RegisterConvPoolGrads();
  });
}

}  // namespace ampc
