#include "kernels/cuda/cudnn_conv.h"

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cuda/cuda_libraries.h"
#include "runtime/status_macros.h"

namespace ampc::cuda {
namespace {

enum class Direction { kForward, kBackwardData, kBackwardFilter };

absl::Status Check(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudnnGetErrorString(status)));
}

cudnnDataType_t DataType(ElemType type) {
  switch (type) {
    case ElemType::kFloat16:
      return CUDNN_DATA_HALF;
    case ElemType::kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    default:
      return CUDNN_DATA_FLOAT;
  }
}

// The math type a query asks for: strict FP32 (FP32 without --tf32) never on tensor cores, which
// would round the inputs to TF32; FP32 with TF32 allowed takes cuDNN's default, which may.
cudnnMathType_t QueryMath(ElemType type, bool strict_fp32) {
  if (strict_fp32) return CUDNN_FMA_MATH;
  return type == ElemType::kFloat ? CUDNN_DEFAULT_MATH : CUDNN_TENSOR_OP_MATH;
}

struct Choice {
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace = 0;
};

// Per backend: the handle (on the backend's stream), the algorithm chosen per shape and one
// workspace buffer for all convolutions (they run in stream order, so never two at once). Used
// from the thread that runs the backend's kernels, as CudaBackend::Shared is.
struct CudnnState {
  CudnnState() = default;
  CudnnState(const CudnnState&) = delete;
  CudnnState& operator=(const CudnnState&) = delete;
  ~CudnnState() {
    if (handle != nullptr) cudnnDestroy(handle);
  }

  cudnnHandle_t handle = nullptr;
  std::map<std::vector<int>, Choice> choices;
  std::shared_ptr<Buffer> workspace;
  // Smaller workspaces it replaced, kept while a captured CUDA Graph may still use one.
  std::vector<std::shared_ptr<Buffer>> retired;
};

absl::StatusOr<CudnnState*> StateOf(CudaBackend& backend) {
  CudnnState& state = backend.Shared<CudnnState>();
  if (state.handle == nullptr) {
    if (std::string why; !cuda::LoadCudnn(&why)) {
      return absl::FailedPreconditionError(absl::StrCat("cuDNN could not be loaded: ", why));
    }
    cudnnHandle_t handle = nullptr;
    AMPC_RETURN_IF_ERROR(Check(cudnnCreate(&handle), "cudnnCreate"));
    if (absl::Status s = Check(cudnnSetStream(handle, backend.stream()), "cudnnSetStream");
        !s.ok()) {
      cudnnDestroy(handle);
      return s;
    }
    state.handle = handle;
  }
  return &state;
}

absl::StatusOr<void*> Workspace(CudaBackend& backend, CudnnState& state, size_t bytes) {
  if (bytes == 0) return nullptr;
  if (state.workspace == nullptr || state.workspace->bytes() < bytes) {
    if (backend.live_captures() == 0) state.retired.clear();
    if (state.workspace != nullptr) state.retired.push_back(std::move(state.workspace));
    AMPC_ASSIGN_OR_RETURN(state.workspace, backend.Allocate(bytes));
  }
  return state.workspace->data();
}

// The four descriptors of one convolution, destroyed with this object.
class Descriptors {
 public:
  Descriptors() = default;
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  ~Descriptors() {
    if (x != nullptr) cudnnDestroyTensorDescriptor(x);
    if (y != nullptr) cudnnDestroyTensorDescriptor(y);
    if (w != nullptr) cudnnDestroyFilterDescriptor(w);
    if (conv != nullptr) cudnnDestroyConvolutionDescriptor(conv);
  }

