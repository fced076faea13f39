#include "passes/autocast_policy.h"

#include <onnx/onnx_pb.h>

#include <vector>

#include "absl/strings/str_cat.h"

namespace ampc {
namespace {

constexpr absl::string_view kLower[] = {
    "MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum", "LSTM", "GRU", "RNN",
    // scaled dot-product attention, as PyTorch autocast lowers it; a depthwise causal conv
    "Attention", "CausalConvWithState"};

// Reductions that can overflow FP16 or lose it in long sums, transcendental ops, losses.
constexpr absl::string_view kFp32[] = {
    "Exp", "Log", "Pow", "Reciprocal", "Softplus", "Softmax", "LogSoftmax",
    "SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss", "ReduceSum", "ReduceMean", "ReduceProd",
    "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "CumSum",
    "LpNormalization", "LpPool", "MeanVarianceNormalization", "InstanceNormalization",
    "GroupNormalization", "Range", "RandomNormal", "RandomNormalLike", "RandomUniform",
    "RandomUniformLike", "Acos", "Asin", "Acosh", "Asinh", "Atan", "Atanh", "Cosh", "Sinh", "Tan",
    "GlobalAveragePool",
    // FP16 keeps 11 bits of an angle: position * frequency is off by whole radians past 2048
    "Sin", "Cos", "CumProd", "DFT", "STFT", "Det", "LRN", "GlobalLpPool", "Bernoulli",
    "Multinomial",
    // a recurrent state summed over the whole sequence
    "LinearAttention",
    // torchvision's autocast runs deform_conv2d in FP32
    "DeformConv"};

constexpr absl::string_view kFollow[] = {
    // elementwise arithmetic and activations
    "Add", "Sub", "Mul", "Div", "Sum", "Max", "Min", "Mean", "Relu", "LeakyRelu", "PRelu", "Elu",
    "Selu", "Gelu", "Erf", "Sigmoid", "HardSigmoid", "Tanh", "Sqrt", "Abs", "Neg", "Clip", "Where",
    // data movement
    "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Expand", "Tile", "Slice", "Split",
    "Concat", "Gather", "GatherElements", "GatherND", "Scatter", "ScatterElements", "ScatterND",
    "Pad", "Identity", "DepthToSpace", "SpaceToDepth", "Resize",
    // pooling, normalization with FP32 statistics, dropout
    "MaxPool", "AveragePool", "GlobalMaxPool", "LayerNormalization", "BatchNormalization",
    "Dropout",
    // comparisons and selections: exact in any precision
    "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "TopK", "ArgMax", "ArgMin",
    "ReduceMax", "ReduceMin",
    // read only the input's shape: any dtype is exact (missing, they forced an FP32 copy)
    "Shape", "Size", "EyeLike",
    // more elementwise ops: activations, rounding, tests, gating, rotary position embedding
    "Mish", "HardSwish", "Swish", "SwiGLU", "Celu", "Softsign", "ThresholdedRelu", "Shrink", "Ceil",
    "Floor", "Round", "Sign", "Mod", "IsInf", "IsNaN", "RotaryEmbedding",
    // more data movement and sampling
    "Trilu", "ReverseSequence", "Compress", "OneHot", "NonZero", "Unique", "TensorScatter",
    "CenterCropPad", "Col2Im", "Upsample", "GridSample", "AffineGrid", "RoiAlign", "MaxRoiPool",
    "MaxUnpool", "Hardmax",
    // FP32 statistics by default (stash_type = 1), as LayerNormalization
    "RMSNormalization"};

// Ops autocast leaves as the model states them, each with the reason (docs/autocast.md).
struct KeptOps {
  absl::string_view reason;
  std::vector<absl::string_view> ops;
};
const KeptOps kKept[] = {
    {"states its dtypes: converting it would change what the model asks for",
     {"Cast", "CastLike", "BitCast"}},
    {"quantized: its scales and zero points have the types the quantizer chose",
     {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearMatMul", "QLinearConv",
      "ConvInteger", "MatMulInteger"}},
    {"makes a tensor of a stated dtype from no float input",
     {"Constant", "ConstantOfShape", "HannWindow", "HammingWindow", "BlackmanWindow",
      "MelWeightMatrix"}},
    {"control flow: its signature is kept and its bodies are planned op by op",
     {"If", "Loop", "Scan"}},
    {"sequences and optionals: ampc assigns dtypes to tensors only",
     {"SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase", "SequenceInsert",
      "SequenceLength", "SequenceMap", "SplitToSequence", "ConcatFromSequence", "Optional",
      "OptionalGetElement", "OptionalHasElement"}},
    {"no input of a float type it may change",
     {"And", "Or", "Xor", "Not", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot",
      "StringConcat", "StringNormalizer", "StringSplit", "RegexFullMatch", "ImageDecoder",
      "NonMaxSuppression", "TfIdfVectorizer"}},
};

// BF16 has FP32's exponent range, and kernels accumulate in FP32 anyway.
constexpr absl::string_view kFollowInBf16[] = {"ReduceSum", "ReduceMean", "ReduceSumSquare",
                                               "GlobalAveragePool"};

std::string Key(absl::string_view domain, absl::string_view op_type) {
  if (domain.empty() || domain == "ai.onnx") return std::string(op_type);
  return absl::StrCat(domain, ".", op_type);
}

}  // namespace

absl::string_view CategoryName(Category category) {
  switch (category) {
    case Category::kLower:
      return "LOWER";
    case Category::kFp32:
      return "FP32";
    case Category::kFollow:
      return "FOLLOW";
    case Category::kKeep:
      break;
  }
  return "KEEP";
}

absl::StatusOr<Category> ParseCategory(absl::string_view name) {
  for (Category c : {Category::kLower, Category::kFp32, Category::kFollow, Category::kKeep}) {
    if (CategoryName(c) == name) return c;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown category '", name, "' (expected LOWER, FP32, FOLLOW or KEEP)"));
}

AutocastPolicy AutocastPolicy::Defaults(int low_dtype) {
  AutocastPolicy policy;
  const std::string source = "default table";
  for (absl::string_view op : kLower) policy.Set(std::string(op), Category::kLower, source);
  for (absl::string_view op : kFp32) policy.Set(std::string(op), Category::kFp32, source);
  for (absl::string_view op : kFollow) policy.Set(std::string(op), Category::kFollow, source);
  for (const KeptOps& kept : kKept) {
    for (absl::string_view op : kept.ops) {
      policy.Set(std::string(op), Category::kKeep, std::string(kept.reason));
    }
  }
  if (low_dtype == onnx::TensorProto::BFLOAT16) {
    for (absl::string_view op : kFollowInBf16) {
      policy.Set(std::string(op), Category::kFollow, "default table (bf16)");
    }
  }
  return policy;
}

Category AutocastPolicy::Lookup(absl::string_view domain, absl::string_view op_type) const {
  auto it = entries_.find(Key(domain, op_type));
  return it == entries_.end() ? Category::kKeep : it->second.category;
}

const std::string& AutocastPolicy::Source(absl::string_view domain,
                                          absl::string_view op_type) const {
  static const std::string* unknown = new std::string("not in the policy");
  auto it = entries_.find(Key(domain, op_type));
  return it == entries_.end() ? *unknown : it->second.source;
}

bool AutocastPolicy::Has(absl::string_view domain, absl::string_view op_type) const {
  return entries_.contains(Key(domain, op_type));
}

void AutocastPolicy::Set(const std::string& key, Category category, const std::string& source) {
  entries_[key] = Entry{category, source};
}

}  // namespace ampc
