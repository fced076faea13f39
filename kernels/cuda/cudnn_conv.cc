#include "kernels/cuda/cudnn_conv.h"

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cuda/broadcast_plan.h"
#include "kernels/cuda/cuda_libraries.h"
#include "kernels/cuda/elementwise.h"
#include "passes/graph/status_macros.h"

namespace ampc::cuda {
namespace {

enum class Direction { kForward, kBackwardData, kBackwardFilter };

// The memory order of X, Y (N, C, spatial... or N, spatial..., C) and W (K, C, spatial... or K,
// spatial..., C) as cuDNN runs a convolution; tensors outside stay NCHW.
enum class Layout { kNchw, kNhwc };

cudnnTensorFormat_t FormatOf(Layout layout) {
  return layout == Layout::kNhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
}

// AMPC_CUDNN_LAYOUT=nchw or nhwc makes every FP16/BF16 convolution run in that layout (nhwc: an
// error where cuDNN cannot run one so; for tests, and nchw a way around a cuDNN problem in NHWC);
// otherwise each shape takes the faster, timed once.
enum class LayoutMode { kTimed, kNchw, kNhwc };

LayoutMode LayoutModeFromEnvironment() {
  const char* value = std::getenv("AMPC_CUDNN_LAYOUT");
  if (value == nullptr) return LayoutMode::kTimed;
  const std::string mode = value;
  if (mode == "nchw") return LayoutMode::kNchw;
  return mode == "nhwc" ? LayoutMode::kNhwc : LayoutMode::kTimed;
}

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
  Layout layout = Layout::kNchw;
  float ms = -1;  // cuDNN's time for the algorithm, where it timed them (else -1)
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