  absl::Status Set(const CudnnConvShape& s, bool strict_fp32) {
    const int dims = s.spatial + 2;
    const cudnnDataType_t type = DataType(s.type);
    AMPC_RETURN_IF_ERROR(Check(cudnnCreateTensorDescriptor(&x), "cudnnCreateTensorDescriptor"));
    AMPC_RETURN_IF_ERROR(Check(cudnnCreateTensorDescriptor(&y), "cudnnCreateTensorDescriptor"));
    AMPC_RETURN_IF_ERROR(Check(cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor"));
    AMPC_RETURN_IF_ERROR(
        Check(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor"));
    AMPC_RETURN_IF_ERROR(
        Check(cudnnSetTensorNdDescriptorEx(x, CUDNN_TENSOR_NCHW, type, dims, s.x.data()),
              "cudnnSetTensorNdDescriptorEx (x)"));
    AMPC_RETURN_IF_ERROR(
        Check(cudnnSetTensorNdDescriptorEx(y, CUDNN_TENSOR_NCHW, type, dims, s.y.data()),
              "cudnnSetTensorNdDescriptorEx (y)"));
    AMPC_RETURN_IF_ERROR(
        Check(cudnnSetFilterNdDescriptor(w, type, CUDNN_TENSOR_NCHW, dims, s.w.data()),
              "cudnnSetFilterNdDescriptor"));
    AMPC_RETURN_IF_ERROR(Check(cudnnSetConvolutionNdDescriptor(
                                   conv, s.spatial, s.pads.data(), s.strides.data(),
                                   s.dilations.data(), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                               "cudnnSetConvolutionNdDescriptor"));
    AMPC_RETURN_IF_ERROR(
        Check(cudnnSetConvolutionGroupCount(conv, s.group), "cudnnSetConvolutionGroupCount"));
    return SetMath(QueryMath(s.type, strict_fp32));
  }

  absl::Status SetMath(cudnnMathType_t math) {
    return Check(cudnnSetConvolutionMathType(conv, math), "cudnnSetConvolutionMathType");
  }

  // Internal when cuDNN computes other output dims than the plan's (a bug in PlanCudnnConv).
  absl::Status CheckOutput(const CudnnConvShape& s) const {
    std::array<int, 5> dims{};
    AMPC_RETURN_IF_ERROR(
        Check(cudnnGetConvolutionNdForwardOutputDim(conv, x, w, s.spatial + 2, dims.data()),
              "cudnnGetConvolutionNdForwardOutputDim"));
    if (dims == s.y) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("cuDNN computes output dims [",
                                            absl::StrJoin(dims, ","), "], the plan [",
                                            absl::StrJoin(s.y, ","), "] (an ampc bug)"));
  }

  cudnnTensorDescriptor_t x = nullptr;
  cudnnTensorDescriptor_t y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
};

std::vector<int> KeyOf(Direction direction, const CudnnConvShape& s, bool strict_fp32) {
  std::vector<int> key = {static_cast<int>(direction), static_cast<int>(s.type), strict_fp32,
                          s.spatial, s.group};
  for (const std::array<int, 5>* dims : {&s.x, &s.w, &s.y}) {
    key.insert(key.end(), dims->begin(), dims->end());
  }
  for (const std::array<int, 3>* values : {&s.pads, &s.strides, &s.dilations}) {
    key.insert(key.end(), values->begin(), values->end());
  }
  return key;
}

// A ranked result this backend may run: it works, fits the workspace cap, for strict FP32 does
// not use tensor cores, and, when `deterministic`, gives the same result on every run.
template <typename Perf>
bool Acceptable(const Perf& perf, bool strict_fp32, bool deterministic) {
  const bool tensor_ops = perf.mathType == CUDNN_TENSOR_OP_MATH ||
                          perf.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
  return perf.status == CUDNN_STATUS_SUCCESS && perf.memory <= kMaxCudnnWorkspace &&
         !(strict_fp32 && tensor_ops) &&
         (!deterministic || perf.determinism == CUDNN_DETERMINISTIC);
}

// The first acceptable result of cuDNN's ranking (`get`: cudnnFind*Algorithm, which times every
// algorithm on the device, fastest first, as PyTorch's cudnn.benchmark does; where it fails,
// e.g. for want of memory for its own buffers, the heuristic ranking of cudnnGet*Algorithm_v7)
// whose workspace (`workspace_of`: the cudnnGet*WorkspaceSize call) is within the cap: a
// deterministic one if cuDNN has any (the backward ALGO_0 and ALGO_3 add with atomics), else the
// fastest other. Timing picks per process: two processes may choose different algorithms for a
// shape, and their results may then differ in the last bits.
template <typename Perf, typename Get, typename WorkspaceOf>
absl::StatusOr<Choice> Rank(Descriptors& d, bool strict_fp32, int max_count, Get get,
                            WorkspaceOf workspace_of) {
  std::vector<Perf> perf(static_cast<size_t>(std::max(max_count, 1)));
  int returned = 0;
  AMPC_RETURN_IF_ERROR(
      Check(get(static_cast<int>(perf.size()), &returned, perf.data()),
            "cudnnFindConvolution*Algorithm and cudnnGetConvolution*Algorithm_v7"));
  // An allocation cudnnFind* failed must not surface as the next kernel launch's error.
  cudaGetLastError();
  for (const bool deterministic : {true, false}) {
    for (int i = 0; i < returned; ++i) {
      if (!Acceptable(perf[i], strict_fp32, deterministic)) continue;
      Choice choice{static_cast<int>(perf[i].algo), strict_fp32 ? CUDNN_FMA_MATH : perf[i].mathType,
                    0};
      AMPC_RETURN_IF_ERROR(d.SetMath(choice.math));
      if (workspace_of(perf[i].algo, &choice.workspace) != CUDNN_STATUS_SUCCESS ||
          choice.workspace > kMaxCudnnWorkspace) {
        continue;
      }
      return choice;
    }
  }
  return absl::UnimplementedError(absl::StrCat("cuDNN offers no algorithm within ",
                                               kMaxCudnnWorkspace >> 20,
                                               " MiB of workspace for this convolution"));
}

absl::StatusOr<Choice> Choose(cudnnHandle_t h, Direction direction, Descriptors& d,
                              bool strict_fp32) {
  int max_count = 0;
  switch (direction) {
    case Direction::kForward:
      AMPC_RETURN_IF_ERROR(Check(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_count),
                                 "cudnnGetConvolutionForwardAlgorithmMaxCount"));
      return Rank<cudnnConvolutionFwdAlgoPerf_t>(
          d, strict_fp32, max_count,
          [&](int n, int* returned, cudnnConvolutionFwdAlgoPerf_t* perf) {
            const cudnnStatus_t found =
                cudnnFindConvolutionForwardAlgorithm(h, d.x, d.w, d.conv, d.y, n, returned, perf);
            return found == CUDNN_STATUS_SUCCESS ? found
                                                 : cudnnGetConvolutionForwardAlgorithm_v7(
                                                       h, d.x, d.w, d.conv, d.y, n, returned, perf);
          },
          [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
            return cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, algo, bytes);
          });
    case Direction::kBackwardData:
      AMPC_RETURN_IF_ERROR(Check(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max_count),
                                 "cudnnGetConvolutionBackwardDataAlgorithmMaxCount"));
      return Rank<cudnnConvolutionBwdDataAlgoPerf_t>(
          d, strict_fp32, max_count,
          [&](int n, int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
            const cudnnStatus_t found = cudnnFindConvolutionBackwardDataAlgorithm(
                h, d.w, d.y, d.conv, d.x, n, returned, perf);
            return found == CUDNN_STATUS_SUCCESS ? found
                                                 : cudnnGetConvolutionBackwardDataAlgorithm_v7(
                                                       h, d.w, d.y, d.conv, d.x, n, returned, perf);
          },
          [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
            return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, algo,
                                                                bytes);
          });
    case Direction::kBackwardFilter:
      AMPC_RETURN_IF_ERROR(Check(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max_count),
                                 "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount"));
      return Rank<cudnnConvolutionBwdFilterAlgoPerf_t>(
          d, strict_fp32, max_count,
          [&](int n, int* returned, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
            const cudnnStatus_t found = cudnnFindConvolutionBackwardFilterAlgorithm(
                h, d.x, d.y, d.conv, d.w, n, returned, perf);
            return found == CUDNN_STATUS_SUCCESS ? found
                                                 : cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                                                       h, d.x, d.y, d.conv, d.w, n, returned, perf);
          },
          [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
            return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, algo,
                                                                  bytes);
          });
  }
  return absl::InternalError("unknown convolution direction");
}

