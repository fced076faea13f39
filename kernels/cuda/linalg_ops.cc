// Gemm and MatMul on the CUDA backend: cuBLASLt through kernels/cuda/gemm.h, one Gemm object
// (handle, workspace, plans) per backend. FP32, FP16 and BF16 multiply with FP32 accumulation and
// round once, as the CPU kernels do; FP32 never uses TF32. Shapes and errors follow
// kernels/cpu/linalg_kernels.cc.
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/op_support.h"
#include "runtime/status_macros.h"

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

// ONNX types every tensor input alike; a model that breaks this must not be read as another type.
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

const char* At(const Tensor& t, int64_t elements) {
  return static_cast<const char*>(t.raw()) + elements * static_cast<int64_t>(DTypeSize(t.dtype()));
}

// ---- MatMul: numpy's rules; 1-D operands become a row (A) or a column (B) matrix ----

absl::Status MatMul(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(CheckSameTypes(context));
  const Tensor& a = context.in(0);
  const Tensor& b = context.in(1);
  if (a.rank() == 0 || b.rank() == 0) {
    return NodeError(
        context, absl::StrCat("MatMul operands must have rank >= 1, got ", ShapeString(a.shape()),
                              " and ", ShapeString(b.shape())));
  }
  const bool a_vector = a.rank() == 1, b_vector = b.rank() == 1;
  const int64_t m = a_vector ? 1 : a.dim(a.rank() - 2), k = a.dim(a.rank() - 1);
  const int64_t kb = b_vector ? b.dim(0) : b.dim(b.rank() - 2);
  const int64_t n = b_vector ? 1 : b.dim(b.rank() - 1);
  if (k != kb) {
    return NodeError(context, absl::StrCat("inner dimensions differ: A is ", ShapeString(a.shape()),
                                           ", B is ", ShapeString(b.shape())));
  }
  const std::vector<int64_t> batch_a(a.shape().begin(), a.shape().end() - (a_vector ? 1 : 2));
  const std::vector<int64_t> batch_b(b.shape().begin(), b.shape().end() - (b_vector ? 1 : 2));
  std::vector<int64_t> batch;
  std::vector<cuda::BatchRun> runs;
  if (!cuda::MatMulBatchRuns(batch_a, batch_b, batch, runs)) {
    return NodeError(context, absl::StrCat("batch dimensions of ", ShapeString(a.shape()), " and ",
                                           ShapeString(b.shape()), " do not broadcast"));
  }
  Shape out_shape = batch;
  if (!a_vector) out_shape.push_back(m);
  if (!b_vector) out_shape.push_back(n);
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, out_shape));
  if (y->size() == 0) return absl::OkStatus();

  GemmArgs args;
  args.type = cuda::ElemOf(a.dtype());
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
  AMPC_RETURN_IF_ERROR(CheckSameTypes(context));
  const Attributes attributes = context.attributes();
  const bool trans_a = attributes.Int("transA", 0) != 0;
  const bool trans_b = attributes.Int("transB", 0) != 0;
  const float alpha = attributes.Float("alpha", 1.0f);
  const float beta = attributes.Float("beta", 1.0f);
  const Tensor& a = context.in(0);
  const Tensor& b = context.in(1);
  const Tensor* c = context.input(2);
  if (a.rank() != 2 || b.rank() != 2) {
    return NodeError(context, absl::StrCat("A and B must be 2-D, got ", ShapeString(a.shape()),
                                           " and ", ShapeString(b.shape())));
  }
  const int64_t m = a.dim(trans_a ? 1 : 0), k = a.dim(trans_a ? 0 : 1);
  const int64_t kb = b.dim(trans_b ? 1 : 0), n = b.dim(trans_b ? 0 : 1);
  if (k != kb) {
    return NodeError(context, absl::StrCat("inner dimensions differ: op(A) is [", m, ",", k,
                                           "], op(B) is [", kb, ",", n, "]"));
  }
  const Shape out_shape = {m, n};
  if (c != nullptr) {
    // Unidirectional broadcasting: C's dimensions, right-aligned, are 1 or the output's.
    bool broadcasts = c->rank() <= 2;
    for (int d = 0; broadcasts && d < c->rank(); ++d) {
      const int64_t want = out_shape[2 - c->rank() + d];
      broadcasts = c->dim(d) == 1 || c->dim(d) == want;
    }
    if (!broadcasts) {
      return NodeError(context, absl::StrCat("C of shape ", ShapeString(c->shape()),
                                             " does not broadcast to [", m, ",", n, "]"));
    }
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, out_shape));
  if (y->size() == 0) return absl::OkStatus();

  GemmArgs args;
  args.type = cuda::ElemOf(a.dtype());
  args.trans_a = trans_a;
  args.trans_b = trans_b;
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
    if (beta == 1.0f && rows == 1 && cols == n) {
      args.bias = c->raw();  // a bias row: the epilogue adds it, no copy
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
