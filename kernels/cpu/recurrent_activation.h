// The activation functions ONNX's RNN, GRU and LSTM accept, and how a node's `activations`,
// `activation_alpha` and `activation_beta` attributes select and parameterise them.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/kernel.h"

namespace ampc::recurrent {

enum class ActivationKind {
  kRelu,
  kTanh,
  kSigmoid,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus,
};

struct Activation {
  ActivationKind kind;
  float alpha, beta;

  template <typename A>
  A operator()(A x) const {
    const A a = alpha, b = beta;
    switch (kind) {
      case ActivationKind::kRelu:
        return x < A{0} ? A{0} : x;
      case ActivationKind::kTanh:
        return std::tanh(x);
      case ActivationKind::kSigmoid:
        return A{1} / (A{1} + std::exp(-x));
      case ActivationKind::kAffine:
        return a * x + b;
      case ActivationKind::kLeakyRelu:
        return x < A{0} ? a * x : x;
      case ActivationKind::kThresholdedRelu:
        return x > a ? x : A{0};
      case ActivationKind::kScaledTanh:
        return a * std::tanh(b * x);
      case ActivationKind::kHardSigmoid:
        return std::max(A{0}, std::min(A{1}, a * x + b));
      case ActivationKind::kElu:
        return x < A{0} ? a * std::expm1(x) : x;
      case ActivationKind::kSoftsign:
        return x / (A{1} + std::abs(x));
      case ActivationKind::kSoftplus:  // log(1 + e^x), without overflow for large x
        return x > A{0} ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    }
    return x;
  }
};

// Which of activation_alpha / activation_beta a function consumes, and its values when the lists
// run out (those of the ONNX op of the same name).
struct ActivationSpec {
  const char* name;  // lower case: names match case-insensitively, as in onnxruntime
  ActivationKind kind;
  bool takes_alpha, takes_beta;
  float alpha, beta;
};

inline constexpr ActivationSpec kActivationSpecs[] = {
    {"relu", ActivationKind::kRelu, false, false, 0, 0},
    {"tanh", ActivationKind::kTanh, false, false, 0, 0},
    {"sigmoid", ActivationKind::kSigmoid, false, false, 0, 0},
    {"affine", ActivationKind::kAffine, true, true, 1, 0},
    {"leakyrelu", ActivationKind::kLeakyRelu, true, false, 0.01f, 0},
    {"thresholdedrelu", ActivationKind::kThresholdedRelu, true, false, 1, 0},
    {"scaledtanh", ActivationKind::kScaledTanh, true, true, 1, 1},
    {"hardsigmoid", ActivationKind::kHardSigmoid, true, true, 0.2f, 0.5f},
    {"elu", ActivationKind::kElu, true, false, 1, 0},
    {"softsign", ActivationKind::kSoftsign, false, false, 0, 0},
    {"softplus", ActivationKind::kSoftplus, false, false, 0, 0},
};

// The node's activation functions, `per_direction` for each of `directions`: the attribute's
// names, else `defaults`. One direction's list serves both ways when bidirectional, and a
// one-way node given two lists (RNN's old default of two Tanh) uses the first. Alphas and betas
// are consumed in list order by the functions that take them.
inline absl::StatusOr<std::vector<Activation>> ReadActivations(
    const KernelContext& context, const std::vector<std::string>& defaults, int directions) {
  const Attributes attributes = context.attributes();
  const size_t per_direction = defaults.size();
  std::vector<std::string> names = attributes.Strings("activations");
  if (names.empty()) names = defaults;
  if (names.size() == per_direction && directions == 2) {
    const std::vector<std::string> one_way = names;
    names.insert(names.end(), one_way.begin(), one_way.end());
  }
  if (names.size() == 2 * per_direction && directions == 1) names.resize(per_direction);
  if (names.size() != per_direction * directions) {
    return NodeError(context, absl::StrCat("activations lists ", names.size(),
                                           " functions, expected ", per_direction * directions));
  }
  const std::vector<float> alphas = attributes.Floats("activation_alpha");
  const std::vector<float> betas = attributes.Floats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> activations;
  for (const std::string& name : names) {
    const std::string lower = absl::AsciiStrToLower(name);
    const auto spec = std::find_if(std::begin(kActivationSpecs), std::end(kActivationSpecs),
                                   [&](const ActivationSpec& s) { return lower == s.name; });
    if (spec == std::end(kActivationSpecs)) {
      return NodeError(context, absl::StrCat("unknown activation function '", name, "'"));
    }
    Activation activation{spec->kind, spec->alpha, spec->beta};
    if (spec->takes_alpha && next_alpha < alphas.size()) activation.alpha = alphas[next_alpha++];
    if (spec->takes_beta && next_beta < betas.size()) activation.beta = betas[next_beta++];
    activations.push_back(activation);
  }
  return activations;
}

}  // namespace ampc::recurrent
