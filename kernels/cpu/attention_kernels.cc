// Attention (opset 23 to 25) natively: softmax(Q K^T * scale + bias) V per query head, in FP32
// (FP64 for double) from the widened inputs to the outputs, each output rounded once to its element
// type. The semantics are those of ONNX's reference (onnx/reference/ops/op_attention.py): Q and K
// are each multiplied by sqrt(scale); the bias adds attn_mask (bool as 0 / -inf, padded with -inf
// to the keys it does not cover), a bottom-right causal mask, the sliding window (opset 25) and the
// nonpad_kv_seqlen padding; softcap comes before the bias; a row whose bias is -inf everywhere
// attends to nothing (Y and the mode-3 output are 0). Without this kernel the function body ran
// with every intermediate rounded to FP16/BF16.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/linalg_gemm.h"
#include "kernels/cpu/norm_common.h"
#include "kernels/cpu/reduce_common.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/cpu_backend.h"

namespace ampc {
namespace {

enum AttentionInput { kQ, kK, kV, kMask, kPastKey, kPastValue, kNonpad };

// Sizes of one run, heads first ([B, H, S, D]) whatever the inputs' rank.
struct AttentionDims {
  bool three_d = false;
  int64_t batch = 0, q_heads = 0, kv_heads = 0;
  int64_t q_len = 0, kv_len = 0, past_len = 0;
  int64_t head_size = 0, v_head_size = 0;
  int64_t total_len() const { return past_len + kv_len; }
};

// Where element (b, h, s, 0) of a tensor of H heads, S positions and head size D lies: [B,H,S,D]
// in 4-D, [B,S,H*D] in 3-D.
int64_t HeadOffset(bool three_d, int64_t H, int64_t S, int64_t D, int64_t b, int64_t h, int64_t s) {
  return three_d ? ((b * S + s) * H + h) * D : ((b * H + h) * S + s) * D;
}

absl::Status ShapeError(const KernelContext& context, absl::string_view what) {
  const auto shape = [&](int i) { return ShapeString(context.in(i).shape()); };
  return NodeError(
      context, absl::StrCat(what, " (Q ", shape(kQ), ", K ", shape(kK), ", V ", shape(kV), ")"));
}

absl::Status ReadDims3d(const KernelContext& context, AttentionDims& d, int64_t& k_head,
                        int64_t& v_len) {
  const Tensor &q = context.in(kQ), &k = context.in(kK), &v = context.in(kV);
  const Attributes attributes = context.attributes();
  d.q_heads = attributes.Int("q_num_heads", 0);
  d.kv_heads = attributes.Int("kv_num_heads", 0);
  if (d.q_heads <= 0 || d.kv_heads <= 0) {
    return ShapeError(context, "3-D inputs need positive q_num_heads and kv_num_heads");
  }
  if (q.dim(2) % d.q_heads != 0 || k.dim(2) % d.kv_heads != 0 || v.dim(2) % d.kv_heads != 0) {
    return ShapeError(context, "hidden sizes are not multiples of the head counts");
  }
  d.q_len = q.dim(1);
  d.kv_len = k.dim(1);
  d.head_size = q.dim(2) / d.q_heads;
  d.v_head_size = v.dim(2) / d.kv_heads;
  k_head = k.dim(2) / d.kv_heads;
  v_len = v.dim(1);
  return absl::OkStatus();
}

absl::Status ReadDims4d(const KernelContext& context, AttentionDims& d, int64_t& k_head,
                        int64_t& v_len) {
  const Tensor &q = context.in(kQ), &k = context.in(kK), &v = context.in(kV);
  const Attributes attributes = context.attributes();
  if (context.info().opset >= 25 &&
      (attributes.Has("q_num_heads") || attributes.Has("kv_num_heads"))) {
    return ShapeError(context, "q_num_heads and kv_num_heads must not be given for 4-D inputs");
  }
  if (v.dim(1) != k.dim(1)) return ShapeError(context, "K and V have different head counts");
  d.q_heads = q.dim(1);
  d.kv_heads = k.dim(1);
  d.q_len = q.dim(2);
  d.kv_len = k.dim(2);
  d.head_size = q.dim(3);
  d.v_head_size = v.dim(3);
  k_head = k.dim(3);
  v_len = v.dim(2);
  return absl::OkStatus();
}

absl::StatusOr<AttentionDims> ReadDims(const KernelContext& context) {
  const Tensor &q = context.in(kQ), &k = context.in(kK), &v = context.in(kV);
  if ((q.rank() != 3 && q.rank() != 4) || k.rank() != q.rank() || v.rank() != q.rank()) {
    return ShapeError(context, "Q, K and V must all have rank 3 or all rank 4");
  }
  AttentionDims d;
  d.three_d = q.rank() == 3;
  d.batch = q.dim(0);
  int64_t k_head = 0, v_len = 0;
  AMPC_RETURN_IF_ERROR(d.three_d ? ReadDims3d(context, d, k_head, v_len)
                                 : ReadDims4d(context, d, k_head, v_len));
  if (k.dim(0) != d.batch || v.dim(0) != d.batch) {
    return ShapeError(context, "Q, K and V have different batch sizes");
  }
  if (k_head != d.head_size) return ShapeError(context, "Q and K have different head sizes");
  if (v_len != d.kv_len) return ShapeError(context, "K and V have different sequence lengths");
  if (d.kv_heads <= 0 || d.q_heads % d.kv_heads != 0) {
    return ShapeError(context, "the query heads are not a multiple of the key/value heads");
  }
  return d;
}

// past_key [B, Hkv, P, D] and past_value [B, Hkv, P, Dv] come together, never with
// nonpad_kv_seqlen (int64 [B]); sets d.past_len.
absl::Status CheckCache(const KernelContext& context, AttentionDims& d) {
  const Tensor *past_key = context.input(kPastKey), *past_value = context.input(kPastValue);
  const Tensor* nonpad = context.input(kNonpad);
  if ((past_key == nullptr) != (past_value == nullptr)) {
    return NodeError(context, "past_key and past_value must be given together");
  }
  if (nonpad != nullptr) {
    if (past_key != nullptr) {
      return NodeError(context, "nonpad_kv_seqlen cannot be combined with past_key/past_value");
    }
    if (nonpad->dtype() != DType::kInt64 || nonpad->shape() != Shape{d.batch}) {
      return NodeError(context, absl::StrCat("nonpad_kv_seqlen must be int64 [", d.batch, "], got ",
                                             nonpad->TypeString()));
    }
  }
  if (past_key == nullptr) return absl::OkStatus();
  d.past_len = past_key->rank() == 4 ? past_key->dim(2) : -1;
  const Shape key{d.batch, d.kv_heads, d.past_len, d.head_size};
  const Shape value{d.batch, d.kv_heads, d.past_len, d.v_head_size};
  if (past_key->shape() != key || past_value->shape() != value) {
    return NodeError(
        context, absl::StrCat("past_key ", ShapeString(past_key->shape()), " and past_value ",
                              ShapeString(past_value->shape()), " do not fit K and V (expected ",
                              ShapeString(key), " and ", ShapeString(value), ")"));
  }
  return absl::OkStatus();
}

// attn_mask as additive values broadcast (right-aligned) to [B, Hq, Sq, keys]; keys at or past
// its last dimension are masked (the reference pads it with -inf / false).
template <typename C>
struct AttentionMask {
  bool present = false;
  std::vector<C> add;
  int64_t last = 0;
  int64_t stride[4] = {0, 0, 0, 0};

