// Schemas of the ai.ampc ops: type constraints and type/shape inference, one function per op group.
#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <mutex>
#include <string>
#include <vector>

#include "passes/opset/gradient_ops.h"
#include "passes/opset/standard_op_versions.h"
#include "passes/opset/training_ops.h"

namespace ampc {

// The op groups, one function each; only RegisterAmpcSchemas() calls them (a schema registered
// twice is an error in libonnx).
void RegisterScalerSchemas();     // CheckFinite, UpdateScale, UnscaleClip
void RegisterOptimizerSchemas();  // SGD, Adam
void RegisterDropoutSchema();     // Dropout
void RegisterGradientSchemas();   // the gradient ops of the autodiff pass
void RegisterMicrosoftSchemas();  // onnxruntime's com.microsoft ops, for their output types

namespace {

using onnx::InferenceContext;
using onnx::OpSchema;
using onnx::TensorProto;

const std::vector<std::string> kGradientTypes = {"tensor(float16)", "tensor(bfloat16)",
                                                 "tensor(float)", "tensor(double)"};

OpSchema AmpcSchema(const char* name, int line, const char* doc) {
  OpSchema schema(name, __FILE__, line);
  schema.SetDomain(kAmpcDomain).SinceVersion(kAmpcOpsetVersion).SetDoc(doc);
  return schema;
}

// Output `output` gets element type `elem_type` and the shape of input `input` (when known).
void ShapeOf(InferenceContext& ctx, size_t input, size_t output, int32_t elem_type) {
  onnx::updateOutputElemType(ctx, output, elem_type);
  if (onnx::hasInputShape(ctx, input)) onnx::propagateShapeFromInputToOutput(ctx, input, output);
}

void ScalarOutput(InferenceContext& ctx, size_t output, int32_t elem_type) {
  onnx::updateOutputElemType(ctx, output, elem_type);
  ctx.getOutputType(output)->mutable_tensor_type()->mutable_shape();  // rank 0
}

// Inputs that must be scalars (rank 0) where their shape is known.
void RequireScalars(InferenceContext& ctx, std::initializer_list<size_t> inputs) {
  for (size_t i : inputs) {
    if (i < ctx.getNumInputs() && onnx::hasInputShape(ctx, i) &&
        ctx.getInputType(i)->tensor_type().shape().dim_size() != 0) {
      fail_shape_inference("input ", i, " must be a scalar (rank 0)");
    }
  }
}

// Inputs `others` must have the shape of input `first` where both are known.
void RequireSameShape(InferenceContext& ctx, size_t first, std::initializer_list<size_t> others) {
  if (!onnx::hasInputShape(ctx, first)) return;
  const auto& a = ctx.getInputType(first)->tensor_type().shape();
  for (size_t i : others) {
    if (i >= ctx.getNumInputs() || !onnx::hasInputShape(ctx, i)) continue;
    const auto& b = ctx.getInputType(i)->tensor_type().shape();
    if (a.dim_size() != b.dim_size()) {
      fail_shape_inference("input ", i, " has rank ", b.dim_size(), ", input ", first, " has ",
                           a.dim_size());
    }
    for (int d = 0; d < a.dim_size(); ++d) {
      if (a.dim(d).has_dim_value() && b.dim(d).has_dim_value() &&
          a.dim(d).dim_value() != b.dim(d).dim_value()) {
        fail_shape_inference("input ", i, " dim ", d, " is ", b.dim(d).dim_value(), ", input ",
                             first, " has ", a.dim(d).dim_value());
      }
    }
  }
}

void Register(OpSchema schema) { onnx::RegisterSchema(std::move(schema)); }

}  // namespace

void RegisterScalerSchemas() {
  Register(AmpcSchema("CheckFinite", __LINE__,
                      "found = true when any element of any input is +inf, -inf or NaN.")
               .Input(0, "gradients", "Gradients (of any float types)", "T", OpSchema::Variadic,
                      /*is_homogeneous=*/false, /*min_arity=*/1)
               .Output(0, "found", "Scalar", "tensor(bool)")
               .TypeConstraint("T", kGradientTypes, "Gradient types")
               .TypeAndShapeInferenceFunction(
                   [](InferenceContext& ctx) { ScalarOutput(ctx, 0, TensorProto::BOOL); }));

  Register(
      AmpcSchema("UpdateScale", __LINE__,
                 "Dynamic loss-scale update (docs/training-design.md, 'The scale update rule'). "
                 "found: back off after "
                 "`hysteresis` consecutive overflows; otherwise grow every growth_interval steps "
                 "when the result is finite and within max_scale. loss_bad or dynamic=0: outputs "
                 "equal inputs.")
          .Input(0, "scale", "", "tensor(float)")
          .Input(1, "growth_tracker", "", "tensor(int64)")
          .Input(2, "hysteresis_left", "", "tensor(int64)")
          .Input(3, "found", "", "tensor(bool)")
          .Input(4, "loss_bad", "", "tensor(bool)")
          .Output(0, "scale_out", "", "tensor(float)")
          .Output(1, "growth_tracker_out", "", "tensor(int64)")
          .Output(2, "hysteresis_left_out", "", "tensor(int64)")
          .Attr("growth_factor", "", onnx::AttributeProto::FLOAT, 2.0f)
          .Attr("backoff_factor", "", onnx::AttributeProto::FLOAT, 0.5f)
          .Attr("growth_interval", "", onnx::AttributeProto::INT, int64_t{2000})
          .Attr("hysteresis", "", onnx::AttributeProto::INT, int64_t{1})
          .Attr("min_scale", "0: none", onnx::AttributeProto::FLOAT, 0.0f)
          .Attr("max_scale", "0: none", onnx::AttributeProto::FLOAT, 0.0f)
          .Attr("dynamic", "0: static or no scaling", onnx::AttributeProto::INT, int64_t{1})
          .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
            RequireScalars(ctx, {0, 1, 2, 3, 4});
            ScalarOutput(ctx, 0, TensorProto::FLOAT);
            ScalarOutput(ctx, 1, TensorProto::INT64);
            ScalarOutput(ctx, 2, TensorProto::INT64);
          }));

  Register(AmpcSchema("UnscaleClip", __LINE__,
                      "outputs = (u_1, ..., u_n, norm) for inputs (scale, g_1, ..., g_n): u_i = "
                      "float(g_i) * float(1 / double(scale)); norm = global L2 norm of the u_i "
                      "(accumulated in double); with max_norm > 0 every u_i is multiplied by "
                      "min(1, max_norm / (norm + 1e-6)).")
               .Input(0, "scale", "", "tensor(float)")
               .Input(1, "gradients", "", "T", OpSchema::Variadic, /*is_homogeneous=*/false,
                      /*min_arity=*/1)
               .Output(0, "outputs", "The unscaled gradients, then the norm", "tensor(float)",
                       OpSchema::Variadic, /*is_homogeneous=*/true, /*min_arity=*/2)
               .Attr("max_norm", "0: no clipping", onnx::AttributeProto::FLOAT, 0.0f)
               .TypeConstraint("T", kGradientTypes, "Gradient types")
               .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
                 RequireScalars(ctx, {0});
                 const size_t n = ctx.getNumInputs() - 1;
                 if (ctx.getNumOutputs() != n + 1) {
                   fail_shape_inference("UnscaleClip with ", n, " gradients has ", n + 1,
                                        " outputs, not ", ctx.getNumOutputs());
                 }
                 for (size_t i = 0; i < n; ++i) ShapeOf(ctx, i + 1, i, TensorProto::FLOAT);
                 ScalarOutput(ctx, n, TensorProto::FLOAT);
               }));
}

