#include "models/transformer.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_replace.h"
#include "models/model_builder.h"

namespace ampc::models {
namespace {

absl::Status Validate(const TransformerOptions& o) {
  for (int64_t size : {o.vocab, o.seq, o.hidden, o.heads, o.layers, o.classes}) {
    if (size <= 0) {
      return absl::InvalidArgumentError("transformer sizes must be positive (ffn may be 0)");
    }
  }
  if (o.ffn < 0) return absl::InvalidArgumentError("transformer ffn must be >= 0");
  if (o.hidden % o.heads != 0) {
    return absl::InvalidArgumentError("transformer hidden must be a multiple of heads");
  }
  return absl::OkStatus();
}

// Shared constants: GELU's and the attention scale's scalars, the Reshape shapes.
constexpr char kSqrtHeadDim[] = "const.sqrt_head_dim";
constexpr char kSqrt2[] = "const.sqrt2";
constexpr char kOne[] = "const.one";
constexpr char kHalf[] = "const.half";
constexpr char kSplitHeadsShape[] = "const.split_heads_shape";
constexpr char kMergeHeadsShape[] = "const.merge_heads_shape";

// Builds the graph in order; a scope such as "layer0/attn/q" names nodes "/layer0/attn/q/MatMul"
// and values and initializers "layer0.attn.q.weight".
class TransformerBuilder {
 public:
  TransformerBuilder(const TransformerOptions& options, onnx::GraphProto* graph)
      : o_(options), graph_(graph), rng_(options.seed) {}

  void Build() {
    AddTensorValue(graph_->add_input(), "tokens", onnx::TensorProto::INT64, {-1, o_.seq});
    AddTensorValue(graph_->add_input(), "label", onnx::TensorProto::INT64, {-1});
    AddConstants();
    std::string x = Embed();
    for (int64_t i = 0; i < o_.layers; ++i) x = EncoderLayer("layer" + std::to_string(i), x);
    x = LayerNorm("final_norm", x);
    onnx::NodeProto* pool = AddNode(graph_, "ReduceMean", {x}, {"pooled"}, "/pool/ReduceMean");
    AddIntsAttribute(pool, "axes", {1});
    AddIntAttribute(pool, "keepdims", 0);
    AddLinearGemm(graph_, "head", "pooled", "logits", o_.hidden, o_.classes, rng_);
    AddCrossEntropyLoss(graph_, "logits", "label", "loss");
    AddTensorValue(graph_->add_output(), "logits", onnx::TensorProto::FLOAT, {-1, o_.classes});
    AddTensorValue(graph_->add_output(), "loss", onnx::TensorProto::FLOAT, {});
  }

 private:
  static std::string Dotted(const std::string& scope) {
    return absl::StrReplaceAll(scope, {{"/", "."}});
  }

  std::string Node(const std::string& op, const std::string& scope,
                   const std::vector<std::string>& inputs, onnx::NodeProto** node = nullptr) {
    const std::string out = Dotted(scope) + "." + op;
    onnx::NodeProto* added = AddNode(graph_, op, inputs, {out}, "/" + scope + "/" + op);
    if (node != nullptr) *node = added;
    return out;
  }

  void AddConstants() {
    const int64_t head_dim = o_.hidden / o_.heads;
    AddScalarConstant(graph_, kSqrtHeadDim, std::sqrt(static_cast<float>(head_dim)));
    AddScalarConstant(graph_, kSqrt2, std::sqrt(2.0f));
    AddScalarConstant(graph_, kOne, 1.0f);
    AddScalarConstant(graph_, kHalf, 0.5f);
    // 0 copies the input's dim, so the shapes hold for any batch size.
    AddInt64Initializer(graph_, kSplitHeadsShape, {0, 0, o_.heads, head_dim});
    AddInt64Initializer(graph_, kMergeHeadsShape, {0, 0, o_.hidden});
  }

  std::string Embed() {
    const float unit = std::sqrt(3.0f);  // U(-sqrt 3, sqrt 3) has variance 1, as nn.Embedding
    AddUniformInitializer(graph_, "embed.tokens.weight", {o_.vocab, o_.hidden}, unit, rng_);
    AddUniformInitializer(graph_, "embed.positions.weight", {o_.seq, o_.hidden}, unit, rng_);
    const std::string tokens = Node("Gather", "embed/tokens", {"embed.tokens.weight", "tokens"});
    return Node("Add", "embed/positions", {tokens, "embed.positions.weight"});
  }

