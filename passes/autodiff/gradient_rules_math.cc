// Gradients of elementwise math, MatMul and Gemm, in standard ONNX.
#include <onnx/defs/attr_proto_util.h>

#include <cmath>

#include "passes/autodiff/gradient_rules.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

using onnx::MakeAttribute;

// Sets the gradients of a broadcasting binary node: input 0 gets `da()` and input 1 `db()`, each
// computed only when needed and summed to the input's shape.
template <typename A, typename B>
absl::Status Binary(GradientContext& c, A da, B db) {
  absl::StatusOr<std::vector<Dim>> dims = c.DimsOf(c.output(0));
  if (!dims.ok()) return dims.status();
  if (c.NeedsGrad(0)) {
    AMPC_RETURN_IF_ERROR(c.SetReducedGrad(0, da(), *dims));
  }
  if (c.NeedsGrad(1)) {
    AMPC_RETURN_IF_ERROR(c.SetReducedGrad(1, db(), *dims));
  }
  return absl::OkStatus();
}

// A unary node whose gradient is dy * factor(), with factor() built from x and y.
template <typename F>
GradientRule Unary(F factor) {
  return {[factor](GradientContext& c) {
            c.SetGrad(0, c.b().Op("Mul", {c.dy(), factor(c)}));
            return absl::OkStatus();
          },
          {}};
}

int Type(GradientContext& c) { return c.b().ElemType(c.input(0)); }

// Gelu-20's derivative. approximate="none": Phi(x) + x phi(x), with Phi(x) = (1 + erf(x/sqrt 2))/2
// and phi(x) = exp(-x^2/2)/sqrt(2 pi). "tanh": with u = sqrt(2/pi)(x + 0.044715 x^3) and
// t = tanh(u), (1 + t)/2 + x/2 (1 - t^2) sqrt(2/pi)(1 + 3 0.044715 x^2).
std::string GeluSlope(GradientContext& c) {
  GradientBuilder& b = c.b();
  const std::string& x = c.input(0);
  auto k = [&](double v) { return b.Scalar(v, Type(c)); };
  auto mul = [&](const std::string& p, const std::string& q) { return b.Op("Mul", {p, q}); };
  auto add = [&](const std::string& p, const std::string& q) { return b.Op("Add", {p, q}); };
  const std::string square = mul(x, x);
  if (c.String("approximate", "none") == "tanh") {
    constexpr double kCubic = 0.044715;
    const std::string root = k(std::sqrt(2.0 / M_PI));
    const std::string u = mul(root, add(x, mul(k(kCubic), mul(square, x))));
    const std::string t = b.Op("Tanh", {u});
    const std::string du = mul(root, add(k(1.0), mul(k(3.0 * kCubic), square)));
    const std::string dt = mul(b.Op("Sub", {k(1.0), mul(t, t)}), du);
    return add(mul(k(0.5), add(k(1.0), t)), mul(mul(k(0.5), x), dt));
  }
  const std::string cdf = mul(k(0.5), add(k(1.0), b.Op("Erf", {mul(x, k(M_SQRT1_2))})));
  const std::string pdf = mul(b.Op("Exp", {mul(square, k(-0.5))}), k(1.0 / std::sqrt(2.0 * M_PI)));
  return add(cdf, mul(x, pdf));
}

// Where alpha x + beta lies strictly inside (0, 1), the linear part of HardSigmoid.
std::string HardSigmoidLinear(GradientContext& c, double alpha, double beta) {
  GradientBuilder& b = c.b();
  const std::string u =
      b.Op("Add", {b.Op("Mul", {c.input(0), b.Scalar(alpha, Type(c))}), b.Scalar(beta, Type(c))});
  return b.Op("And", {b.Op("Greater", {u, b.Scalar(0.0, Type(c))}),
                      b.Op("Less", {u, b.Scalar(1.0, Type(c))})});
}