  C At(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (j >= last) return -std::numeric_limits<C>::infinity();
    return add[b * stride[0] + h * stride[1] + i * stride[2] + j * stride[3]];
  }
};

template <typename C>
bool LoadMaskValues(const Tensor& mask, std::vector<C>& add) {
  if (mask.dtype() == DType::kBool) {
    const bool* p = mask.data<bool>();
    add.resize(static_cast<size_t>(mask.size()));
    for (size_t i = 0; i < add.size(); ++i) {
      add[i] = p[i] ? C{0} : -std::numeric_limits<C>::infinity();
    }
    return true;
  }
  if (LoadWidened(mask, add)) return true;
  return Dispatch<AMPC_INT_TYPES>(mask.dtype(), [&]<typename T>() {
    const T* p = mask.data<T>();
    add.assign(p, p + mask.size());
  });
}

template <typename C>
absl::StatusOr<AttentionMask<C>> LoadMask(const KernelContext& context, const AttentionDims& d) {
  AttentionMask<C> m;
  const Tensor* mask = context.input(kMask);
  if (mask == nullptr) return m;
  const int rank = mask->rank();
  const int64_t target[4] = {d.batch, d.q_heads, d.q_len, rank > 0 ? mask->dim(rank - 1) : 0};
  if (rank < 1 || rank > 4 || target[3] > d.total_len()) {
    return NodeError(context, absl::StrCat("attn_mask of shape ", ShapeString(mask->shape()),
                                           " does not broadcast to [", d.batch, ", ", d.q_heads,
                                           ", ", d.q_len, ", ", d.total_len(), "]"));
  }
  int64_t stride = 1;
  for (int a = rank - 1; a >= 0; --a) {
    const int axis = 4 - rank + a;
    const int64_t dim = mask->dim(a);
    if (dim != 1 && dim != target[axis]) {
      return NodeError(context, absl::StrCat("attn_mask of shape ", ShapeString(mask->shape()),
                                             " does not broadcast to [", d.batch, ", ", d.q_heads,
                                             ", ", d.q_len, ", keys]"));
    }
    m.stride[axis] = dim == 1 ? 0 : stride;
    stride *= dim;
  }
  if (!LoadMaskValues(*mask, m.add)) {
    return NodeError(context, absl::StrCat("attn_mask has unsupported type ", mask->TypeString()));
  }
  m.present = true;
  m.last = target[3];
  return m;
}

// Everything but the tensors that decides a head's scores.
template <typename C>
struct AttentionSpec {
  AttentionDims dims;
  C softcap = 0;
  int64_t mode = 0;  // qk_matmul_output_mode
  bool causal = false;
  int64_t left_window = -1, right_window = -1;
  std::vector<int64_t> nonpad;  // per batch; empty without nonpad_kv_seqlen
  AttentionMask<C> mask;
};

// The additive bias of key j for query i (batch b, query head h).
template <typename C>
C Bias(const AttentionSpec<C>& s, int64_t b, int64_t h, int64_t i, int64_t j) {
  constexpr C kNegInf = -std::numeric_limits<C>::infinity();
  C bias = s.mask.present ? s.mask.At(b, h, i, j) : C{0};
  // Keys before this query block: the cache's length, or the valid keys less the queries.
  const int64_t offset = s.nonpad.empty() ? s.dims.past_len : s.nonpad[b] - s.dims.q_len;
  const int64_t diff = i + offset - j;
  if (s.causal && diff < 0) bias += kNegInf;
  if ((s.left_window >= 0 && diff > s.left_window) ||
      (s.right_window >= 0 && -diff > s.right_window)) {
    bias += kNegInf;
  }
  if (!s.nonpad.empty() && j >= s.nonpad[b]) bias += kNegInf;
  return bias;
}

// Softmax as the reference: a row of -inf gives zeros (its max taken as 0, a zero sum as 1).
template <typename C>
void SoftmaxRow(C* row, int64_t n) {
  C max = -std::numeric_limits<C>::infinity();
  for (int64_t j = 0; j < n; ++j) max = std::max(max, row[j]);
  if (std::isinf(max) && max < 0) max = 0;
  for (int64_t j = 0; j < n; ++j) row[j] = std::exp(row[j] - max);
  C sum = reduce::ChunkedSum<C>(n, [&](int64_t j) { return row[j]; });
  if (sum == C{0}) sum = 1;
  for (int64_t j = 0; j < n; ++j) row[j] /= sum;
}

// One row of scores in place: softcap, bias, softmax; `qk` (or null) gets the mode's values.
template <typename C>
void ScoreRow(const AttentionSpec<C>& s, int64_t b, int64_t h, int64_t i, C* row, C* qk) {
  const int64_t n = s.dims.total_len();
  if (s.softcap > 0) {
    for (int64_t j = 0; j < n; ++j) row[j] = s.softcap * std::tanh(row[j] / s.softcap);
  }
  if (qk != nullptr && s.mode < 2) std::copy(row, row + n, qk);
  bool masked = true;  // decided on the bias, as the reference, not on the (maybe NaN) scores
  for (int64_t j = 0; j < n; ++j) {
    const C bias = Bias(s, b, h, i, j);
    masked = masked && std::isinf(bias) && bias < 0;
    row[j] += bias;
  }
  if (qk != nullptr && s.mode == 2) std::copy(row, row + n, qk);
  if (masked) {
    std::fill(row, row + n, C{0});
  } else {
    SoftmaxRow(row, n);
  }
  if (qk != nullptr && s.mode == 3) std::copy(row, row + n, qk);
}

// The widened inputs, heads first; Q and K already multiplied by sqrt(scale); K and V with the
// cache in front.
template <typename C>
struct AttentionOperands {
  std::vector<C> q, k, v;
};

// A [B, H, S, D] (or 3-D [B, S, H*D]) tensor widened to [B, H, past + S, D] after `past`.
template <typename C>
bool LoadHeads(const Tensor& t, const Tensor* past, const AttentionDims& d, int64_t heads,
               int64_t len, int64_t size, std::vector<C>& out) {
  std::vector<C> cur, before;
  if (!LoadWidened(t, cur) || (past != nullptr && !LoadWidened(*past, before))) return false;
  const int64_t p = past != nullptr ? d.past_len : 0, total = p + len;
  out.resize(static_cast<size_t>(d.batch * heads * total * size));
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      C* dst = out.data() + (b * heads + h) * total * size;
      if (p > 0) std::copy_n(before.data() + (b * heads + h) * p * size, p * size, dst);
      for (int64_t s = 0; s < len; ++s) {
        std::copy_n(cur.data() + HeadOffset(d.three_d, heads, len, size, b, h, s), size,
                    dst + (p + s) * size);
      }
    }
  }
  return true;
}