  std::string EncoderLayer(const std::string& scope, const std::string& x) {
    const std::string attn = Attention(scope + "/attn", LayerNorm(scope + "/norm1", x));
    const std::string mid = Node("Add", scope + "/residual1", {x, attn});
    const std::string mlp = Mlp(scope + "/mlp", LayerNorm(scope + "/norm2", mid));
    return Node("Add", scope + "/residual2", {mid, mlp});
  }

  std::string LayerNorm(const std::string& scope, const std::string& x) {
    const std::string name = Dotted(scope);
    AddFilledInitializer(graph_, name + ".weight", {o_.hidden}, 1.0f);
    AddFilledInitializer(graph_, name + ".bias", {o_.hidden}, 0.0f);
    onnx::NodeProto* node = nullptr;
    const std::string y =
        Node("LayerNormalization", scope, {x, name + ".weight", name + ".bias"}, &node);
    AddIntAttribute(node, "axis", -1);
    AddFloatAttribute(node, "epsilon", 1e-5f);
    return y;
  }

  // nn.Linear on a 3-D value: MatMul by weight [in, out], then Add bias.
  std::string Linear(const std::string& scope, const std::string& x, int64_t in, int64_t out) {
    const std::string name = Dotted(scope);
    const float bound = 1.0f / std::sqrt(static_cast<float>(in));
    AddUniformInitializer(graph_, name + ".weight", {in, out}, bound, rng_);
    AddUniformInitializer(graph_, name + ".bias", {out}, bound, rng_);
    return Node("Add", scope, {Node("MatMul", scope, {x, name + ".weight"}), name + ".bias"});
  }

  // [N,seq,hidden] -> [N,heads,seq,hd], or [N,heads,hd,seq] with `perm` {0,2,3,1} for K^T.
  std::string SplitHeads(const std::string& scope, const std::string& x,
                         const std::vector<int64_t>& perm) {
    onnx::NodeProto* node = nullptr;
    Node("Transpose", scope, {Node("Reshape", scope, {x, kSplitHeadsShape})}, &node);
    AddIntsAttribute(node, "perm", perm);
    return node->output(0);
  }

  std::string Attention(const std::string& scope, const std::string& x) {
    const std::string q =
        SplitHeads(scope + "/q", Linear(scope + "/q", x, o_.hidden, o_.hidden), {0, 2, 1, 3});
    const std::string k =
        SplitHeads(scope + "/k", Linear(scope + "/k", x, o_.hidden, o_.hidden), {0, 2, 3, 1});
    const std::string v =
        SplitHeads(scope + "/v", Linear(scope + "/v", x, o_.hidden, o_.hidden), {0, 2, 1, 3});
    const std::string scores = Node("MatMul", scope + "/scores", {q, k});
    const std::string scaled = Node("Div", scope + "/scores", {scores, kSqrtHeadDim});
    onnx::NodeProto* softmax = nullptr;
    const std::string probs = Node("Softmax", scope + "/scores", {scaled}, &softmax);
    AddIntAttribute(softmax, "axis", -1);
    const std::string context = Node("MatMul", scope + "/context", {probs, v});
    onnx::NodeProto* transpose = nullptr;
    Node("Transpose", scope + "/context", {context}, &transpose);
    AddIntsAttribute(transpose, "perm", {0, 2, 1, 3});
    const std::string merged =
        Node("Reshape", scope + "/context", {transpose->output(0), kMergeHeadsShape});
    return Linear(scope + "/out", merged, o_.hidden, o_.hidden);
  }

  // Linear - GELU (x * 0.5 * (1 + erf(x / sqrt 2)), as PyTorch exports it) - Linear.
  std::string Mlp(const std::string& scope, const std::string& x) {
    const int64_t ffn = o_.ffn > 0 ? o_.ffn : 4 * o_.hidden;
    const std::string h = Linear(scope + "/fc1", x, o_.hidden, ffn);
    const std::string gelu = scope + "/gelu";
    const std::string erf = Node("Erf", gelu, {Node("Div", gelu, {h, kSqrt2})});
    const std::string gate = Node("Mul", gelu + "/x", {h, Node("Add", gelu, {erf, kOne})});
    return Linear(scope + "/fc2", Node("Mul", gelu + "/half", {gate, kHalf}), ffn, o_.hidden);
  }

  const TransformerOptions& o_;
  onnx::GraphProto* graph_;
  std::mt19937 rng_;
};

}  // namespace

absl::StatusOr<onnx::ModelProto> BuildTransformer(const TransformerOptions& options) {
  if (absl::Status valid = Validate(options); !valid.ok()) return valid;
  onnx::ModelProto model = NewModel("sequence_transformer");
  TransformerBuilder(options, model.mutable_graph()).Build();
  return model;
}

}  // namespace ampc::models