// Everything a call needs: state, descriptors with the chosen math type, the algorithm and its
// workspace. The algorithm is chosen on a shape's first call only.
struct Prepared {
  CudnnState* state = nullptr;
  Descriptors d;
  Choice choice;
  void* workspace = nullptr;
};

absl::Status Prepare(CudaBackend& backend, Direction direction, const CudnnConvShape& shape,
                     Prepared& p) {
  AMPC_ASSIGN_OR_RETURN(p.state, StateOf(backend));
  const bool strict_fp32 = shape.type == ElemType::kFloat && !backend.allow_tf32();
  AMPC_RETURN_IF_ERROR(p.d.Set(shape, strict_fp32));
  const std::vector<int> key = KeyOf(direction, shape, strict_fp32);
  auto it = p.state->choices.find(key);
  if (it == p.state->choices.end()) {
    AMPC_RETURN_IF_ERROR(p.d.CheckOutput(shape));
    AMPC_ASSIGN_OR_RETURN(const Choice choice,
                          Choose(p.state->handle, direction, p.d, strict_fp32));
    it = p.state->choices.emplace(key, choice).first;
  }
  p.choice = it->second;
  AMPC_RETURN_IF_ERROR(p.d.SetMath(p.choice.math));
  AMPC_ASSIGN_OR_RETURN(p.workspace, Workspace(backend, *p.state, p.choice.workspace));
  return absl::OkStatus();
}