void RegisterOptimizerSchemas() {
  Register(
      AmpcSchema("SGD", __LINE__,
                 "torch.optim.SGD (single tensor) on an FP32 parameter; skip: outputs equal "
                 "inputs. buf and buf_out are present exactly when momentum != 0.")
          .Input(0, "skip", "", "tensor(bool)")
          .Input(1, "lr", "", "tensor(float)")
          .Input(2, "first", "true: buf = g (PyTorch's first momentum step)", "tensor(bool)")
          .Input(3, "param", "", "tensor(float)")
          .Input(4, "grad", "", "tensor(float)")
          .Input(5, "buf", "", "tensor(float)", OpSchema::Optional)
          .Output(0, "param_out", "", "tensor(float)")
          .Output(1, "buf_out", "", "tensor(float)", OpSchema::Optional)
          .Attr("momentum", "", onnx::AttributeProto::FLOAT, 0.0f)
          .Attr("dampening", "", onnx::AttributeProto::FLOAT, 0.0f)
          .Attr("nesterov", "", onnx::AttributeProto::INT, int64_t{0})
          .Attr("weight_decay", "", onnx::AttributeProto::FLOAT, 0.0f)
          .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
            RequireScalars(ctx, {0, 1, 2});
            RequireSameShape(ctx, 3, {4, 5});
            const auto* momentum = ctx.getAttribute("momentum");
            const bool with_buf = momentum != nullptr && momentum->f() != 0.0f;
            if ((ctx.getNumInputs() > 5) != with_buf || (ctx.getNumOutputs() > 1) != with_buf) {
              fail_shape_inference("SGD: buf and buf_out are present exactly when momentum != 0");
            }
            ShapeOf(ctx, 3, 0, TensorProto::FLOAT);
            if (ctx.getNumOutputs() > 1) ShapeOf(ctx, 3, 1, TensorProto::FLOAT);
          }));

  Register(AmpcSchema("Adam", __LINE__,
                      "torch.optim.Adam (decoupled=0) or AdamW (decoupled=1), single tensor, "
                      "amsgrad=False, on an FP32 parameter; step is the step number after this "
                      "update (bias correction); skip: outputs equal inputs.")
               .Input(0, "skip", "", "tensor(bool)")
               .Input(1, "lr", "", "tensor(float)")
               .Input(2, "step", "", "tensor(int64)")
               .Input(3, "param", "", "tensor(float)")
               .Input(4, "grad", "", "tensor(float)")
               .Input(5, "m", "", "tensor(float)")
               .Input(6, "v", "", "tensor(float)")
               .Output(0, "param_out", "", "tensor(float)")
               .Output(1, "m_out", "", "tensor(float)")
               .Output(2, "v_out", "", "tensor(float)")
               .Attr("beta1", "", onnx::AttributeProto::FLOAT, 0.9f)
               .Attr("beta2", "", onnx::AttributeProto::FLOAT, 0.999f)
               .Attr("epsilon", "", onnx::AttributeProto::FLOAT, 1e-8f)
               .Attr("weight_decay", "", onnx::AttributeProto::FLOAT, 0.0f)
               .Attr("decoupled", "1: AdamW", onnx::AttributeProto::INT, int64_t{0})
               .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
                 RequireScalars(ctx, {0, 1, 2});
                 RequireSameShape(ctx, 3, {4, 5, 6});
                 for (size_t i = 0; i < 3; ++i) ShapeOf(ctx, 3, i, TensorProto::FLOAT);
               }));
}

