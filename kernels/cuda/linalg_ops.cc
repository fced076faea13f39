// Gemm and MatMul on the CUDA backend: cuBLASLt through kernels/cuda/gemm.h, one Gemm object
// (handle, workspace, plans) per backend. FP32, FP16 and BF16 multiply with FP32 accumulation and
// round once, as the CPU kernels do; FP32 uses TF32 only when the backend allows it (--tf32).
// Shapes and errors are the CPU's (kernels/cpu/linalg_shapes.h).
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/linalg_shapes.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/op_support.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

using cuda::GemmArgs;

const std::vector<DType> kGemmTypes = {DType::kFloat, DType::kFloat16, DType::kBFloat16};

cuda::Gemm& GemmOf(const KernelContext& context) {
  return cuda::BackendOf(context).Shared<cuda::Gemm>();
}

absl::Status Ran(const KernelContext& context, const cuda::GemmResult& result) {
  if (result.ok) return absl::OkStatus();
  return NodeError(context, result.message);
}

const char* At(const Tensor& t, int64_t elements) {
  return static_cast<const char*>(t.raw()) + elements * static_cast<int64_t>(DTypeSize(t.dtype()));
}

// ---- MatMul: numpy's rules; 1-D operands become a row (A) or a column (B) matrix ----

absl::Status MatMul(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(linalg::CheckSameTypes(context));
  const Tensor& a = context.in(0);
  const Tensor& b = context.in(1);
  AMPC_ASSIGN_OR_RETURN(const linalg::MatMulShape s,
                        linalg::InferMatMul(context, a.shape(), b.shape()));
  const int64_t m = s.m, k = s.k, n = s.n;
  std::vector<int64_t> batch;
  std::vector<cuda::BatchRun> runs;
  if (!cuda::MatMulBatchRuns(s.batch_a, s.batch_b, batch, runs)) {
    return NodeError(context, absl::StrCat("batch dimensions of ", ShapeString(a.shape()), " and ",
                                           ShapeString(b.shape()), " do not broadcast"));
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, s.output));
  if (y->size() == 0) return absl::OkStatus();

  GemmArgs args;
  args.type = cuda::ElemOf(a.dtype());
  args.allow_tf32 = cuda::BackendOf(context).allow_tf32();
  args.m = m;
  args.n = n;
  args.k = k;
  cuda::Gemm& gemm = GemmOf(context);
  const cudaStream_t stream = cuda::StreamOf(context);
  if (runs.size() == 1 && runs[0].count > 1 && runs[0].stride_a == 1 && runs[0].stride_b == 0) {
    // B is shared by every batch and A's batches are contiguous: one GEMM, batches as rows.
    args.m = m * runs[0].count;
    args.a = At(a, runs[0].offset_a * m * k);
    args.b = At(b, runs[0].offset_b * k * n);
    args.c = y->raw();
    return Ran(context, gemm.Run(args, stream));
  }
  for (const cuda::BatchRun& run : runs) {
    args.a = At(a, run.offset_a * m * k);
    args.b = At(b, run.offset_b * k * n);
    args.c = const_cast<char*>(At(*y, run.first * m * n));
    args.batch = run.count;
    args.stride_a = run.stride_a * m * k;
    args.stride_b = run.stride_b * k * n;
    args.stride_c = m * n;
    AMPC_RETURN_IF_ERROR(Ran(context, gemm.Run(args, stream)));
  }
  return absl::OkStatus();
}

// ---- Gemm: Y = alpha * op(A) * op(B) + beta * C, C broadcast to [M, N] (unidirectionally) ----

absl::Status Gemm(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(linalg::CheckSameTypes(context));
  const Attributes attributes = context.attributes();
  const float alpha = attributes.Float("alpha", 1.0f);
  const float beta = attributes.Float("beta", 1.0f);
  const Tensor& a = context.in(0);
  const Tensor& b = context.in(1);
  const Tensor* c = context.input(2);
  AMPC_ASSIGN_OR_RETURN(const linalg::GemmShape s, linalg::InferGemm(context));
  const int64_t m = s.m, k = s.k, n = s.n;
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, Shape{m, n}));
  if (y->size() == 0) return absl::OkStatus();

  GemmArgs args;
  args.type = cuda::ElemOf(a.dtype());
  args.allow_tf32 = cuda::BackendOf(context).allow_tf32();
  args.trans_a = s.trans_a;
  args.trans_b = s.trans_b;
  args.m = m;
  args.n = n;
  args.k = k;
  args.a = a.raw();
  args.b = b.raw();
  args.c = y->raw();
  args.alpha = alpha;
  const cudaStream_t stream = cuda::StreamOf(context);
  if (c != nullptr && beta != 0.0f) {
    // C as [rows, cols], each 1 or the output's extent.
    const int64_t rows = c->rank() == 2 ? c->dim(0) : 1;
    const int64_t cols = c->rank() >= 1 ? c->dim(c->rank() - 1) : 1;
    // A bias row the epilogue adds, no copy; FP32 only: with an FP16/BF16 output cuBLASLt
    // rounds the product before it adds the bias (two roundings where the CPU has one).
    if (beta == 1.0f && rows == 1 && cols == n && args.type == cuda::ElemType::kFloat) {
      args.bias = c->raw();
    } else {
      AMPC_RETURN_IF_ERROR(cuda::Launched(
          context,
          cuda::BroadcastToMatrix(args.type, c->raw(), rows, cols, y->raw(), m, n, stream)));
      args.beta = beta;
    }
  }
  return Ran(context, GemmOf(context).Run(args, stream));
}

}  // namespace

void RegisterCudaLinalgKernels(KernelRegistry& registry) {
  registry.Register("cuda", "", "MatMul", {{0, kGemmTypes}, {1, kGemmTypes}}, MatMul);
  registry.Register("cuda", "", "Gemm", {{0, kGemmTypes}, {1, kGemmTypes}, {2, kGemmTypes}}, Gemm);
}

}  // namespace ampc