// cuDNN indexes with int: every dim and every tensor's element count must stay below 2^31.
absl::Status ToInts(const std::vector<int64_t>& dims, std::array<int, 5>& out, const char* name) {
  int64_t count = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    count *= dims[i];
    if (dims[i] > std::numeric_limits<int>::max() || count > std::numeric_limits<int>::max()) {
      return absl::InvalidArgumentError(absl::StrCat(name, " [", absl::StrJoin(dims, ","),
                                                     "] has 2^31 or more elements, more than cuDNN "
                                                     "convolutions index"));
    }
    out[i] = static_cast<int>(dims[i]);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CudnnConvPlan> PlanCudnnConv(const Shape& x, const Shape& w,
                                            const linalg::ConvGeometry& g, ElemType type) {
  if (g.rank < 1 || g.rank > 3) {
    return absl::UnimplementedError(
        absl::StrCat("convolutions on the GPU take 1 to 3 spatial dims, this one has ", g.rank));
  }
  CudnnConvPlan plan;
  CudnnConvShape& c = plan.cudnn;
  const int lift = g.rank == 1 ? 1 : 0;  // a 1-D convolution as a 2-D one of height 1
  c.type = type;
  c.spatial = g.rank + lift;
  c.group = static_cast<int>(g.group);
  // Per cuDNN spatial axis: input, kernel, output, stride, dilation, begin padding.
  struct Axis {
    int64_t in = 1, kernel = 1, out = 1, stride = 1, dilation = 1, pad = 0;
  };
  std::vector<Axis> axes(c.spatial);
  for (int d = lift; d < c.spatial; ++d) {
    const int s = d - lift;
    axes[d] = {g.input[s], g.kernel[s], g.output[s], g.strides[s], g.dilations[s], g.pad_begin[s]};
  }
  for (const Axis& a : axes) {
    const int64_t extent = (a.kernel - 1) * a.dilation + 1, padded = a.in + 2 * a.pad;
    if (padded < extent || (padded - extent) / a.stride + 1 != a.out) plan.explicit_pad = true;
  }
  std::vector<int64_t> xd = {x[0], x[1]}, wd = {w[0], w[1]}, yd = {x[0], w[0]};
  for (int d = 0; d < c.spatial; ++d) {
    const Axis& a = axes[d];
    const int64_t extent = (a.kernel - 1) * a.dilation + 1;
    const int64_t in = plan.explicit_pad ? (a.out - 1) * a.stride + extent : a.in;
    xd.push_back(in);
    wd.push_back(a.kernel);
    yd.push_back(a.out);
    const int64_t pad = plan.explicit_pad ? 0 : a.pad;
    if (pad > std::numeric_limits<int>::max() || a.stride > std::numeric_limits<int>::max() ||
        a.dilation > std::numeric_limits<int>::max()) {
      return absl::InvalidArgumentError("a pad, stride or dilation of 2^31 or more");
    }
    c.pads[d] = static_cast<int>(pad);
    c.strides[d] = static_cast<int>(a.stride);
    c.dilations[d] = static_cast<int>(a.dilation);
    const int copy_axis = 3 - c.spatial + d;
    plan.x_dims[copy_axis] = a.in;
    plan.padded_dims[copy_axis] = in;
    plan.shift[copy_axis] = a.pad;
  }
  AMPC_RETURN_IF_ERROR(ToInts(xd, c.x, plan.explicit_pad ? "padded X" : "X"));
  AMPC_RETURN_IF_ERROR(ToInts(wd, c.w, "W"));
  AMPC_RETURN_IF_ERROR(ToInts(yd, c.y, "Y"));
  return plan;
}

absl::Status CudnnConvForward(CudaBackend& backend, const CudnnConvShape& shape, const void* x,
                              const void* w, void* y) {
  Prepared p;
  AMPC_RETURN_IF_ERROR(Prepare(backend, Direction::kForward, shape, p));
  const float one = 1, zero = 0;
  return Check(cudnnConvolutionForward(p.state->handle, &one, p.d.x, x, p.d.w, w, p.d.conv,
                                       static_cast<cudnnConvolutionFwdAlgo_t>(p.choice.algo),
                                       p.workspace, p.choice.workspace, &zero, p.d.y, y),
               "cudnnConvolutionForward");
}

absl::Status CudnnConvBackwardData(CudaBackend& backend, const CudnnConvShape& shape, const void* w,
                                   const void* dy, void* dx) {
  Prepared p;
  AMPC_RETURN_IF_ERROR(Prepare(backend, Direction::kBackwardData, shape, p));
  const float one = 1, zero = 0;
  return Check(
      cudnnConvolutionBackwardData(p.state->handle, &one, p.d.w, w, p.d.y, dy, p.d.conv,
                                   static_cast<cudnnConvolutionBwdDataAlgo_t>(p.choice.algo),
                                   p.workspace, p.choice.workspace, &zero, p.d.x, dx),
      "cudnnConvolutionBackwardData");
}

absl::Status CudnnConvBackwardFilter(CudaBackend& backend, const CudnnConvShape& shape,
                                     const void* x, const void* dy, void* dw) {
  Prepared p;
  AMPC_RETURN_IF_ERROR(Prepare(backend, Direction::kBackwardFilter, shape, p));
  const float one = 1, zero = 0;
  return Check(
      cudnnConvolutionBackwardFilter(p.state->handle, &one, p.d.x, x, p.d.y, dy, p.d.conv,
                                     static_cast<cudnnConvolutionBwdFilterAlgo_t>(p.choice.algo),
                                     p.workspace, p.choice.workspace, &zero, p.d.w, dw),
      "cudnnConvolutionBackwardFilter");
}

}  // namespace ampc::cuda