// ai.ampc.Dropout: ONNX Dropout whose masks are a function of (seed, call); the training step's
// (passes/training/dropout_mode.h, docs/training-design.md).
void RegisterDropoutSchema() {
  Register(AmpcSchema("Dropout", __LINE__,
                      "ONNX Dropout (opset 13) with a fourth input, call (int64 scalar >= 0): in "
                      "training mode the kept elements of this run are a function of (seed, call, "
                      "element index) only (ampc: Philox4x32-10, kernels/cpu/philox.h).")
               .Input(0, "data", "", "T")
               .Input(1, "ratio", "", "T1", OpSchema::Optional)
               .Input(2, "training_mode", "", "tensor(bool)", OpSchema::Optional)
               .Input(3, "call", "", "tensor(int64)")
               .Output(0, "output", "", "T")
               .Output(1, "mask", "", "tensor(bool)", OpSchema::Optional)
               .Attr("seed", "", onnx::AttributeProto::INT, /*required=*/true)
               .TypeConstraint("T", kGradientTypes, "Data types")
               .TypeConstraint("T1", kGradientTypes, "Ratio types")
               .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
                 RequireScalars(ctx, {1, 2, 3});
                 onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
                 if (onnx::hasInputShape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
                 if (ctx.getNumOutputs() > 1) ShapeOf(ctx, 0, 1, TensorProto::BOOL);
               }));
}

void RegisterGradientSchemas() {
  // The gradient ops of docs/training-design.md ("Gradient ops"):
  // passes/opset/gradient_op_schemas.cc.
  RegisterGradientOpSchemas();
}

void RegisterAmpcDomain() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance();
    if (ranges.Map().count(kAmpcDomain) == 0) {
      ranges.AddDomainToVersion(kAmpcDomain, kAmpcOpsetVersion, kAmpcOpsetVersion);
    }
  });
}

void RegisterAmpcSchemas() {
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterAmpcDomain();
    RegisterScalerSchemas();
    RegisterOptimizerSchemas();
    RegisterDropoutSchema();
    RegisterGradientSchemas();
    RegisterAmpcVersionSchemas();
    RegisterMicrosoftSchemas();
  });
}

}  // namespace ampc
