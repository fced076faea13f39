// GEMM on the GPU through cuBLASLt, row-major, for ONNX Gemm and MatMul and their gradients:
//   C[M,N] = epilogue(alpha * op(A)[M,K] op(B)[K,N] + beta * C + bias)   (per batch matrix)
// FP16, BF16 or FP32 storage; the products accumulate in FP32 (CUBLAS_COMPUTE_32F, and split-K
// partial sums stay in FP32) and the result is rounded once to the storage type, as on the CPU
// backend. FP32 inputs use TF32 tensor cores only when asked (allow_tf32).
// Plain C++ header: includable without nvcc.
#ifndef AMPC_KERNELS_CUDA_GEMM_H_
#define AMPC_KERNELS_CUDA_GEMM_H_

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/elem_type.h"

namespace ampc::cuda {

struct GemmResult {
  bool ok = true;
  std::string message;  // when !ok: the failing call and the problem it was given

  static GemmResult Error(std::string message) { return GemmResult{false, std::move(message)}; }
};

// One (strided-batched) product. Matrices are row-major with leading dimension (elements between
// rows) lda/ldb/ldc; 0 means packed. Batch matrix i is at a + i * stride_a (likewise b, c); a
// stride of 0 gives every batch the same A (or B): numpy broadcasting of one operand.
struct GemmArgs {
  ElemType type = ElemType::kFloat;  // of A, B, C and bias: kFloat, kFloat16 or kBFloat16
  bool trans_a = false;              // A is stored [K,M] (else [M,K])
  bool trans_b = false;              // B is stored [N,K] (else [K,N])
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;  // read when beta != 0; always written
  int64_t lda = 0, ldb = 0, ldc = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
  const void* bias = nullptr;  // nullable: N elements of `type`, added to every row of every batch
  bool relu = false;           // max(x, 0), after the bias
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  bool allow_tf32 = false;  // FP32 only: CUBLAS_COMPUTE_32F_FAST_TF32
};

// Owns a cuBLASLt handle, a workspace (allocated once, on the first Run, on the current device)
// and one plan per problem: the descriptors and the heuristic's algorithm, keyed by types,
// transposes, sizes, strides, batch, epilogue and operand alignment, so each shape is planned
// once. Run may be called from several threads (a mutex serialises them); the workspace is
// shared, so calls on different streams must not overlap in time on the device. The first Run,
// and the first of each new problem, must not happen during CUDA Graph capture (they allocate
// and query the heuristic): warm up first.
class Gemm {
 public:
  static constexpr size_t kDefaultWorkspaceBytes = size_t{32} << 20;

  explicit Gemm(size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Enqueues the product on `stream`. M, N or batch 0: nothing to do. K == 0 or alpha == 0:
  // C = epilogue(beta * C + bias) (beta == 0 ignores C's contents), as BLAS defines it, without
  // reading A or B.
  GemmResult Run(const GemmArgs& args, cudaStream_t stream);

  // Plans made so far (each distinct problem once).
  size_t plan_count() const;

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLASLt's (column-major) A, B
    // The heuristic's choices, best first; one cublasLtMatmul refuses is dropped for the next.
    std::vector<cublasLtMatmulAlgo_t> algos;
  };
  using PlanKey = std::array<int64_t, 19>;

  GemmResult Init();
  GemmResult MakePlan(const GemmArgs& args, Plan& plan);
  static void Destroy(Plan& plan);

  size_t workspace_bytes_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::map<PlanKey, Plan> plans_;
  mutable std::mutex mutex_;
};

// The runs of strided batches for MatMul's numpy broadcasting of batch dimensions: the output's
// batches, in order, split into as few runs as possible where A's and B's batch offsets grow by
// a constant stride (0 for a broadcast operand). Offsets and strides count matrices, not elements.
struct BatchRun {
  int64_t first = 0;  // the output batch index of the run's first product
  int64_t count = 0;
  int64_t offset_a = 0, stride_a = 0;
  int64_t offset_b = 0, stride_b = 0;
};

// batch_a and batch_b are the operands' batch dimensions (without the two matrix dimensions),
// right-aligned as numpy does; false when they do not broadcast. An output with no batch
// elements gives no runs.
bool MatMulBatchRuns(const std::vector<int64_t>& batch_a, const std::vector<int64_t>& batch_b,
                     std::vector<int64_t>& batch_out, std::vector<BatchRun>& runs);

// C = epilogue(beta * C + bias) for every batch matrix, in FP32, rounded once to `type`; beta == 0
// writes epilogue(bias) (or zeros) without reading C. Gemm::Run's K == 0 and alpha == 0 case.
cudaError_t GemmWithoutProduct(ElemType type, int64_t m, int64_t n, void* c, int64_t ldc,
                               int64_t batch, int64_t stride_c, float beta, const void* bias,
                               bool relu, cudaStream_t stream);

// out[m,n] = in[rows,cols] broadcast (rows is 1 or m, cols is 1 or n): ONNX Gemm's C, placed in
// the output before a product with beta. FP32, FP16 or BF16 (a copy of the bits).
cudaError_t BroadcastToMatrix(ElemType type, const void* in, int64_t rows, int64_t cols, void* out,
                              int64_t m, int64_t n, cudaStream_t stream);

}  // namespace ampc::cuda

#endif  // AMPC_KERNELS_CUDA_GEMM_H_
