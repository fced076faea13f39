// Einsum for any number of operands: labels, repeated labels (diagonals), "..." broadcasting and
// the implicit output form, evaluated as one loop over the output and the summed labels, in the
// accumulation type (FP32 for FP16/BF16) and rounded once.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kernels/cpu/linalg_gemm.h"

namespace ampc::linalg {

// Labels are 0..51 for letters, 52 + j for the j-th of the (right-aligned) ellipsis dims.
inline constexpr int kEllipsisLabel = 52;

struct EinsumPlan {
  std::vector<int> output;                    // labels of the output axes
  std::vector<int> summed;                    // labels summed over
  std::vector<int64_t> size;                  // per label (index by label), 0 when unused
  std::vector<std::vector<int64_t>> strides;  // per operand, per label (0: absent or broadcast)
};

inline int LetterLabel(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= 'A' && c <= 'Z') return c - 'A';
  return -1;
}

// One term's labels; "..." becomes the labels of `ellipsis` dims (right-aligned against `max`).
inline absl::Status ParseTerm(KernelContext& context, const std::string& term, int64_t rank,
                              std::vector<int>& labels, int64_t& ellipsis_rank,
                              bool* has_ellipsis) {
  int64_t letters = 0;
  size_t dots = term.find("...");
  *has_ellipsis = dots != std::string::npos;
  for (size_t i = 0; i < term.size(); ++i) {
    if (*has_ellipsis && i == dots) {
      i += 2;
      continue;
    }
    if (LetterLabel(term[i]) < 0) {
      return NodeError(context, absl::StrCat("bad character '", std::string(1, term[i]),
                                             "' in einsum term '", term, "'"));
    }
    ++letters;
  }
  ellipsis_rank = *has_ellipsis ? rank - letters : 0;
  if (rank >= 0 && (ellipsis_rank < 0 || (!*has_ellipsis && letters != rank))) {
    return NodeError(
        context, absl::StrCat("einsum term '", term, "' does not fit an operand of rank ", rank));
  }
  labels.clear();
  for (size_t i = 0; i < term.size(); ++i) {
    if (*has_ellipsis && i == dots) {
      labels.push_back(-1);  // placeholder, expanded by the caller
      i += 2;
      continue;
    }
    labels.push_back(LetterLabel(term[i]));
  }
  return absl::OkStatus();
}

// Replaces the -1 placeholder by `count` ellipsis labels aligned to the right of `max` ones.
inline std::vector<int> ExpandEllipsis(const std::vector<int>& labels, int64_t count, int64_t max) {
  std::vector<int> out;
  for (int l : labels) {
    if (l != -1) {
      out.push_back(l);
      continue;
    }
    for (int64_t j = max - count; j < max; ++j) out.push_back(kEllipsisLabel + static_cast<int>(j));
  }
  return out;
}