// HardSigmoid(x) = clip(alpha x + beta, 0, 1): alpha on the linear part, else 0.
std::string HardSigmoidSlope(GradientContext& c) {
  const double alpha = c.Float("alpha", 0.2f), beta = c.Float("beta", 0.5f);
  return c.b().Op("Where", {HardSigmoidLinear(c, alpha, beta), c.b().Scalar(alpha, Type(c)),
                            c.b().Scalar(0.0, Type(c))});
}

// HardSwish(x) = x h(x), h = HardSigmoid with alpha 1/6, beta 1/2: h(x) + x/6 on h's linear part.
std::string HardSwishSlope(GradientContext& c) {
  GradientBuilder& b = c.b();
  constexpr double kAlpha = 1.0 / 6.0;
  const std::string h =
      b.Op("HardSigmoid", {c.input(0)},
           {MakeAttribute("alpha", static_cast<float>(kAlpha)), MakeAttribute("beta", 0.5f)});
  const std::string tilt =
      b.Op("Where", {HardSigmoidLinear(c, kAlpha, 0.5),
                     b.Op("Mul", {c.input(0), b.Scalar(kAlpha, Type(c))}), b.Scalar(0.0, Type(c))});
  return b.Op("Add", {h, tilt});
}

// Gemm(x, y) with transA/transB (and alpha unless 1).
std::string GemmNode(GradientContext& c, const std::string& x, const std::string& y, int64_t ta,
                     int64_t tb, float alpha = 1.0f) {
  std::vector<onnx::AttributeProto> attributes = {MakeAttribute("transA", ta),
                                                  MakeAttribute("transB", tb)};
  if (alpha != 1.0f) attributes.push_back(MakeAttribute("alpha", alpha));
  return c.b().Op("Gemm", {x, y}, std::move(attributes));
}

// A [..., M, K] (rank 3 or more) times a matrix B [K, N] of static shape, as activations times a
// weight: A's batch and row axes flatten into one, so each gradient is one Gemm that accumulates
// over every row in FP32 (not per-batch products rounded to the operand type, then summed by a
// ReduceSum), and no Transpose is materialised: dA = dY2 B^T reshaped to A, dB = A2^T dY2.
absl::Status MatMulByMatrixGrad(GradientContext& c, int64_t k, int64_t n) {
  const std::string dy2 = c.b().Op("Reshape", {c.dy(), c.b().Ints({-1, n})});
  if (c.NeedsGrad(0)) {
    const std::string da2 = GemmNode(c, dy2, c.input(1), 0, 1);
    c.SetGrad(0, c.b().Op("Reshape", {da2, c.b().ShapeOf(c.input(0))}));
  }
  if (c.NeedsGrad(1)) {
    const std::string a2 = c.b().Op("Reshape", {c.input(0), c.b().Ints({-1, k})});
    c.SetGrad(1, GemmNode(c, a2, dy2, 1, 0));
  }
  return absl::OkStatus();
}

