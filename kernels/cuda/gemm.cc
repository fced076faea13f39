#include "kernels/cuda/gemm.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_libraries.h"

namespace ampc::cuda {
namespace {

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

const char* TypeName(ElemType type) {
  switch (type) {
    case ElemType::kFloat:
      return "FP32";
    case ElemType::kFloat16:
      return "FP16";
    case ElemType::kBFloat16:
      return "BF16";
    default:
      return "unsupported-type";
  }
}

bool DataTypeOf(ElemType type, cudaDataType_t* out) {
  switch (type) {
    case ElemType::kFloat:
      *out = CUDA_R_32F;
      return true;
    case ElemType::kFloat16:
      *out = CUDA_R_16F;
      return true;
    case ElemType::kBFloat16:
      *out = CUDA_R_16BF;
      return true;
    default:
      return false;
  }
}

std::string Describe(const GemmArgs& a) {
  std::string s = std::string(TypeName(a.type)) + " GEMM M=" + std::to_string(a.m) +
                  " N=" + std::to_string(a.n) + " K=" + std::to_string(a.k) +
                  " transA=" + (a.trans_a ? "1" : "0") + " transB=" + (a.trans_b ? "1" : "0") +
                  " lda=" + std::to_string(a.lda) + " ldb=" + std::to_string(a.ldb) +
                  " ldc=" + std::to_string(a.ldc) + " batch=" + std::to_string(a.batch);
  if (a.batch > 1) {
    s += " strides=" + std::to_string(a.stride_a) + "," + std::to_string(a.stride_b) + "," +
         std::to_string(a.stride_c);
  }
  if (a.bias != nullptr) s += " +bias";
  if (a.relu) s += " relu";
  if (a.allow_tf32 && a.type == ElemType::kFloat) s += " tf32";
  return s;
}

GemmResult CublasError(const char* call, cublasStatus_t status, const GemmArgs& args) {
  return GemmResult::Error(std::string(call) + " failed with " + cublasLtGetStatusName(status) +
                           " (" + cublasLtGetStatusString(status) + ") for " + Describe(args));
}

GemmResult CudaError(const char* call, cudaError_t error, const GemmArgs& args) {
  return GemmResult::Error(std::string(call) + " failed with " + cudaGetErrorName(error) + " (" +
                           cudaGetErrorString(error) + ") for " + Describe(args));
}

// The largest power of two dividing the address, at most 256 (cuBLASLt's default assumption):
// what the heuristic may rely on.
int64_t AlignmentOf(const void* p) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  if (address == 0) return 256;
  return static_cast<int64_t>(std::min<uintptr_t>(address & (~address + 1), 256));
}

cublasLtEpilogue_t EpilogueOf(const GemmArgs& a) {
  if (a.bias != nullptr) return a.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  return a.relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT;
}

// Packed leading dimensions filled in; strides are meaningless for one matrix and become 0.
GemmArgs Normalized(GemmArgs a) {
  if (a.lda == 0) a.lda = a.trans_a ? a.m : a.k;
  if (a.ldb == 0) a.ldb = a.trans_b ? a.k : a.n;
  if (a.ldc == 0) a.ldc = a.n;
  if (a.batch == 1) a.stride_a = a.stride_b = a.stride_c = 0;
  if (a.type != ElemType::kFloat) a.allow_tf32 = false;
  return a;
}

// What is wrong with the arguments; empty when nothing is.
std::string Problem(const GemmArgs& a) {
  cudaDataType_t unused = CUDA_R_32F;
  if (!DataTypeOf(a.type, &unused)) {
    return "element type " + std::to_string(static_cast<int>(a.type)) +
           " is not FP32, FP16 or BF16";
  }
  if (a.m < 0 || a.n < 0 || a.k < 0 || a.batch < 0) return "a size is negative";
  if (a.m > kMaxInt32 || a.n > kMaxInt32 || a.k > kMaxInt32 || a.batch > kMaxInt32) {
    return "a size exceeds 2^31-1";
  }
  if (a.lda < (a.trans_a ? a.m : a.k) || a.ldb < (a.trans_b ? a.k : a.n) || a.ldc < a.n) {
    return "a leading dimension is shorter than its matrix's rows";
  }
  if (a.stride_a < 0 || a.stride_b < 0 || a.stride_c < 0) return "a batch stride is negative";
  if (a.batch > 1 && a.m > 0 && a.stride_c < (a.m - 1) * a.ldc + a.n) {
    return "the batch's output matrices overlap";
  }
  if (a.c == nullptr) return "C is null";
  if (a.k > 0 && a.alpha != 0.0f && (a.a == nullptr || a.b == nullptr)) return "A or B is null";
  return "";
}

// Sets a descriptor attribute from a variable of the attribute's type.
template <typename T>
cublasStatus_t SetOp(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                     const T& value) {
  return cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value));
}

