#include "kernels/cuda/cuda_libraries.h"

#include <cublasLt.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <mutex>

namespace ampc::cuda {
namespace {

// One library, opened on first use: the first name that loads.
class Library {
 public:
  explicit Library(const char* const* names) : names_(names) {}

  bool Load(std::string* error) {
    std::call_once(once_, [this] {
      for (const char* const* name = names_; *name != nullptr; ++name) {
        handle_ = dlopen(*name, RTLD_NOW | RTLD_LOCAL);
        if (handle_ != nullptr) return;
        const char* why = dlerror();
        if (!error_.empty()) error_ += "; ";
        error_ += why != nullptr ? why : *name;
      }
    });
    if (handle_ == nullptr && error != nullptr) *error = error_;
    return handle_ != nullptr;
  }

  // The function `name`, or nullptr when the library or the function is missing.
  void* Symbol(const char* name) { return Load(nullptr) ? dlsym(handle_, name) : nullptr; }

 private:
  const char* const* names_;
  std::once_flag once_;
  void* handle_ = nullptr;
  std::string error_;
};

constexpr const char* kCublasLtNames[] = {"libcublasLt.so.13", "libcublasLt.so", nullptr};
constexpr const char* kCudnnNames[] = {"libcudnn.so.9", "libcudnn.so", nullptr};

Library& CublasLt() {
  static Library* library = new Library(kCublasLtNames);
  return *library;
}

Library& Cudnn() {
  static Library* library = new Library(kCudnnNames);
  return *library;
}

// What a call returns when its library or function is missing.
template <typename R>
R Missing();
template <>
cublasStatus_t Missing<cublasStatus_t>() {
  return CUBLAS_STATUS_NOT_INITIALIZED;
}
template <>
cudnnStatus_t Missing<cudnnStatus_t>() {
  return CUDNN_STATUS_NOT_INITIALIZED;
}
template <>
const char* Missing<const char*>() {
  return "(the library could not be loaded)";
}

}  // namespace

bool LoadCublasLt(std::string* error) { return CublasLt().Load(error); }
bool LoadCudnn(std::string* error) { return Cudnn().Load(error); }

}  // namespace ampc::cuda

// Each definition matches the library header's declaration (a mismatch does not compile) and
// calls the library's function of the same name.
#define AMPC_FORWARD(library, ret, name, params, args)                                  \
  extern "C" ret name params {                                                          \
    static auto* const fn = reinterpret_cast<decltype(&name)>(library().Symbol(#name)); \
    return fn != nullptr ? fn args : ampc::cuda::Missing<ret>();                        \
  }

AMPC_FORWARD(ampc::cuda::CublasLt, cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * handle),
             (handle))
AMPC_FORWARD(ampc::cuda::CublasLt, cublasStatus_t, cublasLtDestroy, (cublasLtHandle_t handle),
             (handle))
AMPC_FORWARD(ampc::cuda::CublasLt, const char*, cublasLtGetStatusName, (cublasStatus_t status),
             (status))
AMPC_FORWARD(ampc::cuda::CublasLt, const char*, cublasLtGetStatusString, (cublasStatus_t status),
             (status))
AMPC_FORWARD(ampc::cuda::CublasLt, cublasStatus_t, cublasLtMatmul,
             (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
              cublasLtMatrixLayout_t a_desc, const void* b, cublasLtMatrixLayout_t b_desc,
              const void* beta, const void* c, cublasLtMatrixLayout_t c_desc, void* d,
              cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t* algo, void* workspace,
              size_t workspace_bytes, cudaStream_t stream),
             (handle, desc, alpha, a, a_desc, b, b_desc, beta, c, c_desc, d, d_desc, algo,
              workspace, workspace_bytes, stream))
AMPC_FORWARD(ampc::cuda::CublasLt, cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,
             (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
              cublasLtMatmulPreference_t preference, int requested,
              cublasLtMatmulHeuristicResult_t results[], int* returned),
             (handle, desc, a, b, c, d, preference, requested, results, returned))
AMPC_FORWARD(ampc::cuda::CublasLt, cublasStatus_t, cublasLtMatmulDescCreate,
             (cublasLtMatmulDesc_t * desc, cublasComputeType_t compute, cudaDataType_t scale),
             (desc, compute, scale))
AMPC_FORWARD(ampc::cuda::CublasLt, cublasStatus_t, cublasLtMatmulDescDestroy,
             (cublasLtMatmulDesc_t desc), (desc))
AMPC_FORWARD(ampc::cuda::CublasLt, cublasStatus_t, cublasLtMatmulDescSetAttribute,
             (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf,
              size_t size),
             (desc, attr, buf, size))
AMPC_FORWARD(ampc::cuda::CublasLt, cublasStatus_t, cublasLtMatmulPreferenceCreate,
             (cublasLtMatmulPreference_t * pref), (pref))
AMPC_FORWARD(ampc::cuda::CublasLt, cublasStatus_t, cublasLtMatmulPreferenceDestroy,
             (cublasLtMatmulPreference_t pref), (pref))
AMPC_FORWARD(ampc::cuda::CublasLt, cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,
             (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
              const void* buf, size_t size),
             (pref, attr, buf, size))
AMPC_FORWARD(ampc::cuda::CublasLt, cublasStatus_t, cublasLtMatrixLayoutCreate,
             (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows, uint64_t cols,
              int64_t ld),
             (layout, type, rows, cols, ld))
AMPC_FORWARD(ampc::cuda::CublasLt, cublasStatus_t, cublasLtMatrixLayoutDestroy,
             (cublasLtMatrixLayout_t layout), (layout))
AMPC_FORWARD(ampc::cuda::CublasLt, cublasStatus_t, cublasLtMatrixLayoutSetAttribute,
             (cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr, const void* buf,
              size_t size),
             (layout, attr, buf, size))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnCreate, (cudnnHandle_t * handle), (handle))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnDestroy, (cudnnHandle_t handle), (handle))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnSetStream,
             (cudnnHandle_t handle, cudaStream_t stream), (handle, stream))
