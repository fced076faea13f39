// Inference-only schemas of the com.microsoft ops that onnxruntime's exports and optimizers write
// (docs/autocast.md, "Ops of other domains"): libonnx has none, so their outputs had no type and
// every node downstream of one was kept as it was. Each schema takes any inputs, outputs and
// attributes (the checker validates nothing about them, as without a schema) and only gives its
// outputs the element type, and where it is plain the shape, that onnxruntime's schema gives them.
#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <algorithm>
#include <string>
#include <vector>

#include "passes/opset/training_ops.h"

namespace ampc {
namespace {

using onnx::InferenceContext;
using onnx::OpSchema;

constexpr char kMicrosoftDomain[] = "com.microsoft";

// How an output's shape follows from the node: unknown, input `from`'s, or input `from`'s with its
// last dim set to the node's integer attribute `attribute` (MatMulNBits' N).
struct OutputRule {
  int from;                        // the input whose element type the output has; -1: float
  bool same_shape = false;         // the shape of input `from`
  const char* last_dim = nullptr;  // with the last dim from this attribute
};

struct MicrosoftOp {
  const char* name;
  std::vector<OutputRule> outputs;
};

// The element types as onnxruntime's contrib schemas constrain them (the mean and inverse standard
// deviation outputs of the normalizations are float).
const std::vector<MicrosoftOp>& MicrosoftOps() {
  static const std::vector<MicrosoftOp> ops = {
      {"MatMulNBits", {{0, true, "N"}}},
      {"SkipLayerNormalization", {{0, true}, {-1}, {-1}, {0, true}}},
      {"SkipSimplifiedLayerNormalization", {{0, true}, {-1}, {-1}, {0, true}}},
      {"GroupQueryAttention", {{0}, {0}, {0}}},
      {"MultiHeadAttention", {{0}, {0}, {0}}},
      {"Attention", {{0}, {0}}},
      {"RotaryEmbedding", {{0, true}}},
      {"Gelu", {{0, true}}},
      {"FastGelu", {{0, true}}},
      {"QuickGelu", {{0, true}}},
      {"BiasGelu", {{0, true}}},
      {"BiasAdd", {{0, true}}},
      {"FusedMatMul", {{0}}},
      {"GemmFastGelu", {{0}}},
  };
  return ops;
}

void InferOutputs(InferenceContext& ctx, const MicrosoftOp& op) {
  const size_t outputs = std::min(ctx.getNumOutputs(), op.outputs.size());
  for (size_t i = 0; i < outputs; ++i) {
    const OutputRule& rule = op.outputs[i];
    if (rule.from < 0) {
      onnx::updateOutputElemType(ctx, i, onnx::TensorProto::FLOAT);
      continue;
    }
    const size_t from = static_cast<size_t>(rule.from);
    const onnx::TypeProto* type = from < ctx.getNumInputs() ? ctx.getInputType(from) : nullptr;
    if (type == nullptr || !type->has_tensor_type()) continue;
    onnx::propagateElemTypeFromInputToOutput(ctx, from, i);
    if (!rule.same_shape || !onnx::hasInputShape(ctx, from)) continue;
    onnx::propagateShapeFromInputToOutput(ctx, from, i);
    onnx::TensorShapeProto* shape = ctx.getOutputType(i)->mutable_tensor_type()->mutable_shape();
    if (rule.last_dim == nullptr || shape->dim_size() == 0) continue;
    onnx::TensorShapeProto_Dimension* last = shape->mutable_dim(shape->dim_size() - 1);
    last->Clear();
    const onnx::AttributeProto* dim = ctx.getAttribute(rule.last_dim);
    if (dim != nullptr && dim->has_i()) last->set_dim_value(dim->i());
  }
}

}  // namespace

void RegisterMicrosoftSchemas() {
  auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance();
  if (ranges.Map().count(kMicrosoftDomain) == 0) ranges.AddDomainToVersion(kMicrosoftDomain, 1, 1);
  for (const MicrosoftOp& op : MicrosoftOps()) {
    OpSchema schema(op.name, __FILE__, __LINE__);
    schema.SetDomain(kMicrosoftDomain)
        .SinceVersion(1)
        .SetDoc("onnxruntime's contrib op; ampc knows its output types only.")
        .AllowUncheckedAttributes()
        .Input(0, "inputs", "any inputs", "T", OpSchema::Variadic, /*is_homogeneous=*/false,
               /*min_arity=*/0)
        .Output(0, "outputs", "any outputs", "T", OpSchema::Variadic, /*is_homogeneous=*/false,
                /*min_arity=*/0)
        .TypeConstraint("T", OpSchema::all_tensor_types_ir4(), "any tensor")
        .TypeAndShapeInferenceFunction([&op](InferenceContext& ctx) { InferOutputs(ctx, op); });
    onnx::RegisterSchema(std::move(schema));
  }
}

}  // namespace ampc