template <typename T>
cublasStatus_t SetLayout(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attribute,
                         const T& value) {
  return cublasLtMatrixLayoutSetAttribute(layout, attribute, &value, sizeof(value));
}

template <typename T>
cublasStatus_t SetPreference(cublasLtMatmulPreference_t preference,
                             cublasLtMatmulPreferenceAttributes_t attribute, const T& value) {
  return cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value));
}

// A column-major layout of rows x cols with leading dimension ld, `batch` of them `stride` apart.
cublasStatus_t MakeLayout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                          int64_t batch, int64_t stride, cublasLtMatrixLayout_t* layout) {
  cublasStatus_t status = cublasLtMatrixLayoutCreate(layout, type, static_cast<uint64_t>(rows),
                                                     static_cast<uint64_t>(cols), ld);
  if (status != CUBLAS_STATUS_SUCCESS || batch == 1) return status;
  status = SetLayout(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, static_cast<int32_t>(batch));
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  return SetLayout(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride);
}

}  // namespace

Gemm::Gemm(size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {}

Gemm::~Gemm() {
  for (auto& [key, plan] : plans_) Destroy(plan);
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

size_t Gemm::plan_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plans_.size();
}

void Gemm::Destroy(Plan& plan) {
  if (plan.a != nullptr) cublasLtMatrixLayoutDestroy(plan.a);
  if (plan.b != nullptr) cublasLtMatrixLayoutDestroy(plan.b);
  if (plan.c != nullptr) cublasLtMatrixLayoutDestroy(plan.c);
  if (plan.op != nullptr) cublasLtMatmulDescDestroy(plan.op);
  plan = Plan{};
}

// Heuristic results kept per plan: fallbacks for one cublasLtMatmul refuses.
constexpr int kAlgorithms = 4;

GemmResult Gemm::Init() {
  if (handle_ != nullptr) return {};
  if (std::string why; !LoadCublasLt(&why)) {
    return GemmResult::Error("cuBLASLt could not be loaded: " + why);
  }
  if (cublasStatus_t status = cublasLtCreate(&handle_); status != CUBLAS_STATUS_SUCCESS) {
    handle_ = nullptr;
    return GemmResult::Error(std::string("cublasLtCreate failed with ") +
                             cublasLtGetStatusName(status) + " (" +
                             cublasLtGetStatusString(status) + ")");
  }
  if (workspace_bytes_ > 0) {
    if (cudaError_t error = cudaMalloc(&workspace_, workspace_bytes_); error != cudaSuccess) {
      cudaGetLastError();  // not sticky: later calls should not see it
      cublasLtDestroy(handle_);
      handle_ = nullptr;
      workspace_ = nullptr;
      return GemmResult::Error("cudaMalloc of the " + std::to_string(workspace_bytes_) +
                               "-byte cuBLASLt workspace failed with " + cudaGetErrorName(error));
    }
  }
  return {};
}

// cuBLASLt is column-major: the row-major product C = op(A) op(B) is computed as the column-major
// C^T = op(B)^T op(A)^T, whose "A" is our B and whose "B" is our A, each read with the same
// leading dimension and transpose flag.
GemmResult Gemm::MakePlan(const GemmArgs& args, Plan& plan) {
  cudaDataType_t type = CUDA_R_32F;  // Problem() accepted args.type
  DataTypeOf(args.type, &type);
  const cublasComputeType_t compute =
      args.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  cublasStatus_t status = cublasLtMatmulDescCreate(&plan.op, compute, CUDA_R_32F);
  if (status != CUBLAS_STATUS_SUCCESS) return CublasError("cublasLtMatmulDescCreate", status, args);
  const cublasOperation_t trans_a = args.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t trans_b = args.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  status = SetOp(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, trans_a);
  if (status == CUBLAS_STATUS_SUCCESS)
    status = SetOp(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, trans_b);
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = SetOp(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, EpilogueOf(args));
  }
  // The heuristic reads the bias pointer's alignment; Run sets each call's pointer.
  if (status == CUBLAS_STATUS_SUCCESS && args.bias != nullptr) {
    status = SetOp(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, args.bias);
  }
  if (status != CUBLAS_STATUS_SUCCESS) {
    return CublasError("cublasLtMatmulDescSetAttribute", status, args);
  }

  const int64_t m = args.m, n = args.n, k = args.k, batch = args.batch;
  status = MakeLayout(type, args.trans_b ? k : n, args.trans_b ? n : k, args.ldb, batch,
                      args.stride_b, &plan.a);
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = MakeLayout(type, args.trans_a ? m : k, args.trans_a ? k : m, args.lda, batch,
                        args.stride_a, &plan.b);
  }
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = MakeLayout(type, n, m, args.ldc, batch, args.stride_c, &plan.c);
  }
  if (status != CUBLAS_STATUS_SUCCESS) return CublasError("cublasLtMatrixLayout", status, args);

  cublasLtMatmulPreference_t preference = nullptr;
  status = cublasLtMatmulPreferenceCreate(&preference);
  if (status != CUBLAS_STATUS_SUCCESS) {
    return CublasError("cublasLtMatmulPreferenceCreate", status, args);
  }
  // Split-K partial sums in FP32 only: INPLACE and OUTPUT_TYPE would add them in FP16/BF16.
  const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  const uint64_t workspace = workspace_bytes_;
  status = SetPreference(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace);
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = SetPreference(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, reduction);
  }
  const std::pair<cublasLtMatmulPreferenceAttributes_t, const void*> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, args.b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, args.a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, args.c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, args.c}};
  for (const auto& [attribute, pointer] : alignments) {
    if (status != CUBLAS_STATUS_SUCCESS) break;
    status = SetPreference(preference, attribute, static_cast<uint32_t>(AlignmentOf(pointer)));
  }
  cublasLtMatmulHeuristicResult_t results[kAlgorithms] = {};
  int returned = 0;
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmulAlgoGetHeuristic(handle_, plan.op, plan.a, plan.b, plan.c, plan.c,
                                            preference, kAlgorithms, results, &returned);
    if (status != CUBLAS_STATUS_SUCCESS) {
      cublasLtMatmulPreferenceDestroy(preference);
      return CublasError("cublasLtMatmulAlgoGetHeuristic", status, args);
    }
  }
  cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS) {
    return CublasError("cublasLtMatmulPreferenceSetAttribute", status, args);
  }
  if (returned == 0) {
    return CublasError("cublasLtMatmulAlgoGetHeuristic (no algorithm)", CUBLAS_STATUS_NOT_SUPPORTED,
                       args);
  }
  for (int i = 0; i < returned; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS) plan.algos.push_back(results[i].algo);
  }
  if (plan.algos.empty()) {
    return CublasError("cublasLtMatmulAlgoGetHeuristic (no usable algorithm)",
                       CUBLAS_STATUS_NOT_SUPPORTED, args);
  }
  return {};
}