AMPC_FORWARD(ampc::cuda::Cudnn, const char*, cudnnGetErrorString, (cudnnStatus_t status), (status))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnCreateTensorDescriptor,
             (cudnnTensorDescriptor_t * desc), (desc))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnDestroyTensorDescriptor,
             (cudnnTensorDescriptor_t desc), (desc))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnSetTensorNdDescriptorEx,
             (cudnnTensorDescriptor_t desc, cudnnTensorFormat_t format, cudnnDataType_t type,
              int dims, const int dim[]),
             (desc, format, type, dims, dim))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnTransformTensor,
             (cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t x_desc,
              const void* x, const void* beta, const cudnnTensorDescriptor_t y_desc, void* y),
             (handle, alpha, x_desc, x, beta, y_desc, y))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnCreateFilterDescriptor,
             (cudnnFilterDescriptor_t * desc), (desc))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnDestroyFilterDescriptor,
             (cudnnFilterDescriptor_t desc), (desc))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnSetFilterNdDescriptor,
             (cudnnFilterDescriptor_t desc, cudnnDataType_t type, cudnnTensorFormat_t format,
              int dims, const int dim[]),
             (desc, type, format, dims, dim))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnCreateConvolutionDescriptor,
             (cudnnConvolutionDescriptor_t * desc), (desc))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnDestroyConvolutionDescriptor,
             (cudnnConvolutionDescriptor_t desc), (desc))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnSetConvolutionNdDescriptor,
             (cudnnConvolutionDescriptor_t desc, int length, const int pad[], const int stride[],
              const int dilation[], cudnnConvolutionMode_t mode, cudnnDataType_t compute),
             (desc, length, pad, stride, dilation, mode, compute))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnSetConvolutionMathType,
             (cudnnConvolutionDescriptor_t desc, cudnnMathType_t math), (desc, math))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnSetConvolutionGroupCount,
             (cudnnConvolutionDescriptor_t desc, int groups), (desc, groups))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnGetConvolutionNdForwardOutputDim,
             (const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t x,
              const cudnnFilterDescriptor_t w, int dims, int out[]),
             (conv, x, w, dims, out))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnGetConvolutionForwardAlgorithmMaxCount,
             (cudnnHandle_t handle, int* count), (handle, count))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnFindConvolutionForwardAlgorithm,
             (cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
              const cudnnFilterDescriptor_t w, const cudnnConvolutionDescriptor_t conv,
              const cudnnTensorDescriptor_t y, const int requested, int* returned,
              cudnnConvolutionFwdAlgoPerf_t* perf),
             (handle, x, w, conv, y, requested, returned, perf))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnGetConvolutionForwardAlgorithm_v7,
             (cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
              const cudnnFilterDescriptor_t w, const cudnnConvolutionDescriptor_t conv,
              const cudnnTensorDescriptor_t y, const int requested, int* returned,
              cudnnConvolutionFwdAlgoPerf_t* perf),
             (handle, x, w, conv, y, requested, returned, perf))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnGetConvolutionForwardWorkspaceSize,
             (cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
              const cudnnFilterDescriptor_t w, const cudnnConvolutionDescriptor_t conv,
              const cudnnTensorDescriptor_t y, cudnnConvolutionFwdAlgo_t algo, size_t* bytes),
             (handle, x, w, conv, y, algo, bytes))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnConvolutionForward,
             (cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t x_desc,
              const void* x, const cudnnFilterDescriptor_t w_desc, const void* w,
              const cudnnConvolutionDescriptor_t conv, cudnnConvolutionFwdAlgo_t algo,
              void* workspace, size_t workspace_bytes, const void* beta,
              const cudnnTensorDescriptor_t y_desc, void* y),
             (handle, alpha, x_desc, x, w_desc, w, conv, algo, workspace, workspace_bytes, beta,
              y_desc, y))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnGetConvolutionBackwardDataAlgorithmMaxCount,
             (cudnnHandle_t handle, int* count), (handle, count))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnFindConvolutionBackwardDataAlgorithm,
             (cudnnHandle_t handle, const cudnnFilterDescriptor_t w,
              const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t conv,
              const cudnnTensorDescriptor_t dx, const int requested, int* returned,
              cudnnConvolutionBwdDataAlgoPerf_t* perf),
             (handle, w, dy, conv, dx, requested, returned, perf))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnGetConvolutionBackwardDataAlgorithm_v7,
             (cudnnHandle_t handle, const cudnnFilterDescriptor_t w,
              const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t conv,
              const cudnnTensorDescriptor_t dx, const int requested, int* returned,
              cudnnConvolutionBwdDataAlgoPerf_t* perf),
             (handle, w, dy, conv, dx, requested, returned, perf))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnGetConvolutionBackwardDataWorkspaceSize,
             (cudnnHandle_t handle, const cudnnFilterDescriptor_t w,
              const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t conv,
              const cudnnTensorDescriptor_t dx, cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes),
             (handle, w, dy, conv, dx, algo, bytes))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnConvolutionBackwardData,
             (cudnnHandle_t handle, const void* alpha, const cudnnFilterDescriptor_t w_desc,
              const void* w, const cudnnTensorDescriptor_t dy_desc, const void* dy,
              const cudnnConvolutionDescriptor_t conv, cudnnConvolutionBwdDataAlgo_t algo,
              void* workspace, size_t workspace_bytes, const void* beta,
              const cudnnTensorDescriptor_t dx_desc, void* dx),
             (handle, alpha, w_desc, w, dy_desc, dy, conv, algo, workspace, workspace_bytes, beta,
              dx_desc, dx))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnGetConvolutionBackwardFilterAlgorithmMaxCount,
             (cudnnHandle_t handle, int* count), (handle, count))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnFindConvolutionBackwardFilterAlgorithm,
             (cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
              const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t conv,
              const cudnnFilterDescriptor_t dw, const int requested, int* returned,
              cudnnConvolutionBwdFilterAlgoPerf_t* perf),
             (handle, x, dy, conv, dw, requested, returned, perf))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnGetConvolutionBackwardFilterAlgorithm_v7,
             (cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
              const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t conv,
              const cudnnFilterDescriptor_t dw, const int requested, int* returned,
              cudnnConvolutionBwdFilterAlgoPerf_t* perf),
             (handle, x, dy, conv, dw, requested, returned, perf))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnGetConvolutionBackwardFilterWorkspaceSize,
             (cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
              const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t conv,
              const cudnnFilterDescriptor_t dw, cudnnConvolutionBwdFilterAlgo_t algo,
              size_t* bytes),
             (handle, x, dy, conv, dw, algo, bytes))
AMPC_FORWARD(ampc::cuda::Cudnn, cudnnStatus_t, cudnnConvolutionBackwardFilter,
             (cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t x_desc,
              const void* x, const cudnnTensorDescriptor_t dy_desc, const void* dy,
              const cudnnConvolutionDescriptor_t conv, cudnnConvolutionBwdFilterAlgo_t algo,
              void* workspace, size_t workspace_bytes, const void* beta,
              const cudnnFilterDescriptor_t dw_desc, void* dw),
             (handle, alpha, x_desc, x, dy_desc, dy, conv, algo, workspace, workspace_bytes, beta,
              dw_desc, dw))