inline absl::StatusOr<EinsumPlan> PlanEinsum(KernelContext& context) {
  std::string equation = context.attributes().String("equation", "");
  std::erase(equation, ' ');
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  const std::vector<std::string> terms = absl::StrSplit(lhs, ',');
  if (static_cast<int>(terms.size()) != context.num_inputs()) {
    return NodeError(context, absl::StrCat("equation '", equation, "' has ", terms.size(),
                                           " terms for ", context.num_inputs(), " inputs"));
  }
  const int operands = context.num_inputs();
  std::vector<std::vector<int>> labels(operands);
  std::vector<int64_t> ellipsis(operands);
  int64_t max_ellipsis = 0;
  bool any_ellipsis = false;
  for (int k = 0; k < operands; ++k) {
    bool has = false;
    AMPC_RETURN_IF_ERROR(
        ParseTerm(context, terms[k], context.in(k).rank(), labels[k], ellipsis[k], &has));
    any_ellipsis = any_ellipsis || has;
    max_ellipsis = std::max(max_ellipsis, ellipsis[k]);
  }
  EinsumPlan plan;
  const int num_labels = kEllipsisLabel + static_cast<int>(max_ellipsis);
  plan.size.assign(num_labels, 0);
  std::vector<int> count(num_labels, 0);
  plan.strides.assign(operands, std::vector<int64_t>(num_labels, 0));
  for (int k = 0; k < operands; ++k) {
    labels[k] = ExpandEllipsis(labels[k], ellipsis[k], max_ellipsis);
    const Shape& shape = context.in(k).shape();
    int64_t stride = 1;
    for (size_t a = labels[k].size(); a-- > 0;) {
      const int l = labels[k][a];
      const int64_t dim = shape[a];
      ++count[l];
      int64_t& size = plan.size[l];
      if (l >= kEllipsisLabel && dim == 1) {  // broadcast against the other operands
        size = std::max<int64_t>(size, 1);
      } else {
        if (size != 0 && size != dim && !(l >= kEllipsisLabel && size == 1)) {
          return NodeError(context, absl::StrCat("label sizes differ in '", equation, "': ", dim,
                                                 " and ", size));
        }
        size = dim;
        plan.strides[k][l] += stride;
      }
      stride *= dim;
    }
  }
  if (arrow == std::string::npos) {  // implicit: ellipsis dims, then labels used once, sorted
    for (int j = 0; j < max_ellipsis; ++j) plan.output.push_back(kEllipsisLabel + j);
    for (int l = 0; l < kEllipsisLabel; ++l) {  // letter labels are numbered in ASCII order
      if (count[l] == 1) plan.output.push_back(l);
    }
  } else {
    std::vector<int> out;
    int64_t unused = 0;
    bool has = false;
    AMPC_RETURN_IF_ERROR(ParseTerm(context, equation.substr(arrow + 2), -1, out, unused, &has));
    if (has && !any_ellipsis) {
      return NodeError(context, "'...' in the output but in no input");
    }
    plan.output = ExpandEllipsis(out, max_ellipsis, max_ellipsis);
    for (int l : plan.output) {
      if (count[l] == 0) {
        return NodeError(context,
                         absl::StrCat("output label of '", equation, "' not in any input"));
      }
    }
  }
  for (int l = 0; l < num_labels; ++l) {
    if (count[l] > 0 && std::find(plan.output.begin(), plan.output.end(), l) == plan.output.end()) {
      plan.summed.push_back(l);
    }
  }
  return plan;
}

template <typename T>
absl::Status EinsumTyped(KernelContext& context, const EinsumPlan& plan) {
  using A = Acc<T>;
  Shape shape;
  for (int l : plan.output) shape.push_back(plan.size[l]);
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, shape));
  const int operands = context.num_inputs();
  std::vector<const T*> data(operands);
  for (int k = 0; k < operands; ++k) data[k] = context.in(k).data<T>();
  int64_t inner = 1;
  for (int l : plan.summed) inner *= plan.size[l];
  T* out = y->data<T>();
  const size_t no = plan.output.size(), ns = plan.summed.size();
  CpuOf(context.backend())
      .pool()
      .ParallelFor(y->size(), std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)),
                   [&](int64_t begin, int64_t end) {
                     std::vector<int64_t> base(operands), offset(operands), idx(ns);
                     for (int64_t i = begin; i < end; ++i) {
                       std::fill(base.begin(), base.end(), 0);
                       for (size_t a = no, rest = i; a-- > 0;) {
                         const int l = plan.output[a];
                         const int64_t v = static_cast<int64_t>(rest) % plan.size[l];
                         rest /= plan.size[l];
                         for (int k = 0; k < operands; ++k) base[k] += v * plan.strides[k][l];
                       }
                       A sum{0};
                       std::fill(idx.begin(), idx.end(), 0);
                       offset = base;
                       for (int64_t s = 0; s < inner; ++s) {
                         A product{1};
                         for (int k = 0; k < operands; ++k) {
                           product = product * Compute<T>::Load(data[k][offset[k]]);
                         }
                         sum = sum + product;
                         for (size_t a = ns; a-- > 0;) {
                           const int l = plan.summed[a];
                           for (int k = 0; k < operands; ++k) offset[k] += plan.strides[k][l];
                           if (++idx[a] < plan.size[l]) break;
                           for (int k = 0; k < operands; ++k) {
                             offset[k] -= idx[a] * plan.strides[k][l];
                           }
                           idx[a] = 0;
                         }
                       }
                       out[i] = Compute<T>::Store(sum);
                     }
                   });
  return absl::OkStatus();
}

inline absl::Status Einsum(KernelContext& context) {
  AMPC_ASSIGN_OR_RETURN(const EinsumPlan plan, PlanEinsum(context));
  return DispatchKernel<AMPC_FLOAT_TYPES, DType::kInt32, DType::kInt64, DType::kUint32,
                        DType::kUint64>(
      context, [&]<typename T>() { return EinsumTyped<T>(context, plan); });
}

}  // namespace ampc::linalg