GemmResult Gemm::Run(const GemmArgs& given, cudaStream_t stream) {
  const GemmArgs args = Normalized(given);
  if (std::string problem = Problem(args); !problem.empty()) {
    return GemmResult::Error("Gemm::Run: " + problem + " (" + Describe(args) + ")");
  }
  if (args.m == 0 || args.n == 0 || args.batch == 0) return {};
  if (args.k == 0 || args.alpha == 0.0f) {
    const cudaError_t error =
        GemmWithoutProduct(args.type, args.m, args.n, args.c, args.ldc, args.batch, args.stride_c,
                           args.beta, args.bias, args.relu, stream);
    if (error != cudaSuccess) return CudaError("GemmWithoutProduct", error, args);
    return {};
  }

  std::lock_guard<std::mutex> lock(mutex_);
  if (GemmResult init = Init(); !init.ok) return init;
  const PlanKey key = {static_cast<int64_t>(args.type),
                       args.trans_a,
                       args.trans_b,
                       args.allow_tf32,
                       args.m,
                       args.n,
                       args.k,
                       args.lda,
                       args.ldb,
                       args.ldc,
                       args.batch,
                       args.stride_a,
                       args.stride_b,
                       args.stride_c,
                       static_cast<int64_t>(EpilogueOf(args)),
                       AlignmentOf(args.a),
                       AlignmentOf(args.b),
                       AlignmentOf(args.c),
                       args.bias != nullptr ? AlignmentOf(args.bias) : 0};
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    Plan plan;
    if (GemmResult made = MakePlan(args, plan); !made.ok) {
      Destroy(plan);
      return made;
    }
    it = plans_.emplace(key, plan).first;
  }
  Plan& plan = it->second;
  if (args.bias != nullptr) {
    const cublasStatus_t status = SetOp(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, args.bias);
    if (status != CUBLAS_STATUS_SUCCESS) {
      return CublasError("cublasLtMatmulDescSetAttribute(BIAS_POINTER)", status, args);
    }
  }
  const float alpha = args.alpha, beta = args.beta;
  cublasStatus_t status = CUBLAS_STATUS_NOT_SUPPORTED;
  while (!plan.algos.empty()) {
    status = cublasLtMatmul(handle_, plan.op, &alpha, args.b, plan.a, args.a, plan.b, &beta, args.c,
                            plan.c, args.c, plan.c, &plan.algos.front(), workspace_,
                            workspace_bytes_, stream);
    // A refused algorithm launched nothing: the next one may take the problem.
    if (status != CUBLAS_STATUS_NOT_SUPPORTED && status != CUBLAS_STATUS_INVALID_VALUE) break;
    plan.algos.erase(plan.algos.begin());
  }
  if (status != CUBLAS_STATUS_SUCCESS) return CublasError("cublasLtMatmul", status, args);
  return {};
}