  absl::Status Set(const CudnnConvShape& s, bool strict_fp32, Layout layout) {
    const cudnnTensorFormat_t format = FormatOf(layout);
    const int dims = s.spatial + 2;
    const cudnnDataType_t type = DataType(s.type);
    AMPC_RETURN_IF_ERROR(Check(cudnnCreateTensorDescriptor(&x), "cudnnCreateTensorDescriptor"));
    AMPC_RETURN_IF_ERROR(Check(cudnnCreateTensorDescriptor(&y), "cudnnCreateTensorDescriptor"));
    AMPC_RETURN_IF_ERROR(Check(cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor"));
    AMPC_RETURN_IF_ERROR(
        Check(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor"));
    AMPC_RETURN_IF_ERROR(Check(cudnnSetTensorNdDescriptorEx(x, format, type, dims, s.x.data()),
                               "cudnnSetTensorNdDescriptorEx (x)"));
    AMPC_RETURN_IF_ERROR(Check(cudnnSetTensorNdDescriptorEx(y, format, type, dims, s.y.data()),
                               "cudnnSetTensorNdDescriptorEx (y)"));
    AMPC_RETURN_IF_ERROR(Check(cudnnSetFilterNdDescriptor(w, type, format, dims, s.w.data()),
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

std::vector<int> KeyOf(Direction direction, const CudnnConvShape& s, bool strict_fp32,
                       LayoutMode mode) {
  std::vector<int> key = {
      static_cast<int>(direction), static_cast<int>(s.type), strict_fp32, s.spatial, s.group,
      static_cast<int>(mode)};
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
// `timed` is set by `get`: whether cuDNN timed the algorithms (cudnnFind*).
template <typename Perf, typename Get, typename WorkspaceOf>
absl::StatusOr<Choice> Rank(Descriptors& d, bool strict_fp32, int max_count, Get get,
                            WorkspaceOf workspace_of, const bool& timed) {
  std::vector<Perf> perf(static_cast<size_t>(std::max(max_count, 1)));
  int returned = 0;
  const cudnnStatus_t found = get(static_cast<int>(perf.size()), &returned, perf.data());
  // An allocation cudnnFind* failed must not surface as the next kernel launch's error.
  cudaGetLastError();
  AMPC_RETURN_IF_ERROR(
      Check(found, "cudnnFindConvolution*Algorithm and cudnnGetConvolution*Algorithm_v7"));
  for (const bool deterministic : {true, false}) {
    for (int i = 0; i < returned; ++i) {
      if (!Acceptable(perf[i], strict_fp32, deterministic)) continue;
      Choice choice{static_cast<int>(perf[i].algo), strict_fp32 ? CUDNN_FMA_MATH : perf[i].mathType,
                    0, Layout::kNchw, timed ? perf[i].time : -1.0f};
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
  bool timed = false;
  switch (direction) {
    case Direction::kForward:
      AMPC_RETURN_IF_ERROR(Check(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_count),
                                 "cudnnGetConvolutionForwardAlgorithmMaxCount"));
      return Rank<cudnnConvolutionFwdAlgoPerf_t>(
          d, strict_fp32, max_count,
          [&](int n, int* returned, cudnnConvolutionFwdAlgoPerf_t* perf) {
            const cudnnStatus_t found =
                cudnnFindConvolutionForwardAlgorithm(h, d.x, d.w, d.conv, d.y, n, returned, perf);
            timed = found == CUDNN_STATUS_SUCCESS;
            return found == CUDNN_STATUS_SUCCESS ? found
                                                 : cudnnGetConvolutionForwardAlgorithm_v7(
                                                       h, d.x, d.w, d.conv, d.y, n, returned, perf);
          },
          [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
            return cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, algo, bytes);
          },
          timed);
    case Direction::kBackwardData:
      AMPC_RETURN_IF_ERROR(Check(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max_count),
                                 "cudnnGetConvolutionBackwardDataAlgorithmMaxCount"));
      return Rank<cudnnConvolutionBwdDataAlgoPerf_t>(
          d, strict_fp32, max_count,
          [&](int n, int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
            const cudnnStatus_t found = cudnnFindConvolutionBackwardDataAlgorithm(
                h, d.w, d.y, d.conv, d.x, n, returned, perf);
            timed = found == CUDNN_STATUS_SUCCESS;
            return found == CUDNN_STATUS_SUCCESS ? found
                                                 : cudnnGetConvolutionBackwardDataAlgorithm_v7(
                                                       h, d.w, d.y, d.conv, d.x, n, returned, perf);
          },
          [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
            return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, algo,
                                                                bytes);
          },
          timed);
    case Direction::kBackwardFilter:
      AMPC_RETURN_IF_ERROR(Check(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max_count),
                                 "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount"));
      return Rank<cudnnConvolutionBwdFilterAlgoPerf_t>(
          d, strict_fp32, max_count,
          [&](int n, int* returned, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
            const cudnnStatus_t found = cudnnFindConvolutionBackwardFilterAlgorithm(
                h, d.x, d.y, d.conv, d.w, n, returned, perf);
            timed = found == CUDNN_STATUS_SUCCESS;
            return found == CUDNN_STATUS_SUCCESS ? found
                                                 : cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                                                       h, d.x, d.y, d.conv, d.w, n, returned, perf);
          },
          [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
            return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, algo,
                                                                  bytes);
          },
          timed);
  }
  return absl::InternalError("unknown convolution direction");
}

// Copies a tensor of `dims` (a filter's as K, C, spatial...) from layout `from` to the other, on
// `stream`: an exact copy for every element type (cudnnTransformTensor's NHWC support varies by
// type and shape).
absl::Status Transpose(cudaStream_t stream, const CudnnConvShape& s, const std::array<int, 5>& dims,
                       Layout from, const void* source, void* target) {
  IndexPlan plan;
  if (!PlanLayoutSwap(std::vector<int64_t>(dims.begin(), dims.begin() + s.spatial + 2),
                      from == Layout::kNchw, &plan)) {
    return absl::InternalError("no plan for a layout change");
  }
  if (const cudaError_t e = StridedCopy(ElemSize(s.type), source, target, plan, stream);
      e != cudaSuccess) {
    return absl::InternalError(absl::StrCat("a layout change: ", cudaGetErrorString(e)));
  }
  return absl::OkStatus();
}

size_t BytesOf(const CudnnConvShape& s, const std::array<int, 5>& dims) {
  size_t count = 1;
  for (int i = 0; i < s.spatial + 2; ++i) count *= static_cast<size_t>(dims[i]);
  return (count * ElemSize(s.type) + 255) / 256 * 256;  // each part 256-byte aligned
}

// An input of a convolution call: its data and dims.
struct Operand {
  const void* data;
  const std::array<int, 5>* dims;
};

// Runs `conv` (in0, in1, out) in the chosen layout; in NHWC on copies in scratch: the inputs
// transposed in, the output transposed back.
template <typename Conv>
absl::Status InLayout(CudaBackend& backend, Layout layout, const CudnnConvShape& s,
                      std::array<Operand, 2> in, void* out, const std::array<int, 5>& out_dims,
                      Conv conv) {
  if (layout == Layout::kNchw) return conv(in[0].data, in[1].data, out);
  const size_t a = BytesOf(s, *in[0].dims), b = BytesOf(s, *in[1].dims);
  AMPC_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> scratch,
                        backend.Allocate(a + b + BytesOf(s, out_dims)));
  char* base = static_cast<char*>(scratch->data());
  AMPC_RETURN_IF_ERROR(
      Transpose(backend.stream(), s, *in[0].dims, Layout::kNchw, in[0].data, base));
  AMPC_RETURN_IF_ERROR(
      Transpose(backend.stream(), s, *in[1].dims, Layout::kNchw, in[1].data, base + a));
  AMPC_RETURN_IF_ERROR(conv(base, base + a, base + a + b));
  // The scratch goes back to the backend's cache on return: the stream orders its next user.
  return Transpose(backend.stream(), s, out_dims, Layout::kNhwc, base + a + b, out);
}

// The time on the GPU of the three transposes an NHWC call adds (every direction transposes X,
// W and Y once, in one direction or the other), on scratch whose contents do not matter: the
// least of three timed rounds after an untimed one (which loads the kernels). An error where
// An error when a layout change fails.
absl::StatusOr<float> TransposeMs(CudaBackend& backend, const CudnnConvShape& s) {
  const size_t bytes = std::max({BytesOf(s, s.x), BytesOf(s, s.w), BytesOf(s, s.y)});
  AMPC_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> from, backend.Allocate(bytes));
  AMPC_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> to, backend.Allocate(bytes));
  auto round = [&]() -> absl::Status {
    for (const std::array<int, 5>* dims : {&s.x, &s.w, &s.y}) {
      AMPC_RETURN_IF_ERROR(
          Transpose(backend.stream(), s, *dims, Layout::kNchw, from->data(), to->data()));
    }
    return absl::OkStatus();
  };
  AMPC_RETURN_IF_ERROR(round());
  cudaEvent_t begin = nullptr, end = nullptr;
  absl::Status status;
  float best = -1;
  if (cudaEventCreate(&begin) != cudaSuccess || cudaEventCreate(&end) != cudaSuccess) {
    status = absl::InternalError("cudaEventCreate failed");
  }
  for (int i = 0; i < 3 && status.ok(); ++i) {
    float ms = 0;
    if (cudaEventRecord(begin, backend.stream()) != cudaSuccess) break;
    status = round();
    if (status.ok() && (cudaEventRecord(end, backend.stream()) != cudaSuccess ||
                        cudaEventSynchronize(end) != cudaSuccess ||
                        cudaEventElapsedTime(&ms, begin, end) != cudaSuccess)) {
      break;
    }
    if (status.ok()) best = best < 0 ? ms : std::min(best, ms);
  }
  if (begin != nullptr) cudaEventDestroy(begin);
  if (end != nullptr) cudaEventDestroy(end);
  cudaGetLastError();
  if (status.ok() && best < 0) status = absl::InternalError("timing cuDNN's transposes failed");
  if (!status.ok()) return status;
  return best;
}

// The algorithm and layout for a shape. FP32 convolutions stay NCHW; FP16 and BF16 ones run NHWC
// (tensor cores' native order) where cuDNN's fastest NHWC algorithm plus the transposes takes
// less time than its fastest NCHW one, both timed by cuDNN on the device, or as `mode` forces.
absl::StatusOr<Choice> ChooseWithLayout(CudaBackend& backend, cudnnHandle_t h, Direction direction,
                                        const CudnnConvShape& shape, bool strict_fp32,
                                        LayoutMode mode) {
  Descriptors nchw;
  AMPC_RETURN_IF_ERROR(nchw.Set(shape, strict_fp32, Layout::kNchw));
  AMPC_RETURN_IF_ERROR(nchw.CheckOutput(shape));
  if (shape.type == ElemType::kFloat || mode == LayoutMode::kNchw) {
    return Choose(h, direction, nchw, strict_fp32);
  }
  Descriptors nhwc;
  AMPC_RETURN_IF_ERROR(nhwc.Set(shape, strict_fp32, Layout::kNhwc));
  absl::StatusOr<Choice> in_nhwc = Choose(h, direction, nhwc, strict_fp32);
  if (in_nhwc.ok()) in_nhwc->layout = Layout::kNhwc;
  if (mode == LayoutMode::kNhwc) {  // forced: every failure says so
    if (!in_nhwc.ok()) {
      return absl::Status(in_nhwc.status().code(),
                          absl::StrCat("AMPC_CUDNN_LAYOUT=nhwc: ", in_nhwc.status().message()));
    }
    AMPC_RETURN_IF_ERROR(TransposeMs(backend, shape).status());
    return in_nhwc;
  }
  absl::StatusOr<Choice> in_nchw = Choose(h, direction, nchw, strict_fp32);
  if (!in_nhwc.ok() || !in_nchw.ok() || in_nhwc->ms < 0 || in_nchw->ms < 0) {
    return in_nchw.ok() ? in_nchw : in_nhwc;
  }
  absl::StatusOr<float> transposes = TransposeMs(backend, shape);
  if (!transposes.ok()) return in_nchw;  // the layout changes cannot be timed: NCHW
  return in_nhwc->ms + *transposes < in_nchw->ms ? in_nhwc : in_nchw;
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
  const LayoutMode mode = LayoutModeFromEnvironment();
  const std::vector<int> key = KeyOf(direction, shape, strict_fp32, mode);
  auto it = p.state->choices.find(key);
  if (it == p.state->choices.end()) {
    AMPC_ASSIGN_OR_RETURN(const Choice choice, ChooseWithLayout(backend, p.state->handle, direction,
                                                                shape, strict_fp32, mode));
    it = p.state->choices.emplace(key, choice).first;
  }
  p.choice = it->second;
  AMPC_RETURN_IF_ERROR(p.d.Set(shape, strict_fp32, p.choice.layout));
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

namespace {

// One direction's call in the chosen layout: `call(p, alpha, in0, in1, beta, out)` is the cuDNN
// function with the prepared descriptors, algorithm and workspace.
template <typename Call>
absl::Status Convolve(CudaBackend& backend, Direction direction, const CudnnConvShape& shape,
                      std::array<Operand, 2> in, void* out, const std::array<int, 5>& out_dims,
                      const char* what, Call call) {
  Prepared p;
  AMPC_RETURN_IF_ERROR(Prepare(backend, direction, shape, p));
  auto conv = [&](const void* a, const void* b, void* y) {
    const float one = 1, zero = 0;
    return Check(call(p, &one, a, b, &zero, y), what);
  };
  return InLayout(backend, p.choice.layout, shape, in, out, out_dims, conv);
}

}  // namespace

absl::Status CudnnConvForward(CudaBackend& backend, const CudnnConvShape& shape, const void* x,
                              const void* w, void* y) {
  return Convolve(backend, Direction::kForward, shape, {Operand{x, &shape.x}, Operand{w, &shape.w}},
                  y, shape.y, "cudnnConvolutionForward",
                  [](const Prepared& p, const float* one, const void* x, const void* w,
                     const float* zero, void* y) {
                    return cudnnConvolutionForward(
                        p.state->handle, one, p.d.x, x, p.d.w, w, p.d.conv,
                        static_cast<cudnnConvolutionFwdAlgo_t>(p.choice.algo), p.workspace,
                        p.choice.workspace, zero, p.d.y, y);
                  });
}

absl::Status CudnnConvBackwardData(CudaBackend& backend, const CudnnConvShape& shape, const void* w,
                                   const void* dy, void* dx) {
  return Convolve(backend, Direction::kBackwardData, shape,
                  {Operand{w, &shape.w}, Operand{dy, &shape.y}}, dx, shape.x,
                  "cudnnConvolutionBackwardData",
                  [](const Prepared& p, const float* one, const void* w, const void* dy,
                     const float* zero, void* dx) {
                    return cudnnConvolutionBackwardData(
                        p.state->handle, one, p.d.w, w, p.d.y, dy, p.d.conv,
                        static_cast<cudnnConvolutionBwdDataAlgo_t>(p.choice.algo), p.workspace,
                        p.choice.workspace, zero, p.d.x, dx);
                  });
}

absl::Status CudnnConvBackwardFilter(CudaBackend& backend, const CudnnConvShape& shape,
                                     const void* x, const void* dy, void* dw) {
  return Convolve(backend, Direction::kBackwardFilter, shape,
                  {Operand{x, &shape.x}, Operand{dy, &shape.y}}, dw, shape.w,
                  "cudnnConvolutionBackwardFilter",
                  [](const Prepared& p, const float* one, const void* x, const void* dy,
                     const float* zero, void* dw) {
                    return cudnnConvolutionBackwardFilter(
                        p.state->handle, one, p.d.x, x, p.d.y, dy, p.d.conv,
                        static_cast<cudnnConvolutionBwdFilterAlgo_t>(p.choice.algo), p.workspace,
                        p.choice.workspace, zero, p.d.w, dw);
                  });
}

}  // namespace ampc::cuda