template <typename C>
absl::Status LoadOperands(const KernelContext& context, const AttentionDims& d, C sqrt_scale,
                          AttentionOperands<C>& ops) {
  const bool ok = LoadHeads(context.in(kQ), nullptr, d, d.q_heads, d.q_len, d.head_size, ops.q) &&
                  LoadHeads(context.in(kK), context.input(kPastKey), d, d.kv_heads, d.kv_len,
                            d.head_size, ops.k) &&
                  LoadHeads(context.in(kV), context.input(kPastValue), d, d.kv_heads, d.kv_len,
                            d.v_head_size, ops.v);
  if (!ok) return NodeError(context, "Q, K, V and the cache must be floating point");
  for (C& x : ops.q) x *= sqrt_scale;
  for (C& x : ops.k) x *= sqrt_scale;
  return absl::OkStatus();
}

// Y (heads first, [B, Hq, Sq, Dv]) and the optional qk output ([B, Hq, Sq, keys]) in C.
template <typename C>
void Attend(ThreadPool& pool, const AttentionSpec<C>& s, const AttentionOperands<C>& ops,
            std::vector<C>& y, std::vector<C>* qk) {
  const AttentionDims& d = s.dims;
  const int64_t sq = d.q_len, t = d.total_len(), dk = d.head_size, dv = d.v_head_size;
  const int64_t group = d.q_heads / d.kv_heads;
  y.assign(static_cast<size_t>(d.batch * d.q_heads * sq * dv), C{0});
  if (qk != nullptr) qk->assign(static_cast<size_t>(d.batch * d.q_heads * sq * t), C{0});
  linalg::SingleThreadedBlas();
  pool.ParallelFor(d.batch * d.q_heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<C> scores(static_cast<size_t>(sq * t));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / d.q_heads, h = task % d.q_heads;
      const int64_t kv = b * d.kv_heads + h / group;  // each KV head serves `group` query heads
      linalg::Gemm<C>(false, true, sq, t, dk, C{1}, ops.q.data() + task * sq * dk, dk,
                      ops.k.data() + kv * t * dk, dk, C{0}, scores.data(), t);
      for (int64_t i = 0; i < sq; ++i) {
        ScoreRow(s, b, h, i, scores.data() + i * t,
                 qk != nullptr ? qk->data() + (task * sq + i) * t : nullptr);
      }
      linalg::Gemm<C>(false, false, sq, dv, t, C{1}, scores.data(), t, ops.v.data() + kv * t * dv,
                      dv, C{0}, y.data() + task * sq * dv, dv);
    }
  });
}

