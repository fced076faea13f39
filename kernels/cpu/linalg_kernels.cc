// Linear algebra: MatMul (batched, numpy broadcasting), Gemm, Conv and ConvTranspose (im2col and
// col2im around one GEMM per image and group), Einsum, Col2Im. FP16/BF16 multiply in FP32 and round
// once.
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/linalg_col2im.h"
#include "kernels/cpu/linalg_conv.h"
#include "kernels/cpu/linalg_einsum.h"
#include "kernels/cpu/linalg_gemm.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/kernel_registry.h"

namespace ampc {
namespace linalg {

absl::Status CheckSameTypes(const KernelContext& context) {
  for (int i = 1; i < context.num_inputs(); ++i) {
    const Tensor* t = context.input(i);
    if (t != nullptr && t->dtype() != context.in(0).dtype()) {
      return NodeError(context, absl::StrCat("input ", i, " is ", DTypeName(t->dtype()),
                                             " but input 0 is ", DTypeName(context.in(0).dtype())));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<MatMulShape> InferMatMul(const KernelContext& context, const Shape& a,
                                        const Shape& b) {
  if (a.empty() || b.empty()) {
    return NodeError(context, absl::StrCat("MatMul operands must have rank >= 1, got ",
                                           ShapeString(a), " and ", ShapeString(b)));
  }
  MatMulShape s;
  const bool a_vector = a.size() == 1, b_vector = b.size() == 1;
  s.m = a_vector ? 1 : a[a.size() - 2];
  s.k = a.back();
  const int64_t kb = b_vector ? b[0] : b[b.size() - 2];
  s.n = b_vector ? 1 : b.back();
  if (s.k != kb) {
    return NodeError(context, absl::StrCat("inner dimensions differ: A is ", ShapeString(a),
                                           ", B is ", ShapeString(b)));
  }
  s.batch_a.assign(a.begin(), a.end() - (a_vector ? 1 : 2));
  s.batch_b.assign(b.begin(), b.end() - (b_vector ? 1 : 2));
  std::optional<Shape> batch = BroadcastShapes(s.batch_a, s.batch_b);
  if (!batch.has_value()) {
    return NodeError(context, absl::StrCat("batch dimensions of ", ShapeString(a), " and ",
                                           ShapeString(b), " do not broadcast"));
  }
  s.batch = *batch;
  s.output = s.batch;
  if (!a_vector) s.output.push_back(s.m);
  if (!b_vector) s.output.push_back(s.n);
  return s;
}

absl::StatusOr<GemmShape> InferGemm(const KernelContext& context) {
  const Attributes attributes = context.attributes();
  GemmShape s;
  s.trans_a = attributes.Int("transA", 0) != 0;
  s.trans_b = attributes.Int("transB", 0) != 0;
  const Tensor& a = context.in(0);
  const Tensor& b = context.in(1);
  const Tensor* c = context.input(2);
  if (a.rank() != 2 || b.rank() != 2) {
    return NodeError(context, absl::StrCat("A and B must be 2-D, got ", ShapeString(a.shape()),
                                           " and ", ShapeString(b.shape())));
  }
  s.m = a.dim(s.trans_a ? 1 : 0);
  s.k = a.dim(s.trans_a ? 0 : 1);
  const int64_t kb = b.dim(s.trans_b ? 1 : 0);
  s.n = b.dim(s.trans_b ? 0 : 1);
  if (s.k != kb) {
    return NodeError(context, absl::StrCat("inner dimensions differ: op(A) is [", s.m, ",", s.k,
                                           "], op(B) is [", kb, ",", s.n, "]"));
  }
  if (c != nullptr) {
    const Shape out_shape = {s.m, s.n};
    std::optional<Shape> broadcast = BroadcastShapes(c->shape(), out_shape);
    if (c->rank() > 2 || !broadcast.has_value() || *broadcast != out_shape) {
      return NodeError(context, absl::StrCat("C of shape ", ShapeString(c->shape()),
                                             " does not broadcast to [", s.m, ",", s.n, "]"));
    }
  }
  return s;
}

}  // namespace linalg

namespace {

using linalg::Acc;
using linalg::AccInput;
using linalg::AccOutput;

absl::Status TooLarge(KernelContext& context) {
  return NodeError(context, "a matrix dimension exceeds 2^31-1");
}

// Calls product(rows, offset_a, offset_b, c) for MatMul's GEMMs: one with the batches stacked
// as rows when B is shared by every batch and A is contiguous, else one per batch (in parallel; a
// single one is split by the GEMM instead). Offsets are in elements of A and B.
template <typename C, typename Product>
void ForEachMatMul(ThreadPool& pool, const linalg::MatMulShape& s, Product&& product, C* out) {
  const int64_t batches = ElementCount(s.batch);
  const int64_t m = s.m, n = s.n, k = s.k;
  if (ElementCount(s.batch_b) == 1 && ElementCount(s.batch_a) == batches) {
    product(batches * m, int64_t{0}, int64_t{0}, out);
    return;
  }
  std::vector<int64_t> offset_a(batches), offset_b(batches);
  const Shape* batch_shapes[] = {&s.batch_a, &s.batch_b};
  BroadcastIndex index(s.batch, batch_shapes);
  index.ForRange(0, batches, [&](int64_t i, std::span<const int64_t> offsets) {
    offset_a[i] = offsets[0] * m * k;
    offset_b[i] = offsets[1] * k * n;
  });
  pool.ParallelFor(batches, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) product(m, offset_a[i], offset_b[i], out + i * m * n);
  });
}

template <typename T>
absl::Status MatMulTyped(KernelContext& context) {
  const Tensor& a = context.in(0);
  const Tensor& b = context.in(1);
  AMPC_ASSIGN_OR_RETURN(linalg::MatMulShape s, linalg::InferMatMul(context, a.shape(), b.shape()));
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, s.output));
  const int64_t batches = ElementCount(s.batch);
  if (y->size() == 0) return absl::OkStatus();
  if (!linalg::FitsBlas({s.m * batches, s.n, s.k})) return TooLarge(context);
  ThreadPool& pool = CpuOf(context.backend()).pool();
  linalg::SingleThreadedBlas();
  AccOutput<T> out(y->data<T>(), y->size());
  if constexpr (std::is_same_v<T, Half>) {
    if (linalg::TakesHalfGemm(1.0f, 0.0f)) {
      ForEachMatMul(
          pool, s,
          [&](int64_t rows, int64_t offset_a, int64_t offset_b, float* c) {
            linalg::ParallelGemmHalf(pool, false, false, rows, s.n, s.k, a.data<T>() + offset_a,
                                     s.k, b.data<T>() + offset_b, s.n, false, c, s.n);
          },
          out.data());
      out.Finish(pool);
      return absl::OkStatus();
    }
  }
  AccInput<T> pa(a.data<T>(), a.size(), pool);
  AccInput<T> pb(b.data<T>(), b.size(), pool);
  ForEachMatMul(
      pool, s,
      [&](int64_t rows, int64_t offset_a, int64_t offset_b, Acc<T>* c) {
        linalg::ParallelGemm<Acc<T>, T>(pool, false, false, rows, s.n, s.k, 1, pa.data() + offset_a,
                                        s.k, pb.data() + offset_b, s.n, 0, c, s.n);
      },
      out.data());
  out.Finish(pool);
  return absl::OkStatus();
}

#define AMPC_MATMUL_TYPES \
  AMPC_FLOAT_TYPES, DType::kInt32, DType::kInt64, DType::kUint32, DType::kUint64

absl::Status MatMul(KernelContext& context) {
  return linalg::DispatchKernel<AMPC_MATMUL_TYPES>(
      context, [&]<typename T>() { return MatMulTyped<T>(context); });
}

// Gemm: Y = alpha * op(A) * op(B) + beta * C, C broadcast to [M, N] (unidirectionally).
template <typename T>
absl::Status GemmTyped(KernelContext& context) {
  const Attributes attributes = context.attributes();
  const Acc<T> alpha = static_cast<Acc<T>>(attributes.Float("alpha", 1.0f));
  const Acc<T> beta = static_cast<Acc<T>>(attributes.Float("beta", 1.0f));
  const Tensor& a = context.in(0);
  const Tensor& b = context.in(1);
  const Tensor* c = context.input(2);
  AMPC_ASSIGN_OR_RETURN(const linalg::GemmShape s, linalg::InferGemm(context));
  const bool trans_a = s.trans_a, trans_b = s.trans_b;
  const int64_t m = s.m, k = s.k, n = s.n;
  const Shape out_shape = {m, n};
  if (!linalg::FitsBlas({m, n, k})) return TooLarge(context);
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, out_shape));
  if (y->size() == 0) return absl::OkStatus();
  ThreadPool& pool = CpuOf(context.backend()).pool();
  linalg::SingleThreadedBlas();
  AccOutput<T> out(y->data<T>(), y->size());
  const bool use_c = c != nullptr && beta != Acc<T>{0};
  if (use_c) {
    const T* pc = c->data<T>();
    const Shape* shapes[] = {&c->shape()};
    BroadcastIndex index(out_shape, shapes);
    Acc<T>* acc = out.data();
    index.ForRange(0, m * n, [&](int64_t i, std::span<const int64_t> offsets) {
      acc[i] = Compute<T>::Load(pc[offsets[0]]);
    });
  }
  if constexpr (std::is_same_v<T, Half>) {
    if (linalg::TakesHalfGemm(alpha, use_c ? beta : 0.0f)) {
      linalg::ParallelGemmHalf(pool, trans_a, trans_b, m, n, k, a.data<T>(), a.dim(1), b.data<T>(),
                               b.dim(1), use_c, out.data(), n);
      out.Finish(pool);
      return absl::OkStatus();
    }
  }
  AccInput<T> pa(a.data<T>(), a.size(), pool);
  AccInput<T> pb(b.data<T>(), b.size(), pool);
  linalg::ParallelGemm<Acc<T>, T>(pool, trans_a, trans_b, m, n, k, alpha, pa.data(), a.dim(1),
                                  pb.data(), b.dim(1), use_c ? beta : Acc<T>{0}, out.data(), n);
  out.Finish(pool);
  return absl::OkStatus();
}