// A 1-D operand is a matrix for the product (a row for A, a column for B), and dY gets the axis
// the product dropped: each gradient is then a batched matrix product whose extra axis is squeezed
// before the sum over Y's broadcast batch dims.
absl::Status MatMulGrad(GradientContext& c) {
  absl::StatusOr<std::vector<Dim>> a = c.DimsOf(c.input(0));
  absl::StatusOr<std::vector<Dim>> b = c.DimsOf(c.input(1));
  absl::StatusOr<std::vector<Dim>> y = c.DimsOf(c.output(0));
  if (!a.ok() || !b.ok() || !y.ok())
    return !a.ok() ? a.status() : !b.ok() ? b.status() : y.status();
  if (a->size() >= 3 && b->size() == 2 && (*b)[0].size && (*b)[1].size) {
    return MatMulByMatrixGrad(c, *(*b)[0].size, *(*b)[1].size);
  }
  GradientBuilder& g = c.b();
  const bool a_vector = a->size() == 1, b_vector = b->size() == 1;
  std::string lhs = c.input(0), rhs = c.input(1), dy = c.dy();
  std::vector<Dim> y_dims = *y, a_dims = *a, b_dims = *b;
  const Dim one{1, ""};
  if (a_vector) {
    lhs = g.Op("Unsqueeze", {lhs, g.Ints({0})});
    dy = g.Op("Unsqueeze", {dy, g.Ints({b_vector ? 0 : -2})});
    a_dims.insert(a_dims.begin(), one);
    y_dims.insert(b_vector ? y_dims.begin() : y_dims.end() - 1, one);
  }
  if (b_vector) {
    rhs = g.Op("Unsqueeze", {rhs, g.Ints({-1})});
    dy = g.Op("Unsqueeze", {dy, g.Ints({-1})});
    b_dims.push_back(one);
    y_dims.push_back(one);
  }
  // Transposes the last two axes of `value`, of rank `rank`.
  auto swap = [&](const std::string& value, size_t rank) {
    std::vector<int64_t> perm;
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(i));
    std::swap(perm[rank - 1], perm[rank - 2]);
    return g.Op("Transpose", {value}, {MakeAttribute("perm", perm)});
  };
  // The gradient of an operand has Y's batch dims and the operand's matrix dims; a 1-D operand's
  // added axis (at `squeeze`) is dropped again.
  auto set = [&](int slot, const std::string& grad, const std::vector<Dim>& operand, bool vector,
                 int64_t squeeze) {
    std::vector<Dim> dims(y_dims.begin(), y_dims.end() - 2);
    dims.insert(dims.end(), operand.end() - 2, operand.end());
    if (!vector) return c.SetReducedGrad(slot, grad, dims);
    dims.erase(dims.end() + squeeze);
    return c.SetReducedGrad(slot, g.Op("Squeeze", {grad, g.Ints({squeeze})}), dims);
  };
  if (c.NeedsGrad(0)) {
    AMPC_RETURN_IF_ERROR(
        set(0, g.Op("MatMul", {dy, swap(rhs, b_dims.size())}), a_dims, a_vector, -2));
  }
  if (c.NeedsGrad(1)) {
    AMPC_RETURN_IF_ERROR(
        set(1, g.Op("MatMul", {swap(lhs, a_dims.size()), dy}), b_dims, b_vector, -1));
  }
  return absl::OkStatus();
}

// Y = alpha * op(A) op(B) + beta * C; the gradients of A and B are Gemms with the transposes
// folded into transA/transB.
absl::Status GemmGrad(GradientContext& c) {
  const int64_t trans_a = c.Int("transA", 0);
  const int64_t trans_b = c.Int("transB", 0);
  const float alpha = c.Float("alpha", 1.0f);
  const float beta = c.Float("beta", 1.0f);
  auto gemm = [&](const std::string& x, const std::string& y, int64_t ta, int64_t tb) {
    return GemmNode(c, x, y, ta, tb, alpha);
  };
  if (c.NeedsGrad(0)) {
    c.SetGrad(0, trans_a == 0 ? gemm(c.dy(), c.input(1), 0, 1 - trans_b)
                              : gemm(c.input(1), c.dy(), trans_b, 1));
  }
  if (c.NeedsGrad(1)) {
    c.SetGrad(1, trans_b == 0 ? gemm(c.input(0), c.dy(), 1 - trans_a, 0)
                              : gemm(c.dy(), c.input(0), 1, trans_a));
  }
  if (c.NeedsGrad(2)) {
    absl::StatusOr<std::vector<Dim>> y = c.DimsOf(c.output(0));
    if (!y.ok()) return y.status();
    std::string dc = c.dy();
    if (beta != 1.0f) dc = c.b().Op("Mul", {dc, c.b().Scalar(beta, Type(c))});
    AMPC_RETURN_IF_ERROR(c.SetReducedGrad(2, dc, *y));
  }
  return absl::OkStatus();
}