// Y rounded once into output 0: [B, Hq, Sq, Dv], or [B, Sq, Hq*Dv] for 3-D inputs.
template <typename C>
absl::Status StoreY(KernelContext& context, const AttentionDims& d, const std::vector<C>& y) {
  const int64_t dv = d.v_head_size;
  Shape shape{d.batch, d.q_heads, d.q_len, dv};
  std::vector<C> ordered = y;
  if (d.three_d) {
    shape = {d.batch, d.q_len, d.q_heads * dv};
    for (int64_t b = 0; b < d.batch; ++b) {
      for (int64_t h = 0; h < d.q_heads; ++h) {
        for (int64_t s = 0; s < d.q_len; ++s) {
          std::copy_n(y.data() + ((b * d.q_heads + h) * d.q_len + s) * dv, dv,
                      ordered.data() + HeadOffset(true, d.q_heads, d.q_len, dv, b, h, s));
        }
      }
    }
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, shape));
  if (!StoreRounded(ordered, *out)) return NodeError(context, "Y must be floating point");
  return absl::OkStatus();
}

// present_key / present_value (output i): the cache then the new keys, [B, Hkv, P + S, D],
// copied bit for bit.
absl::Status StorePresent(KernelContext& context, int i, const Tensor& t, const Tensor* past,
                          const AttentionDims& d, int64_t size) {
  if (!WantsOutput(context, i)) return absl::OkStatus();
  const int64_t p = past != nullptr ? d.past_len : 0, total = p + d.kv_len;
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(i, {d.batch, d.kv_heads, total, size}));
  if (out->dtype() != t.dtype() || (past != nullptr && past->dtype() != t.dtype())) {
    return NodeError(context,
                     absl::StrCat("output ", i, " (", out->TypeString(),
                                  ") and the cache must have the type of ", t.TypeString()));
  }
  const size_t es = DTypeSize(t.dtype()), row = static_cast<size_t>(size) * es;
  char* dst = static_cast<char*>(out->raw());
  for (int64_t bh = 0; bh < d.batch * d.kv_heads; ++bh) {
    if (p > 0) std::memcpy(dst, static_cast<const char*>(past->raw()) + bh * p * row, p * row);
    dst += p * row;
    for (int64_t s = 0; s < d.kv_len; ++s, dst += row) {
      const int64_t at =
          HeadOffset(d.three_d, d.kv_heads, d.kv_len, size, bh / d.kv_heads, bh % d.kv_heads, s);
      std::memcpy(dst, static_cast<const char*>(t.raw()) + at * es, row);
    }
  }
  return absl::OkStatus();
}