absl::Status Gemm(KernelContext& context) {
  return linalg::DispatchKernel<AMPC_MATMUL_TYPES>(
      context, [&]<typename T>() { return GemmTyped<T>(context); });
}

}  // namespace

void RegisterLinalgKernels(KernelRegistry& r) {
  const std::vector<DType> matmul = {AMPC_MATMUL_TYPES};
  const std::vector<DType> floats = {AMPC_FLOAT_TYPES};
  r.Register("cpu", "", "MatMul", {{0, matmul}, {1, matmul}}, MatMul);
  r.Register("cpu", "", "Gemm", {{0, matmul}, {1, matmul}, {2, matmul}}, Gemm);
  r.Register("cpu", "", "Conv", {{0, floats}, {1, floats}, {2, floats}}, linalg::Conv);
  r.Register("cpu", kRuntimeDomain, "FusedConv", {{0, floats}, {1, floats}, {2, floats}},
             linalg::FusedConv);
  r.Register("cpu", "", "ConvTranspose", {{0, floats}, {1, floats}, {2, floats}},
             linalg::ConvTranspose);
  r.Register("cpu", "", "Einsum", {{0, matmul}}, linalg::Einsum);
  r.Register("cpu", "", "Col2Im", {{0, {AMPC_FLOAT_TYPES, AMPC_INT_TYPES}}, {1, {DType::kInt64}}},
             linalg::Col2Im);
}

}  // namespace ampc