bool MatMulBatchRuns(const std::vector<int64_t>& batch_a, const std::vector<int64_t>& batch_b,
                     std::vector<int64_t>& batch_out, std::vector<BatchRun>& runs) {
  const size_t rank = std::max(batch_a.size(), batch_b.size());
  // Right-aligned dimensions, 1 where an operand has fewer.
  std::vector<int64_t> da(rank, 1), db(rank, 1);
  std::copy(batch_a.begin(), batch_a.end(), da.begin() + (rank - batch_a.size()));
  std::copy(batch_b.begin(), batch_b.end(), db.begin() + (rank - batch_b.size()));
  batch_out.assign(rank, 1);
  for (size_t d = 0; d < rank; ++d) {
    if (da[d] != db[d] && da[d] != 1 && db[d] != 1) return false;
    batch_out[d] = da[d] == 1 ? db[d] : da[d];
  }
  runs.clear();
  int64_t total = 1;
  for (int64_t d : batch_out) total *= d;
  if (total == 0) return true;
  // Each operand's stride (in matrices) per output dimension: 0 where it broadcasts.
  std::vector<int64_t> sa(rank, 0), sb(rank, 0);
  for (int64_t d = static_cast<int64_t>(rank) - 1, step_a = 1, step_b = 1; d >= 0; --d) {
    sa[d] = da[d] == 1 ? 0 : step_a;
    sb[d] = db[d] == 1 ? 0 : step_b;
    step_a *= da[d];
    step_b *= db[d];
  }
  std::vector<int64_t> index(rank, 0);
  int64_t offset_a = 0, offset_b = 0;
  for (int64_t i = 0; i < total; ++i) {
    BatchRun* run = runs.empty() ? nullptr : &runs.back();
    if (run != nullptr && run->count == 1 && offset_a >= run->offset_a &&
        offset_b >= run->offset_b) {
      run->stride_a = offset_a - run->offset_a;
      run->stride_b = offset_b - run->offset_b;
      run->count = 2;
    } else if (run != nullptr && run->count > 1 &&
               offset_a == run->offset_a + run->count * run->stride_a &&
               offset_b == run->offset_b + run->count * run->stride_b) {
      ++run->count;
    } else {
      runs.push_back(BatchRun{i, 1, offset_a, 0, offset_b, 0});
    }
    // The next output index, odometer style, and the operands' offsets with it.
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
      offset_a += sa[d];
      offset_b += sb[d];
      if (++index[d] < batch_out[d]) break;
      offset_a -= sa[d] * batch_out[d];
      offset_b -= sb[d] * batch_out[d];
      index[d] = 0;
    }
  }
  return true;
}

}  // namespace ampc::cuda