template <typename C>
absl::StatusOr<AttentionSpec<C>> ReadSpec(const KernelContext& context, const AttentionDims& d) {
  const Attributes attributes = context.attributes();
  AttentionSpec<C> s;
  s.dims = d;
  s.softcap = static_cast<C>(attributes.Float("softcap", 0.0f));
  s.mode = attributes.Int("qk_matmul_output_mode", 0);
  if (s.mode < 0 || s.mode > 3) {
    return NodeError(context, absl::StrCat("qk_matmul_output_mode must be 0 to 3, got ", s.mode));
  }
  s.causal = attributes.Int("is_causal", 0) != 0;
  if (context.info().opset >= 25) {
    s.left_window = attributes.Int("left_window_size", -1);
    s.right_window = attributes.Int("right_window_size", -1);
    if (s.left_window < -1 || s.right_window < -1) {
      return NodeError(context, "left_window_size and right_window_size must be -1 or more");
    }
  }
  if (const Tensor* nonpad = context.input(kNonpad); nonpad != nullptr) {
    const int64_t* p = nonpad->data<int64_t>();
    s.nonpad.assign(p, p + nonpad->size());
  }
  AMPC_ASSIGN_OR_RETURN(s.mask, LoadMask<C>(context, d));
  return s;
}

template <typename C>
absl::Status AttentionTyped(KernelContext& context, const AttentionDims& d) {
  AMPC_ASSIGN_OR_RETURN(const AttentionSpec<C> spec, ReadSpec<C>(context, d));
  const Attributes attributes = context.attributes();
  const double scale = attributes.Has("scale") ? attributes.Float("scale", 1.0f)
                                               : 1.0 / std::sqrt(static_cast<double>(d.head_size));
  AttentionOperands<C> ops;
  AMPC_RETURN_IF_ERROR(LoadOperands(context, d, static_cast<C>(std::sqrt(scale)), ops));
  if (!linalg::FitsBlas({d.q_len, d.total_len(), d.head_size, d.v_head_size})) {
    return NodeError(context, "sequence or head sizes too large for BLAS");
  }
  const bool wants_qk = WantsOutput(context, 3);
  std::vector<C> y, qk;
  Attend(CpuOf(context.backend()).pool(), spec, ops, y, wants_qk ? &qk : nullptr);
  AMPC_RETURN_IF_ERROR(StoreY(context, d, y));
  AMPC_RETURN_IF_ERROR(
      StorePresent(context, 1, context.in(kK), context.input(kPastKey), d, d.head_size));
  AMPC_RETURN_IF_ERROR(
      StorePresent(context, 2, context.in(kV), context.input(kPastValue), d, d.v_head_size));
  if (!wants_qk) return absl::OkStatus();
  AMPC_ASSIGN_OR_RETURN(Tensor * out,
                        context.Output(3, {d.batch, d.q_heads, d.q_len, d.total_len()}));
  if (!StoreRounded(qk, *out)) return NodeError(context, "qk_matmul_output must be floating point");
  return absl::OkStatus();
}

absl::Status Attention(KernelContext& context) {
  AMPC_ASSIGN_OR_RETURN(AttentionDims d, ReadDims(context));
  AMPC_RETURN_IF_ERROR(CheckCache(context, d));
  return context.in(kQ).dtype() == DType::kDouble ? AttentionTyped<double>(context, d)
                                                  : AttentionTyped<float>(context, d);
}

}  // namespace

// Attention's versions start at 23, so the default range covers exactly 23 to 28.
void RegisterAttentionKernels(KernelRegistry& r) {
  const std::vector<DType> floats = {AMPC_FLOAT_TYPES};
  r.Register("cpu", "", "Attention",
             {{kQ, floats},
              {kK, floats},
              {kV, floats},
              {kPastKey, floats},
              {kPastValue, floats},
              {kNonpad, {DType::kInt64}}},
             Attention);
}

}  // namespace ampc