absl::Status PowGrad(GradientContext& c) {
  if (c.NeedsGrad(1)) return c.Error("Pow has a gradient only for a constant exponent");
  // d(a^b)/da = b * a^(b-1)
  GradientBuilder& b = c.b();
  // An integer exponent is taken in a's type first: b - 1 of an unsigned 0 would wrap.
  std::string factor = c.input(1);
  if (b.ElemType(factor) != b.ElemType(c.input(0))) factor = b.Op("CastLike", {factor, c.input(0)});
  const std::string exponent = b.Op("Sub", {factor, b.Scalar(1.0, b.ElemType(c.input(0)))});
  const std::string slope = b.Op("Mul", {b.Op("Pow", {c.input(0), exponent}), factor});
  absl::StatusOr<std::vector<Dim>> dims = c.DimsOf(c.output(0));
  if (!dims.ok()) return dims.status();
  return c.SetReducedGrad(0, b.Op("Mul", {c.dy(), slope}), *dims);
}

absl::Status WhereGrad(GradientContext& c) {
  GradientBuilder& b = c.b();
  absl::StatusOr<std::vector<Dim>> dims = c.DimsOf(c.output(0));
  if (!dims.ok()) return dims.status();
  const std::string zero = b.Scalar(0.0, b.ElemType(c.output(0)));
  if (c.NeedsGrad(1)) {
    const std::string dx = b.Op("Where", {c.input(0), c.dy(), zero});
    AMPC_RETURN_IF_ERROR(c.SetReducedGrad(1, dx, *dims));
  }
  if (c.NeedsGrad(2)) {
    const std::string dx = b.Op("Where", {c.input(0), zero, c.dy()});
    AMPC_RETURN_IF_ERROR(c.SetReducedGrad(2, dx, *dims));
  }
  return absl::OkStatus();
}

}  // namespace

