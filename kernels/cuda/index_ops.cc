// The CUDA indexing kernels: Gather, ScatterND and Sum. Indices the host holds (token ids fed
// from the host, constants) are checked and normalised on the host with the CPU family's own
// helpers (the same errors, before anything is launched) and uploaded with the launch;
// ScatterND's updates to one destination are grouped on the host so the device applies them in
// ONNX's order without atomics. Indices the GPU holds (a captured step's inputs, indices computed
// on the device) are read there, with no wait for the GPU: an index out of range cannot be
// reported, so Gather gives zeros and ScatterND skips the tuple; ScatterND's grouping is a stable
// radix sort on the device.
#include <algorithm>
#include <limits>
#include <memory>
#include <numeric>
#include <span>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/tensor_ops.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/index.h"
#include "kernels/cuda/op_support.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

using cuda::ElemOf;
using cuda::Launched;
using cuda::StreamOf;

// A device copy of `values`, queued on the backend's stream.
absl::StatusOr<Tensor> Upload(KernelContext& context, const std::vector<int64_t>& values) {
  Tensor host = Tensor::Host(DType::kInt64, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), host.data<int64_t>());
  return OnBackend(host, context.backend());
}

absl::Status GatherDeviceIndex(KernelContext& context) {
  const Tensor& data = context.in(0);
  const Tensor& indices = context.in(1);
  AMPC_ASSIGN_OR_RETURN(const tensor_ops::GatherPlan plan, tensor_ops::GatherShape(context));
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, plan.output, data.dtype()));
  if (out->size() == 0) return absl::OkStatus();
  return Launched(context,
                  cuda::GatherDeviceIndex(data.raw(), out->raw(), indices.raw(),
                                          indices.dtype() == DType::kInt64, plan.outer, plan.dim,
                                          indices.size(), plan.chunk, StreamOf(context)));
}

absl::Status Gather(KernelContext& context) {
  if (!InHostMemory(context.in(1))) return GatherDeviceIndex(context);
  const Tensor& data = context.in(0);
  AMPC_ASSIGN_OR_RETURN(const tensor_ops::GatherPlan plan, tensor_ops::PlanGather(context));
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, plan.output, data.dtype()));
  if (out->size() == 0) return absl::OkStatus();
  AMPC_ASSIGN_OR_RETURN(Tensor device_index, Upload(context, plan.index));
  return Launched(
      context,
      cuda::Gather(data.raw(), out->raw(), device_index.data<int64_t>(), plan.outer, plan.dim,
                   static_cast<int64_t>(plan.index.size()), plan.chunk, StreamOf(context)));
}

// Destinations of ScatterND's tuples in first-use order, each with its tuples in ONNX's order.
struct ScatterGroups {
  std::vector<int64_t> dest, start, order;
};

ScatterGroups GroupByDestination(const std::vector<int64_t>& offsets) {
  std::vector<int64_t> order(offsets.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return offsets[a] < offsets[b]; });
  ScatterGroups groups;
  for (size_t p = 0; p < order.size(); ++p) {
    if (p == 0 || offsets[order[p]] != offsets[order[p - 1]]) {
      groups.dest.push_back(offsets[order[p]]);
      groups.start.push_back(static_cast<int64_t>(p));
    }
  }
  groups.start.push_back(static_cast<int64_t>(order.size()));
  groups.order = std::move(order);
  return groups;
}

absl::Status ScatterNDDeviceIndex(KernelContext& context) {
  const Tensor& data = context.in(0);
  const Tensor& indices = context.in(1);
  AMPC_ASSIGN_OR_RETURN(const tensor_ops::Reduction reduction, tensor_ops::ReductionOf(context));
  AMPC_ASSIGN_OR_RETURN(const int64_t slice, tensor_ops::ScatterNDSlice(context));
  cuda::ScatterDims dims{};
  dims.k = static_cast<int>(indices.dim(indices.rank() - 1));
  if (dims.k > cuda::kMaxScatterDims) {
    return NodeError(context, absl::StrCat("index tuples of ", dims.k,
                                           " components; the CUDA "
                                           "ScatterND reads at most ",
                                           cuda::kMaxScatterDims, " on the device"));
  }
  for (int d = 0; d < dims.k; ++d) dims.dim[d] = data.dim(d);
  const int64_t rows = ElementCount(std::span(data.shape()).first(dims.k));
  const int64_t tuples = indices.size() / dims.k;
  if (tuples > std::numeric_limits<int32_t>::max()) {
    return NodeError(context,
                     absl::StrCat(tuples, " index tuples; the CUDA ScatterND sorts at most ",
                                  std::numeric_limits<int32_t>::max(), " on the device"));
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, data.shape(), data.dtype()));
  AMPC_RETURN_IF_ERROR(
      Launched(context, cudaMemcpyAsync(out->raw(), data.raw(), data.bytes(),
                                        cudaMemcpyDeviceToDevice, StreamOf(context))));
  if (tuples == 0 || slice == 0) return absl::OkStatus();
  const size_t bytes = cuda::ScatterScratchBytes(tuples, rows);
  AMPC_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> scratch, context.backend().Allocate(bytes));
  return Launched(context, cuda::ScatterSlicesDeviceIndex(
                               ElemOf(data.dtype()), static_cast<cuda::ScatterReduction>(reduction),
                               out->raw(), context.in(2).raw(), indices.data<int64_t>(), tuples,
                               dims, rows, slice, scratch->data(), bytes, StreamOf(context)));
}

