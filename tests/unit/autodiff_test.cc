// The autodiff pass's gradient rules (standard ONNX, and those emitting ai.ampc gradient ops)
// against central finite differences, in FP64 on the CPU runtime: each case is
// loss = ReduceSum(op(operands) * r) with r fixed, so the gradient of every param operand is
// checked elementwise (also through the Mul and ReduceSum rules).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <span>

#include "tests/support/gradient_check.h"

namespace ampc {
namespace {

using testing::GradientCase;
using ::testing::HasSubstr;
using testing::Operand;

// The FP32 round trip rounds x + h: a larger step, and a tolerance for FP32's rounding of it.
GradientCase RoundTripCase(std::string name, std::vector<Operand> operands, std::string body) {
  GradientCase c(std::move(name), std::move(operands), std::move(body), {2, 3});
  c.h = 1e-2;
  c.tolerance = 1e-4;
  return c;
}

// NegativeLogLikelihoodLoss with fixed positive class weights (weights get no gradient).
GradientCase NllCase(const std::string& name, const std::string& attributes) {
  Operand weights = Operand::Positive("w", {4});
  weights.param = false;
  return {name,
          {{"s", {3, 4}}, Operand::Fixed("t", {3}, "int64", {1, 3, 1}), weights},
          absl::StrCat("y = NegativeLogLikelihoodLoss <", attributes, "> (s, t, w)"),
          {}};
}

// Gelu (opset 20) in both forms.
GradientCase GeluCase(const std::string& approximate) {
  GradientCase c(absl::StrCat("Gelu_", approximate), {Operand("x", {2, 3})},
                 absl::StrCat("y = Gelu <approximate = \"", approximate, "\"> (x)"), {2, 3});
  c.opset = 20;
  return c;
}

// BatchNormalization in training mode at `opset` (18 moved ReduceMean's axes to an input; the
// rule's statistics must be valid in the model's opset, as dynamo exports are opset 18).
GradientCase BatchNormCase(int opset) {
  GradientCase c(absl::StrCat("BatchNormalization_training_opset", opset),
                 {{"x", {3, 2, 2, 2}},
                  {"s", {2}},
                  {"b", {2}},
                  Operand("m", {2}, false),
                  Operand("v", {2}, false)},
                 "y, rm, rv = BatchNormalization <epsilon = 0.001, training_mode = 1> (x, s, b, m, "
                 "v)",
                 {3, 2, 2, 2});
  c.opset = opset;
  return c;
}

GradientCase AtOpset(GradientCase c, int opset) {
  c.opset = opset;
  return c;
}

// An opset-23 op without a gradient rule, differentiated through its function body.
GradientCase Opset23(GradientCase c) { return AtOpset(std::move(c), 23); }

// RotaryEmbedding has no double: FP32, with a larger step (it is linear in each operand).
GradientCase Float(GradientCase c) {
  c.type = "float";
  c.h = 1e-2;
  c.tolerance = 1e-4;
  return c;
}

// A case whose operands and output are declared with `declared` dims (dynamic axes).
GradientCase Symbolic(GradientCase c, std::string y_declared) {
  c.y_declared = std::move(y_declared);
  return c;
}

std::vector<GradientCase> Cases() {
  const Operand x("x", {2, 3});
  return {
      {"Add_broadcast", {x, {"p", {3}}}, "y = Add(x, p)", {2, 3}},
      {"Sub_broadcast", {x, {"p", {2, 1}}}, "y = Sub(x, p)", {2, 3}},
      {"Mul_broadcast", {x, {"p", {1, 3}}}, "y = Mul(p, x)", {2, 3}},
      {"Mul_same_value_twice", {x}, "y = Mul(x, x)", {2, 3}},
      {"Div_broadcast", {x, Operand::Positive("p", {3})}, "y = Div(x, p)", {2, 3}},
      {"Add_scalar_broadcast", {x, {"p", {}}}, "y = Add(x, p)", {2, 3}},
      {"Neg", {x}, "y = Neg(x)", {2, 3}},
      {"Relu", {x}, "y = Relu(x)", {2, 3}},
      {"LeakyRelu", {x}, "y = LeakyRelu <alpha = 0.2> (x)", {2, 3}},
      {"Sigmoid", {x}, "y = Sigmoid(x)", {2, 3}},
      {"Tanh", {x}, "y = Tanh(x)", {2, 3}},
      {"Erf", {x}, "y = Erf(x)", {2, 3}},
      {"Sqrt", {Operand::Positive("x", {2, 3})}, "y = Sqrt(x)", {2, 3}},
      {"Exp", {x}, "y = Exp(x)", {2, 3}},
      {"Log", {Operand::Positive("x", {2, 3})}, "y = Log(x)", {2, 3}},
      {"Pow_constant_exponent",
       {Operand::Positive("x", {2, 3})},
       "e = Constant <value = double {2.5}> ()\n  y = Pow(x, e)",
       {2, 3}},
      {"Pow_integer_exponent", {x}, "e = Constant <value = int64 {3}> ()\n  y = Pow(x, e)", {2, 3}},
      {"Pow_unsigned_exponent_zero",  // 0 - 1 must not wrap in uint8
       {Operand::Positive("x", {2, 3})},
       "e = Constant <value = uint8 {0}> ()\n  y = Pow(x, e)",
       {2, 3}},
      {"Identity", {x}, "y = Identity(x)", {2, 3}},
      RoundTripCase("Cast_to_float_and_back", {Operand("x", {2, 3})},
                    "c = Cast <to = 1> (x)\n  y = Cast <to = 11> (c)"),
      RoundTripCase("CastLike_to_float_and_back", {Operand("x", {2, 3}), Operand("f", {1}, false)},
                    "f32 = Cast <to = 1> (f)\n  c = CastLike(x, f32)\n  y = Cast <to = 11> (c)"),
      {"MatMul", {x, {"w", {3, 4}}}, "y = MatMul(x, w)", {2, 4}},
      // Dynamic axes: equal names broadcast alike; unknown dims are decided at run time.
      Symbolic({"Add_named_batch",
                {Operand("x", {2, 3}).Declared("N,3"), Operand("p", {2, 3}).Declared("N,3")},
                "y = Add(x, p)",
                {2, 3}},
               "N,3"),
      Symbolic({"Add_broadcast_decided_at_run_time",
                {Operand("x", {2, 3}).Declared("?,3"), Operand("p", {1, 3}).Declared("?,3")},
                "y = Add(x, p)",
                {2, 3}},
               "?,3"),
      Symbolic({"Mul_lower_rank_broadcast_decided_at_run_time",
                {Operand("x", {2, 2, 3}).Declared("?,?,3"), Operand("p", {1, 3}).Declared("?,3")},
                "y = Mul(x, p)",
                {2, 2, 3}},
               "?,?,3"),
      Symbolic(
          {"MatMul_batch_broadcast_decided_at_run_time",
           {Operand("x", {2, 2, 3}).Declared("?,2,3"), Operand("w", {1, 3, 4}).Declared("?,3,4")},
           "y = MatMul(x, w)",
           {2, 2, 4}},
          "?,2,4"),
      {"MatMul_batch_broadcast", {{"x", {2, 2, 3}}, {"w", {3, 4}}}, "y = MatMul(x, w)", {2, 2, 4}},
      {"MatMul_rank4_by_matrix",
       {{"x", {2, 3, 2, 3}}, {"w", {3, 4}}},
       "y = MatMul(x, w)",
       {2, 3, 2, 4}},
      // Attention's products: a broadcast batch on either side, and 1-D operands.
      {"MatMul_rank4_broadcast_head_batch",
       {{"q", {1, 2, 2, 3}}, {"k", {2, 2, 3, 2}}},
       "y = MatMul(q, k)",
       {2, 2, 2, 2}},
      {"MatMul_lower_rank_lhs_broadcast",
       {{"x", {2, 2, 3}}, {"w", {2, 1, 3, 4}}},
       "y = MatMul(x, w)",
       {2, 2, 2, 4}},
      {"MatMul_vector_by_matrix", {{"v", {3}}, {"w", {3, 4}}}, "y = MatMul(v, w)", {4}},
      {"MatMul_batched_by_vector", {{"x", {2, 2, 3}}, {"v", {3}}}, "y = MatMul(x, v)", {2, 2}},
      {"MatMul_vector_by_batched", {{"v", {3}}, {"w", {2, 3, 4}}}, "y = MatMul(v, w)", {2, 4}},
      {"MatMul_vector_dot_vector", {{"u", {3}}, {"v", {3}}}, "y = MatMul(u, v)", {}},
      Symbolic({"MatMul_named_batch_by_matrix",
                {Operand("x", {2, 3, 2, 3}).Declared("B,3,S,3"), {"w", {3, 4}}},
                "y = MatMul(x, w)",
                {2, 3, 2, 4}},
               "B,3,S,4"),
      Symbolic({"MatMul_named_batch_broadcast_heads",
                {Operand("q", {2, 1, 2, 3}).Declared("B,1,S,3"),
                 Operand("k", {2, 2, 3, 2}).Declared("B,2,3,S")},
                "y = MatMul(q, k)",
                {2, 2, 2, 2}},
               "B,2,S,S"),
      {"Gemm_transB_bias",
       {x, {"w", {4, 3}}, {"b", {4}}},
       "y = Gemm <transB = 1> (x, w, b)",
       {2, 4}},
      {"Gemm_transA_alpha_beta",
       {{"a", {3, 2}}, {"w", {3, 4}}, {"b", {1, 4}}},
       "y = Gemm <transA = 1, alpha = 0.5, beta = 2.0> (a, w, b)",
       {2, 4}},
      {"Gemm_transA_transB",
       {{"a", {3, 2}}, {"w", {4, 3}}, {"b", {2, 4}}},
       "y = Gemm <transA = 1, transB = 1> (a, w, b)",
       {2, 4}},
      {"Flatten", {{"x", {2, 3, 2}}}, "y = Flatten <axis = 1> (x)", {2, 6}},
      {"Reshape", {x}, "s = Constant <value_ints = [3, 2]> ()\n  y = Reshape(x, s)", {3, 2}},
      {"Transpose", {{"x", {2, 3, 4}}}, "y = Transpose <perm = [2, 0, 1]> (x)", {4, 2, 3}},
      {"Squeeze",
       {{"x", {2, 1, 3}}},
       "a = Constant <value_ints = [1]> ()\n  y = Squeeze(x, a)",
       {2, 3}},
      {"Unsqueeze", {x}, "a = Constant <value_ints = [0]> ()\n  y = Unsqueeze(x, a)", {1, 2, 3}},
      {"Concat", {x, {"p", {2, 2}}}, "y = Concat <axis = 1> (x, p)", {2, 5}},
      Symbolic({"Concat_sizes_known_at_run_time",
                {Operand("x", {2, 3}).Declared("N,?"), Operand("p", {2, 2}).Declared("N,?")},
                "y = Concat <axis = 1> (x, p)",
                {2, 5}},
               "N,?"),
      {"Split_one_output_unused",
       {{"x", {2, 5}}},
       "s = Constant <value_ints = [2, 3]> ()\n  y, z = Split <axis = 1> (x, s)",
       {2, 2}},
      {"Slice",
       {{"x", {3, 4}}},
       "s = Constant <value_ints = [1, 0]> ()\n  e = Constant <value_ints = [3, 3]> ()\n"
       "  y = Slice(x, s, e)",
       {2, 3}},
      {"Slice_negative_step",
       {{"x", {3, 5}}},
       "s = Constant <value_ints = [-1]> ()\n  e = Constant <value_ints = [-6]> ()\n"
       "  a = Constant <value_ints = [1]> ()\n  t = Constant <value_ints = [-2]> ()\n"
       "  y = Slice(x, s, e, a, t)",
       {3, 3}},
      {"Gather_embedding",
       {{"t", {4, 3}}, Operand::Fixed("i", {2, 3}, "int64", {0, 2, 2, 3, 0, 0})},
       "y = Gather(t, i)",
       {2, 3, 3}},
      // x[:, 0] of ViT's and BERT's classifier token: a scalar index on axis 1.
      {"Gather_axis1_scalar_index",
       {{"x", {2, 3, 4}}, Operand::Fixed("i", {}, "int64", {0})},
       "y = Gather <axis = 1> (x, i)",
       {2, 4}},
      {"Gather_axis2_repeated_indices",
       {{"x", {2, 3, 4}}, Operand::Fixed("i", {2, 2}, "int64", {3, 0, 3, -1})},
       "y = Gather <axis = 2> (x, i)",
       {2, 3, 2, 2}},
      {"Gather_negative_axis",
       {{"x", {2, 3, 4}}, Operand::Fixed("i", {2}, "int64", {2, 0})},
       "y = Gather <axis = -2> (x, i)",
       {2, 2, 4}},
      {"GatherElements_axis1_negative_repeated_indices",
       {{"x", {3, 4}}, Operand::Fixed("i", {3, 2}, "int64", {0, -1, 3, 3, 1, -4})},
       "y = GatherElements <axis = 1> (x, i)",
       {3, 2}},
      {"GatherElements_axis0_default",
       {{"x", {3, 2, 2}}, Operand::Fixed("i", {2, 2, 1}, "int64", {2, 0, 2, -1})},
       "y = GatherElements(x, i)",
       {2, 2, 1}},
      Symbolic({"GatherElements_named_batch",
                {Operand("x", {2, 3}).Declared("N,3"),
                 Operand::Fixed("i", {2, 2}, "int64", {1, 1, 0, 2}).Declared("N,2")},
                "y = GatherElements <axis = -1> (x, i)",
                {2, 2}},
               "N,2"),
      {"GatherND_tuples_repeated",
       {{"x", {3, 4, 2}}, Operand::Fixed("i", {3, 2}, "int64", {1, 2, -1, 0, 1, 2})},
       "y = GatherND(x, i)",
       {3, 2}},
      {"GatherND_batch_dims1",
       {{"x", {2, 3, 4}}, Operand::Fixed("i", {2, 2, 1}, "int64", {2, 2, -1, 0})},
       "y = GatherND <batch_dims = 1> (x, i)",
       {2, 2, 4}},
      {"GatherND_batch_dims2_full_tuples",
       {{"x", {2, 3, 4}}, Operand::Fixed("i", {2, 3, 1}, "int64", {0, 3, 3, 1, -1, 2})},
       "y = GatherND <batch_dims = 2> (x, i)",
       {2, 3}},
      Symbolic({"GatherND_batch_dims1_named_batch",
                {Operand("x", {2, 3, 4}).Declared("N,3,4"),
                 Operand::Fixed("i", {2, 1, 2}, "int64", {0, 1, 2, 3}).Declared("N,1,2")},
                "y = GatherND <batch_dims = 1> (x, i)",
                {2, 1}},
               "N,1"),
      {"Einsum_matmul", {x, {"w", {3, 4}}}, "y = Einsum <equation = \"ij,jk->ik\"> (x, w)", {2, 4}},
      {"Einsum_implicit_output",
       {{"a", {2, 3}}, {"w", {4, 3}}},
       "y = Einsum <equation = \"ij, kj\"> (a, w)",
       {2, 4}},
      {"Einsum_attention_scores",
       {{"q", {2, 2, 3, 2}}, {"k", {2, 2, 4, 2}}},
       "y = Einsum <equation = \"bhqd,bhkd->bhqk\"> (q, k)",
       {2, 2, 3, 4}},
      {"Einsum_label_summed_in_one_operand",
       {{"a", {2, 3}}, {"v", {2}}},
       "y = Einsum <equation = \"ij,i->i\"> (a, v)",
       {2}},
      {"Einsum_full_contraction",
       {x, {"p", {2, 3}}},
       "y = Einsum <equation = \"ij,ij->\"> (x, p)",
       {}},
      {"Einsum_outer_product_transposed",
       {{"u", {2}}, {"v", {3}}},
       "y = Einsum <equation = \"i,j->ji\"> (u, v)",
       {3, 2}},
      {"Einsum_three_operands",
       {{"a", {2, 3}}, {"b", {3, 4}}, {"c", {4}}},
       "y = Einsum <equation = \"ij,jk,k->ij\"> (a, b, c)",
       {2, 3}},
      {"Einsum_ellipsis_by_matrix",
       {{"x", {2, 2, 3}}, {"w", {3, 4}}},
       "y = Einsum <equation = \"...ij,jk->...ik\"> (x, w)",
       {2, 2, 4}},
      {"Einsum_ellipsis_broadcast_both_sides",
       {{"a", {2, 1, 2, 3}}, {"b", {1, 3, 3, 2}}},
       "y = Einsum <equation = \"...ij,...jk->...ik\"> (a, b)",
       {2, 3, 2, 2}},
      {"Einsum_ellipsis_in_middle_summed_by_other",
       {{"a", {2, 3, 4}}, {"b", {4, 2}}},
       "y = Einsum <equation = \"i...j,jk->...ik\"> (a, b)",
       {3, 2, 2}},
      Symbolic({"Einsum_named_batch",
                {Operand("x", {2, 2, 3}).Declared("B,2,3"), {"w", {3, 4}}},
                "y = Einsum <equation = \"bij,jk->bik\"> (x, w)",
                {2, 2, 4}},
               "B,2,4"),
      Opset23({"RMSNormalization_through_body",
               {{"x", {2, 3, 4}}, {"s", {4}}},
               "y = RMSNormalization <epsilon = 0.001, stash_type = 11> (x, s)",
               {2, 3, 4}}),
      Opset23({"RMSNormalization_axis1",
               {{"x", {2, 3, 2}}, {"s", {3, 2}}},
               "y = RMSNormalization <axis = 1, stash_type = 11> (x, s)",
               {2, 3, 2}}),
      Float(Opset23({"RotaryEmbedding_through_body",
                     {{"x", {1, 2, 3, 4}},
                      {"c", {3, 2}},
                      {"n", {3, 2}},
                      Operand::Fixed("p", {1, 3}, "int64", {0, 2, 1})},
                     "y = RotaryEmbedding(x, c, n, p)",
                     {1, 2, 3, 4}})),
      Float(
          Opset23({"RotaryEmbedding_interleaved_partial_3d",
                   {{"x", {1, 3, 8}},
                    {"c", {3, 1}},
                    {"n", {3, 1}},
                    Operand::Fixed("p", {1, 3}, "int64", {2, 0, 1})},
                   "y = RotaryEmbedding <interleaved = 1, num_heads = 2, rotary_embedding_dim = 2> "
                   "(x, c, n, p)",
                   {1, 3, 8}})),
      // Bodies within bodies: Mish's calls Softplus, which has no rule but a body of its own.
      AtOpset({"Mish_through_nested_bodies", {x}, "y = Mish(x)", {2, 3}}, 18),
      Symbolic(Opset23({"RMSNormalization_named_batch",
                        {Operand("x", {2, 3, 4}).Declared("N,S,4"), {"s", {4}}},
                        "y = RMSNormalization <stash_type = 11> (x, s)",
                        {2, 3, 4}}),
               "N,S,4"),
      Symbolic(Float(Opset23({"RotaryEmbedding_named_batch_and_sequence",
                              {Operand("x", {1, 2, 3, 4}).Declared("N,2,S,4"),
                               {"c", {3, 2}},
                               {"n", {3, 2}},
                               Operand::Fixed("p", {1, 3}, "int64", {0, 2, 1}).Declared("N,S")},
                              "y = RotaryEmbedding(x, c, n, p)",
                              {1, 2, 3, 4}})),
               "N,2,S,4"),
      Symbolic(Opset23({"Attention_named_batch_and_sequence",
                        {Operand("q", {1, 2, 3, 4}).Declared("N,2,S,4"),
                         Operand("k", {1, 2, 3, 4}).Declared("N,2,S,4"),
                         Operand("v", {1, 2, 3, 4}).Declared("N,2,S,4")},
                        "y = Attention <is_causal = 1> (q, k, v)",
                        {1, 2, 3, 4}}),
               "N,2,S,4"),
      // Autocast may leave V (its own type parameter) in FP32 beside FP16 Q and K: here FP32
      // Q and K beside an FP64 V; the body reads V cast to Q's type.
      [] {
        GradientCase c = Opset23({"Attention_v_of_another_type",
                                  {{"q", {1, 2, 3, 4}}, {"k", {1, 2, 3, 4}}, {"v", {1, 2, 3, 4}}},
                                  "qf = Cast <to = 1> (q)\n  kf = Cast <to = 1> (k)\n"
                                  "  yf = Attention(qf, kf, v)\n  y = Cast <to = 11> (yf)",
                                  {1, 2, 3, 4}});
        c.h = 1e-3;
        c.tolerance = 1e-3;
        return c;
      }(),
      Opset23({"Attention_through_body",
               {{"q", {1, 2, 3, 4}}, {"k", {1, 2, 3, 4}}, {"v", {1, 2, 3, 4}}},
               "y = Attention(q, k, v)",
               {1, 2, 3, 4}}),
      Opset23({"Attention_causal_scaled_float_mask",
               {{"q", {1, 2, 3, 4}}, {"k", {1, 2, 3, 4}}, {"v", {1, 2, 3, 4}}, {"m", {3, 3}}},
               "y = Attention <is_causal = 1, scale = 0.7> (q, k, v, m)",
               {1, 2, 3, 4}}),
      Opset23({"Attention_grouped_heads_3d_softcap",
               {{"q", {1, 3, 8}}, {"k", {1, 2, 4}}, {"v", {1, 2, 4}}},
               "y = Attention <q_num_heads = 2, kv_num_heads = 1, softcap = 2.0> (q, k, v)",
               {1, 3, 8}}),
      // MobileNetV3's activations; x = 4 x0 spans all three pieces of each.
      {"HardSwish",
       {Operand("x", {2, 3})},
       "s = Constant <value = double {4.0}> ()\n"
       "  u = Mul(x, s)\n  y = HardSwish(u)",
       {2, 3}},
      {"HardSigmoid",
       {Operand("x", {2, 3})},
       "s = Constant <value = double {4.0}> ()\n"
       "  u = Mul(x, s)\n  y = HardSigmoid <alpha = 0.3, beta = 0.4> (u)",
       {2, 3}},
      GeluCase("none"),
      GeluCase("tanh"),
      {"Where",
       {Operand::Fixed("c", {2, 3}, "bool", {1, 0, 1, 1, 0, 0}), x, {"p", {3}}},
       "y = Where(c, x, p)",
       {2, 3}},
      {"ReduceSum_keepdims0",
       {{"x", {2, 3, 4}}},
       "a = Constant <value_ints = [1]> ()\n  y = ReduceSum <keepdims = 0> (x, a)",
       {2, 4}},
      {"ReduceMean_keepdims1", {{"x", {2, 3, 4}}}, "y = ReduceMean <axes = [0, 2]> (x)", {1, 3, 1}},
      {"ReduceMean_all", {x}, "y = ReduceMean <keepdims = 0> (x)", {}},
      {"Expand",
       {{"x", {3, 1}}},
       "s = Constant <value_ints = [2, 3, 4]> ()\n  y = Expand(x, s)",
       {2, 3, 4}},
      {"GlobalAveragePool", {{"x", {2, 3, 2, 2}}}, "y = GlobalAveragePool(x)", {2, 3, 1, 1}},
      BatchNormCase(17),
      BatchNormCase(18),
      // Rules that emit ai.ampc gradient ops (their kernels on the CPU runtime).
      {"SoftmaxCrossEntropyLoss_adds_log_prob",
       {{"s", {3, 4}}, Operand::Fixed("t", {3}, "int64", {1, 3, 0})},
       "y = SoftmaxCrossEntropyLoss <reduction = \"mean\"> (s, t)",
       {}},
      NllCase("NegativeLogLikelihoodLoss_weighted_mean", "reduction = \"mean\""),
      NllCase("NegativeLogLikelihoodLoss_ignore_index_sum",
              "reduction = \"sum\", ignore_index = 3"),
      {"NegativeLogLikelihoodLoss_none_after_LogSoftmax",
       {{"s", {3, 4}}, Operand::Fixed("t", {3}, "int64", {0, 2, 3})},
       "p = LogSoftmax(s)\n  y = NegativeLogLikelihoodLoss <reduction = \"none\"> (p, t)",
       {3}},
      // Dropout that does not drop: deterministic, so the forward differences directly.
      {"Dropout_without_training_mode_is_identity",
       {x},
       "ratio = Constant <value = double {0.3}> ()\n  y = Dropout(x, ratio)",
       {2, 3}},
      {"Dropout_training_mode_false_is_identity",
       {x},
       "ratio = Constant <value = double {0.3}> ()\n  t = Constant <value = bool {0}> ()\n"
       "  y, m = Dropout(x, ratio, t)",
       {2, 3}},
      {"Dropout_training_ratio_zero_is_identity",
       {x},
       "ratio = Constant <value = double {0.0}> ()\n  t = Constant <value = bool {1}> ()\n"
       "  y = Dropout(x, ratio, t)",
       {2, 3}},
      {"Softmax", {{"x", {2, 4}}}, "y = Softmax <axis = 1> (x)", {2, 4}},
      {"LogSoftmax", {{"x", {2, 4}}}, "y = LogSoftmax(x)", {2, 4}},
      {"LayerNormalization_adds_mean_and_inv_std",
       {{"x", {2, 3, 4}}, {"s", {4}}, {"b", {4}}},
       "y = LayerNormalization <axis = -1, epsilon = 0.001> (x, s, b)",
       {2, 3, 4}},
      {"Conv",
       {{"x", {1, 2, 4, 4}}, {"w", {3, 2, 3, 3}}, {"b", {3}}},
       "y = Conv <pads = [1, 1, 1, 1], strides = [2, 2]> (x, w, b)",
       {1, 3, 2, 2}},
      {"MaxPool_adds_indices",
       {{"x", {1, 2, 4, 4}}},
       "y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (x)",
       {1, 2, 2, 2}},
      {"AveragePool",
       {{"x", {1, 2, 4, 4}}},
       "y = AveragePool <kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]> (x)",
       {1, 2, 2, 2}},
      {"Parameter_used_twice", {x, {"p", {3}}}, "m = Mul(x, p)\n  y = Add(m, p)", {2, 3}},
      {"Chain_mlp_layer",
       {Operand("x", {2, 3}, false), {"w", {4, 3}}, {"b", {4}}},
       "h = Gemm <transB = 1> (x, w, b)\n  y = Tanh(h)",
       {2, 4}},
  };
}

class GradientRuleTest : public ::testing::TestWithParam<GradientCase> {};

TEST_P(GradientRuleTest, MatchesCentralFiniteDifferences) {
  const GradientCase& c = GetParam();
  absl::StatusOr<std::vector<testing::GradientComparison>> result = testing::CheckGradients(c, c.h);
  ASSERT_TRUE(result.ok()) << result.status();
  for (const testing::GradientComparison& cmp : *result) {
    ASSERT_EQ(cmp.analytic.size(), cmp.numeric.size()) << cmp.parameter;
    for (size_t i = 0; i < cmp.numeric.size(); ++i) {
      EXPECT_NEAR(cmp.analytic[i], cmp.numeric[i], c.tolerance * (1 + std::abs(cmp.numeric[i])))
          << "d loss / d " << cmp.parameter << "[" << i << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(StandardOps, GradientRuleTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

// Training-mode Dropout draws a new mask on every run, so differences of the forward would mix
// masks. The gradient model also outputs the mask its own forward drew; its gradient must equal
// central differences of y = x * mask / (1 - ratio) with that mask held fixed.
TEST(Autodiff, TrainingDropoutUsesTheForwardsMaskAndMatchesFixedMaskDifferences) {
  const Shape shape = {4, 5};
  const GradientCase dropout(
      "Dropout_training", {Operand("x", shape)},
      "ratio = Constant <value = double {0.25}> ()\n  t = Constant <value = bool {1}> ()\n"
      "  y, mask = Dropout <seed = 3> (x, ratio, t)",
      shape);
  absl::StatusOr<onnx::ModelProto> model = testing::GradientModel(dropout);
  ASSERT_TRUE(model.ok()) << model.status();
  onnx::ValueInfoProto& mask_out = *model->mutable_graph()->add_output();
  mask_out.set_name("mask");
  mask_out.mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);
  CpuBackend backend(1);
  auto session = Session::Create(*model, DefaultRegistry(), backend);
  ASSERT_TRUE(session.ok()) << session.status();
  // The values CheckGradients gives the same operands: x is operand 1, r has seed 99.
  std::map<std::string, Tensor> values = {
      {"x",
       testing::ToTensor(DType::kDouble, shape, testing::OperandValues(Operand("x", shape), 1))},
      {"r",
       testing::ToTensor(DType::kDouble, shape, testing::OperandValues(Operand("r", shape), 99))},
      {"seed", testing::ToTensor(DType::kDouble, {}, {1.0})}};
  std::vector<Tensor> inputs;
  for (const ValueSpec& spec : (*session)->inputs()) inputs.push_back(values.at(spec.name));
  absl::StatusOr<std::vector<Tensor>> out = (*session)->Run(inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  const std::vector<double> analytic = testing::ToDoubles((*out)[0]);
  const std::span<const bool> mask = (*out)[1].span<const bool>();
  const int64_t kept = std::count(mask.begin(), mask.end(), true);
  ASSERT_GT(kept, 0);
  ASSERT_LT(kept, static_cast<int64_t>(mask.size()));  // both kinds, or the check proves little
  std::vector<std::string> scaled;
  for (bool k : mask) scaled.push_back(k ? "1.3333333333333333" : "0");
  const GradientCase fixed("Dropout_fixed_mask", {Operand("x", shape)},
                           absl::StrCat("m = Constant <value = double[4,5] {",
                                        absl::StrJoin(scaled, ", "), "}> ()\n  y = Mul(x, m)"),
                           shape);
  absl::StatusOr<std::vector<testing::GradientComparison>> reference =
      testing::CheckGradients(fixed, 1e-6);
  ASSERT_TRUE(reference.ok()) << reference.status();
  const std::vector<double>& numeric = (*reference)[0].numeric;
  ASSERT_EQ(analytic.size(), numeric.size());
  for (size_t i = 0; i < numeric.size(); ++i) {
    EXPECT_NEAR(analytic[i], numeric[i], 1e-6 * (1 + std::abs(numeric[i]))) << "dx[" << i << "]";
  }
}

TEST(Autodiff, OpWithoutRuleOnThePathIsAnErrorNamingTheNode) {
  GradientCase c{"Abs", {{"x", {2, 3}}}, "z = Neg(x)\n  y = Abs(z)", {2, 3}};
  absl::StatusOr<onnx::ModelProto> model = testing::GradientModel(c);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("node #1 (Abs) has no gradient rule"));
  EXPECT_THAT(model.status().message(), HasSubstr("from 'x' to the loss 'loss'"));
}

TEST(Autodiff, DilatedAveragePoolIsAnErrorRatherThanAWrongGradient) {
  // AveragePoolGrad's windows have no dilations: refused, not differentiated as if undilated.
  GradientCase c{"AveragePool_dilated",
                 {{"x", {1, 1, 5, 5}}},
                 "y = AveragePool <kernel_shape = [2, 2], dilations = [2, 2]> (x)",
                 {1, 1, 3, 3}};
  c.opset = 19;
  absl::StatusOr<onnx::ModelProto> model = testing::GradientModel(c);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(),
              HasSubstr("AveragePool with dilations (opset 19) has no gradient"));
}

TEST(Autodiff, EinsumDiagonalIsAnErrorNamingTheNode) {
  GradientCase c{"Einsum_diagonal", {{"x", {3, 3}}}, "y = Einsum <equation = \"ii->i\"> (x)", {3}};
  absl::StatusOr<onnx::ModelProto> model = testing::GradientModel(c);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("node #0 (Einsum)"));
  EXPECT_THAT(model.status().message(), HasSubstr("repeats label 'i' (a diagonal)"));
}

TEST(Autodiff, BodyNodeWithoutRuleIsAnErrorNamingTheCallAndTheBodyNode) {
  // Softsign has no rule; its body's Abs has neither a rule nor a body.
  GradientCase c{"Softsign", {{"x", {2, 3}}}, "y = Softsign(x)", {2, 3}};
  c.opset = 18;
  absl::StatusOr<onnx::ModelProto> model = testing::GradientModel(c);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(), HasSubstr("node 'Softsign/grad/body/Abs' (Abs)"));
  EXPECT_THAT(model.status().message(), HasSubstr("has no gradient rule"));
}

TEST(Autodiff, OpWithoutRuleOffThePathIsFine) {
  // Abs reads x but does not reach the loss; Shape's output is an integer.
  GradientCase c{
      "off_path", {{"x", {2, 3}}}, "z = Abs(x)\n  s = Shape(x)\n  y = Reshape(x, s)", {2, 3}};
  EXPECT_TRUE(testing::GradientModel(c).ok());
}

TEST(Autodiff, TrainableParametersSkipFrozenAndNonDifferentiableInitializers) {
  onnx::ModelProto model = testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float loss)
<float[3] w = {1, 2, 3}, float[3] frozen = {1, 1, 1}, float[3] unused = {0, 0, 0},
 float e = {2}, int64[1] axes = {0}>
{
  a = Mul(x, w)
  b = Add(a, frozen)
  c = Pow(b, e)
  z = Add(x, unused)
  loss = ReduceSum <keepdims = 0> (c)
}
)");
  ASSERT_TRUE(InferTypesStrict(model, "m").ok());
  auto index = GraphIndex::Build(model.graph());
  ASSERT_TRUE(index.ok());
  absl::StatusOr<std::vector<std::string>> params = TrainableParameters(**index, "loss", "froz.*");
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_THAT(*params, ::testing::ElementsAre("w"));
  EXPECT_FALSE(TrainableParameters(**index, "nope", "").ok());
  EXPECT_FALSE(TrainableParameters(**index, "loss", "(").ok());
}

}  // namespace
}  // namespace ampc