void AddMathGradientRules(GradientRuleTable& table) {
  table.emplace_back("Add", GradientRule{[](GradientContext& c) {
                                           return Binary(
                                               c, [&] { return c.dy(); }, [&] { return c.dy(); });
                                         },
                                         {}});
  table.emplace_back("Sub", GradientRule{[](GradientContext& c) {
                                           return Binary(
                                               c, [&] { return c.dy(); },
                                               [&] { return c.b().Op("Neg", {c.dy()}); });
                                         },
                                         {}});
  table.emplace_back("Mul", GradientRule{[](GradientContext& c) {
                                           return Binary(
                                               c,
                                               [&] {
                                                 return c.b().Op("Mul", {c.dy(), c.input(1)});
                                               },
                                               [&] {
                                                 return c.b().Op("Mul", {c.dy(), c.input(0)});
                                               });
                                         },
                                         {}});
  // d(a/b)/db = -dy * y / b
  table.emplace_back("Div",
                     GradientRule{[](GradientContext& c) {
                                    GradientBuilder& b = c.b();
                                    return Binary(
                                        c,
                                        [&] {
                                          return b.Op("Div", {c.dy(), c.input(1)});
                                        },
                                        [&] {
                                          const std::string t = b.Op("Mul", {c.dy(), c.output(0)});
                                          return b.Op("Neg", {b.Op("Div", {t, c.input(1)})});
                                        });
                                  },
                                  {}});
  table.emplace_back("Neg", GradientRule{[](GradientContext& c) {
                                           c.SetGrad(0, c.b().Op("Neg", {c.dy()}));
                                           return absl::OkStatus();
                                         },
                                         {}});
  table.emplace_back("Identity", GradientRule{[](GradientContext& c) {
                                                c.SetGrad(0, c.dy());
                                                return absl::OkStatus();
                                              },
                                              {}});
  table.emplace_back(
      "Cast", GradientRule{[](GradientContext& c) {
                             const int64_t to = c.b().ElemType(c.input(0));
                             if (to == 0) return c.Error("the input type is unknown");
                             c.SetGrad(0, c.b().Op("Cast", {c.dy()}, {MakeAttribute("to", to)}));
                             return absl::OkStatus();
                           },
                           {}});
  // The gradient goes back to x's type; `like` only lends its type.
  table.emplace_back("CastLike",
                     GradientRule{[](GradientContext& c) {
                                    c.SetGrad(0, c.b().Op("CastLike", {c.dy(), c.input(0)}));
                                    return absl::OkStatus();
                                  },
                                  {1}});
  table.emplace_back("Relu",
                     GradientRule{[](GradientContext& c) {
                                    GradientBuilder& b = c.b();
                                    const std::string zero = b.Scalar(0.0, Type(c));
                                    const std::string on = b.Op("Greater", {c.input(0), zero});
                                    c.SetGrad(0, b.Op("Where", {on, c.dy(), zero}));
                                    return absl::OkStatus();
                                  },
                                  {}});
  table.emplace_back(
      "LeakyRelu",
      GradientRule{[](GradientContext& c) {
                     GradientBuilder& b = c.b();
                     const std::string zero = b.Scalar(0.0, Type(c));
                     const std::string alpha = b.Scalar(c.Float("alpha", 0.01f), Type(c));
                     const std::string on = b.Op("Greater", {c.input(0), zero});
                     c.SetGrad(0, b.Op("Where", {on, c.dy(), b.Op("Mul", {c.dy(), alpha})}));
                     return absl::OkStatus();
                   },
                   {}});
  // y(1 - y)
  table.emplace_back(
      "Sigmoid", Unary([](GradientContext& c) {
        GradientBuilder& b = c.b();
        const std::string one_minus = b.Op("Sub", {b.Scalar(1.0, Type(c)), c.output(0)});
        return b.Op("Mul", {c.output(0), one_minus});
      }));
  // 1 - y^2
  table.emplace_back("Tanh", Unary([](GradientContext& c) {
                       GradientBuilder& b = c.b();
                       const std::string square = b.Op("Mul", {c.output(0), c.output(0)});
                       return b.Op("Sub", {b.Scalar(1.0, Type(c)), square});
                     }));
  // 2/sqrt(pi) exp(-x^2)
  table.emplace_back("Erf", Unary([](GradientContext& c) {
                       GradientBuilder& b = c.b();
                       const std::string square = b.Op("Mul", {c.input(0), c.input(0)});
                       const std::string bell = b.Op("Exp", {b.Op("Neg", {square})});
                       return b.Op("Mul", {bell, b.Scalar(2.0 / std::sqrt(M_PI), Type(c))});
                     }));
  table.emplace_back("Gelu", Unary(GeluSlope));
  table.emplace_back("HardSigmoid", Unary(HardSigmoidSlope));
  table.emplace_back("HardSwish", Unary(HardSwishSlope));
  // 1 / (2 y)
  table.emplace_back("Sqrt", Unary([](GradientContext& c) {
                       GradientBuilder& b = c.b();
                       const std::string twice = b.Op("Mul", {c.output(0), b.Scalar(2.0, Type(c))});
                       return b.Op("Reciprocal", {twice});
                     }));
  table.emplace_back("Exp", Unary([](GradientContext& c) { return c.output(0); }));
  table.emplace_back(
      "Log", Unary([](GradientContext& c) { return c.b().Op("Reciprocal", {c.input(0)}); }));
  table.emplace_back("Pow", GradientRule{PowGrad, {1}});
  table.emplace_back("Where", GradientRule{WhereGrad, {}});
  table.emplace_back("MatMul", GradientRule{MatMulGrad, {}});
  table.emplace_back("Gemm", GradientRule{GemmGrad, {}});
}

}  // namespace ampc