absl::Status ScatterND(KernelContext& context) {
  if (!InHostMemory(context.in(1))) return ScatterNDDeviceIndex(context);
  const Tensor& data = context.in(0);
  const Tensor& updates = context.in(2);
  AMPC_ASSIGN_OR_RETURN(const tensor_ops::ScatterNDPlan plan, tensor_ops::PlanScatterND(context));
  const std::vector<int64_t>& offsets = plan.offsets;
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, data.shape(), data.dtype()));
  AMPC_RETURN_IF_ERROR(
      Launched(context, cudaMemcpyAsync(out->raw(), data.raw(), data.bytes(),
                                        cudaMemcpyDeviceToDevice, StreamOf(context))));
  if (offsets.empty()) return absl::OkStatus();
  const ScatterGroups groups = GroupByDestination(offsets);
  AMPC_ASSIGN_OR_RETURN(Tensor dest, Upload(context, groups.dest));
  AMPC_ASSIGN_OR_RETURN(Tensor start, Upload(context, groups.start));
  AMPC_ASSIGN_OR_RETURN(Tensor order, Upload(context, groups.order));
  const auto cuda_reduction = static_cast<cuda::ScatterReduction>(plan.reduction);
  const cudaError_t error =
      cuda::ScatterSlices(ElemOf(data.dtype()), cuda_reduction, out->raw(), updates.raw(),
                          dest.data<int64_t>(), start.data<int64_t>(), order.data<int64_t>(),
                          static_cast<int64_t>(groups.dest.size()), plan.slice, StreamOf(context));
  if (error == cudaErrorInvalidValue) {
    return NodeError(context, absl::StrCat("no CUDA kernel for ", DTypeName(data.dtype())));
  }
  return Launched(context, error);
}

// Same-shape Sum in one pass (the CPU's single rounding); broadcasting Sum has no CUDA kernel.
absl::Status Sum(KernelContext& context) {
  const int n = context.num_inputs();
  if (n == 0) return NodeError(context, "needs at least one input");
  if (n > cuda::kMaxSumInputs) {
    return NodeError(context,
                     absl::StrCat(n, " inputs; the CUDA Sum takes at most ", cuda::kMaxSumInputs));
  }
  std::vector<const void*> inputs;
  for (int k = 0; k < n; ++k) {
    const Tensor* t = context.input(k);
    if (t == nullptr) return NodeError(context, absl::StrCat("input ", k, " is missing"));
    if (t->dtype() != context.in(0).dtype() || t->shape() != context.in(0).shape()) {
      return NodeError(context, absl::StrCat("input ", k, " is ", t->TypeString(), ", input 0 ",
                                             context.in(0).TypeString(),
                                             " (the CUDA Sum needs equal types and shapes)"));
    }
    inputs.push_back(t->raw());
  }
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, context.in(0).shape()));
  return Launched(context, cuda::SumSameShape(ElemOf(out->dtype()), inputs.data(), n, out->raw(),
                                              out->size(), StreamOf(context)));
}

}  // namespace

void RegisterCudaIndexKernels(KernelRegistry& r) {
  const std::vector<DType> all = {AMPC_ALL_TYPES};
  const std::vector<DType> ints = {DType::kInt32, DType::kInt64};
  const std::vector<DType> numeric = {DType::kFloat,  DType::kFloat16, DType::kBFloat16,
                                      DType::kDouble, DType::kInt32,   DType::kInt64};
  // Indices are read where they are (host or device): a step never waits to read them.
  r.Register("cuda", "", "Gather", {{0, all}, {1, ints}}, Gather, {.either = {1}});
  r.Register("cuda", "", "ScatterND", {{0, numeric}, {1, {DType::kInt64}}}, ScatterND,
             {.either = {1}});
  r.Register("cuda", "", "Sum", {{0, numeric}}, Sum);
}

}  // namespace ampc
