// Control flow: If, Loop and Scan (opset 9+). Each kernel builds the executors of its subgraphs
// when it is created, so an unsupported op inside a branch or body fails at session creation.
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_kernels.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/graph_executor.h"

namespace ampc {
namespace {

using KernelOr = absl::StatusOr<std::unique_ptr<OpKernel>>;

// A subgraph's executor, and where each of its free variables sits among the node's implicit
// inputs (the executor takes them in its own order).
class Subgraph {
 public:
  static absl::StatusOr<Subgraph> Build(const KernelInfo& info, const std::string& attribute) {
    AMPC_ASSIGN_OR_RETURN(const onnx::GraphProto* graph,
                          info.attributes().RequiredGraph(attribute));
    Subgraph subgraph;
    subgraph.graph_ = graph;
    absl::StatusOr<std::unique_ptr<GraphExecutor>> executor = info.build_subgraph(*graph);
    if (!executor.ok()) {
      return absl::Status(
          executor.status().code(),
          absl::StrCat("in its '", attribute, "' graph: ", executor.status().message()));
    }
    subgraph.executor_ = *std::move(executor);
    for (const std::string& name : subgraph.executor_->free_variables()) {
      int index = -1;
      for (size_t i = 0; i < info.implicit_inputs.size(); ++i) {
        if (info.implicit_inputs[i] == name) index = static_cast<int>(i);
      }
      if (index < 0) {
        return absl::InternalError(absl::StrCat(
            "'", attribute, "' reads '", name, "', which is not among the node's implicit inputs"));
      }
      subgraph.outer_index_.push_back(index);
    }
    return subgraph;
  }

  const GraphExecutor& executor() const { return *executor_; }
  const onnx::GraphProto& graph() const { return *graph_; }
  int num_inputs() const { return static_cast<int>(executor_->input_names().size()); }
  int num_outputs() const { return static_cast<int>(executor_->output_names().size()); }

  absl::StatusOr<std::vector<Tensor>> Run(const KernelContext& context,
                                          std::span<const Tensor> inputs) const {
    std::vector<Tensor*> outer;
    outer.reserve(outer_index_.size());
    for (int index : outer_index_) outer.push_back(context.implicit_inputs()[index]);
    return executor_->Run(inputs, outer);
  }

 private:
  const onnx::GraphProto* graph_ = nullptr;
  std::unique_ptr<GraphExecutor> executor_;
  std::vector<int> outer_index_;
};

// The single value of a one-element tensor of type T.
template <typename T>
absl::StatusOr<T> ScalarOf(const KernelContext& context, const Tensor& t, const char* what,
                           DType dtype) {
  if (t.dtype() != dtype || t.size() != 1) {
    return NodeError(context, absl::StrCat(what, " must be a single ", DTypeName(dtype),
                                           " value, got ", t.TypeString()));
  }
  return t.data<T>()[0];
}

absl::StatusOr<Tensor> HostScalar(Backend& backend, DType dtype, const void* value) {
  AMPC_ASSIGN_OR_RETURN(Tensor t, backend.NewTensor(dtype, {}));
  std::memcpy(t.raw(), value, DTypeSize(dtype));
  return t;
}

// Element `index` along `axis` of `t`, without that axis: a view for axis 0, a copy otherwise.
absl::StatusOr<Tensor> SliceAlong(Backend& backend, const Tensor& t, int axis, int64_t index) {
  Shape shape = t.shape();
  shape.erase(shape.begin() + axis);
  const size_t element = DTypeSize(t.dtype());
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= t.dim(d);
  const size_t inner =
      static_cast<size_t>(ElementCount(shape) / (outer == 0 ? 1 : outer)) * element;
  if (axis == 0) {
    const size_t offset = static_cast<size_t>(static_cast<const char*>(t.raw()) -
                                              static_cast<const char*>(t.buffer()->data()));
    return Tensor(t.dtype(), std::move(shape), t.buffer(), offset + index * inner);
  }
  AMPC_ASSIGN_OR_RETURN(Tensor out, backend.NewTensor(t.dtype(), std::move(shape)));
  const char* src = static_cast<const char*>(t.raw());
  char* dst = static_cast<char*>(out.raw());
  const int64_t length = t.dim(axis);
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(dst + o * inner, src + (o * length + index) * inner, inner);
  }
  return out;
}

// Output `output` of the node: the per-iteration slices stacked along a new `axis`, in reverse
// iteration order when `reverse`. `empty_shape`/`dtype` describe it when there were no iterations.
absl::Status Stack(KernelContext& context, int output, const std::vector<Tensor>& slices,
                   int64_t axis, bool reverse, const Shape& empty_shape, DType dtype) {
  if (slices.empty()) {
    if (dtype == DType::kUndefined) {
      return NodeError(context, absl::StrCat("the element type of output ", output,
                                             " is unknown and the loop ran no iteration"));
    }
    return context.Output(output, empty_shape, dtype).status();
  }
  const Tensor& first = slices[0];
  const int rank = first.rank();
  if (axis < -(rank + 1) || axis > rank) {
    return NodeError(
        context, absl::StrCat("scan output axis ", axis, " is out of range for rank ", rank + 1));
  }
  if (axis < 0) axis += rank + 1;
  for (size_t i = 1; i < slices.size(); ++i) {
    if (slices[i].shape() != first.shape() || slices[i].dtype() != first.dtype()) {
      return NodeError(context,
                       absl::StrCat("output ", output, ": iteration ", i, " produced ",
                                    slices[i].TypeString(), ", iteration 0 ", first.TypeString()));
    }
  }
  Shape shape = first.shape();
  const int64_t length = static_cast<int64_t>(slices.size());
  shape.insert(shape.begin() + axis, length);
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(output, shape, first.dtype()));
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= first.dim(static_cast<int>(d));
  const size_t inner =
      static_cast<size_t>(first.size() / (outer == 0 ? 1 : outer)) * DTypeSize(first.dtype());
  char* dst = static_cast<char*>(out->raw());
  for (int64_t i = 0; i < length; ++i) {
    const char* src = static_cast<const char*>(slices[i].raw());
    const int64_t position = reverse ? length - 1 - i : i;
    for (int64_t o = 0; o < outer; ++o) {
      std::memcpy(dst + (o * length + position) * inner, src + o * inner, inner);
    }
  }
  return absl::OkStatus();
}

// The declared shape and type of a body output with a new leading 0 axis: what a scan output is
// after zero iterations. Unknown dims give [0].
std::pair<Shape, DType> EmptyScanOutput(const onnx::ValueInfoProto& value) {
  const auto& type = value.type().tensor_type();
  Shape shape = {0};
  for (const auto& dim : type.shape().dim()) {
    if (!dim.has_dim_value()) return {{0}, static_cast<DType>(type.elem_type())};
    shape.push_back(dim.dim_value());
  }
  return {shape, static_cast<DType>(type.elem_type())};
}

// ---- If ----

class IfKernel final : public OpKernel {
 public:
  static KernelOr Create(const KernelInfo& info) {
    auto kernel = std::unique_ptr<IfKernel>(new IfKernel());
    AMPC_ASSIGN_OR_RETURN(kernel->then_, Subgraph::Build(info, "then_branch"));
    AMPC_ASSIGN_OR_RETURN(kernel->else_, Subgraph::Build(info, "else_branch"));
    const int outputs = static_cast<int>(info.node.output_size());
    for (const Subgraph* branch : {&kernel->then_, &kernel->else_}) {
      if (branch->num_outputs() != outputs) {
        return absl::InvalidArgumentError(
            absl::StrCat("a branch has ", branch->num_outputs(), " outputs, the node ", outputs));
      }
    }
    return kernel;
  }

  absl::Status Compute(KernelContext& context) override {
    AMPC_ASSIGN_OR_RETURN(bool cond, ScalarOf<bool>(context, context.in(0), "cond", DType::kBool));
    const Subgraph& branch = cond ? then_ : else_;
    AMPC_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, branch.Run(context, {}));
    for (int i = 0; i < context.num_outputs(); ++i) context.SetOutput(i, std::move(outputs[i]));
    return absl::OkStatus();
  }

 private:
  IfKernel() = default;
  Subgraph then_, else_;
};

// ---- Loop ----

class LoopKernel final : public OpKernel {
 public:
  static KernelOr Create(const KernelInfo& info) {
    auto kernel = std::unique_ptr<LoopKernel>(new LoopKernel());
    AMPC_ASSIGN_OR_RETURN(kernel->body_, Subgraph::Build(info, "body"));
    const int carried = static_cast<int>(info.node.input_size()) - 2;
    const int scans = kernel->body_.num_outputs() - 1 - carried;
    if (carried < 0 || kernel->body_.num_inputs() != carried + 2 || scans < 0 ||
        info.node.output_size() > carried + scans) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the body has ", kernel->body_.num_inputs(), " inputs and ", kernel->body_.num_outputs(),
          " outputs; with ", carried, " loop-carried values it needs ", carried + 2,
          " inputs and at least ", carried + 1, " outputs"));
    }
    kernel->carried_ = carried;
    for (int k = 0; k < scans; ++k) {
      auto [shape, dtype] = EmptyScanOutput(kernel->body_.graph().output(1 + carried + k));
      const int output = carried + k;
      if (output < static_cast<int>(info.output_types.size()) &&
          info.output_types[output] != DType::kUndefined) {
        dtype = info.output_types[output];
      }
      kernel->empty_scans_.emplace_back(std::move(shape), dtype);
    }
    return kernel;
  }

  absl::Status Compute(KernelContext& context) override {
    int64_t trip_count = 0;
    const bool has_trip_count = context.input(0) != nullptr;
    bool cond = true;
    const bool has_cond = context.input(1) != nullptr;
    if (const Tensor* m = context.input(0)) {
      AMPC_ASSIGN_OR_RETURN(trip_count, ScalarOf<int64_t>(context, *m, "M", DType::kInt64));
    }
    if (has_cond) {
      AMPC_ASSIGN_OR_RETURN(cond, ScalarOf<bool>(context, context.in(1), "cond", DType::kBool));
    }
    std::vector<Tensor> inputs(2 + carried_);
    for (int i = 0; i < carried_; ++i) inputs[2 + i] = context.in(2 + i);
    std::vector<std::vector<Tensor>> scans(empty_scans_.size());
    const int64_t max_iterations = context.backend().limits().max_loop_iterations;
    for (int64_t i = 0; (!has_trip_count || i < trip_count) && cond; ++i) {
      if (i == max_iterations) {
        return absl::ResourceExhaustedError(absl::StrCat(
            context.info().label(), ": ran ", i, " iterations",
            has_trip_count ? absl::StrCat(" of its trip count ", trip_count) : " (no trip count)",
            " and is still going; the limit is ", max_iterations, " (--max-loop-iterations)"));
      }
      AMPC_ASSIGN_OR_RETURN(inputs[0], HostScalar(context.backend(), DType::kInt64, &i));
      AMPC_ASSIGN_OR_RETURN(inputs[1], HostScalar(context.backend(), DType::kBool, &cond));
      absl::StatusOr<std::vector<Tensor>> outputs = body_.Run(context, inputs);
      if (!outputs.ok()) {
        return NodeError(context, absl::StrCat("iteration ", i, ": ", outputs.status().message()));
      }
      if (has_cond) {
        AMPC_ASSIGN_OR_RETURN(cond,
                              ScalarOf<bool>(context, (*outputs)[0], "body's cond", DType::kBool));
      }
      for (int k = 0; k < carried_; ++k) inputs[2 + k] = std::move((*outputs)[1 + k]);
      for (size_t k = 0; k < scans.size(); ++k) {
        scans[k].push_back(std::move((*outputs)[1 + carried_ + k]));
      }
    }
    for (int k = 0; k < carried_ && k < context.num_outputs(); ++k) {
      context.SetOutput(k, inputs[2 + k]);
    }
    for (size_t k = 0;
         k < scans.size() && carried_ + k < static_cast<size_t>(context.num_outputs()); ++k) {
      const auto& [shape, dtype] = empty_scans_[k];
      AMPC_RETURN_IF_ERROR(
          Stack(context, carried_ + static_cast<int>(k), scans[k], 0, false, shape, dtype));
    }
    return absl::OkStatus();
  }

 private:
  LoopKernel() = default;
  Subgraph body_;
  int carried_ = 0;
  std::vector<std::pair<Shape, DType>> empty_scans_;
};

// ---- Scan (opset 9+) ----

class ScanKernel final : public OpKernel {
 public:
  static KernelOr Create(const KernelInfo& info) {
    // Scan slices by whole bytes per element: packed 4- and 2-bit tensors cannot be sliced so.
    for (const std::vector<DType>* types : {&info.input_types, &info.output_types}) {
      for (DType type : *types) {
        if (type != DType::kUndefined && DTypeSize(type) == 0) {
          return absl::UnimplementedError(absl::StrCat("Scan over ", DTypeName(type),
                                                       " (packed below a byte) is not supported"));
        }
      }
    }
    auto kernel = std::unique_ptr<ScanKernel>(new ScanKernel());
    const Attributes attributes = info.attributes();
    AMPC_ASSIGN_OR_RETURN(const int64_t num_scan_inputs, attributes.RequiredInt("num_scan_inputs"));
    AMPC_ASSIGN_OR_RETURN(kernel->body_, Subgraph::Build(info, "body"));
    const int inputs = static_cast<int>(info.node.input_size());
    const int states = inputs - static_cast<int>(num_scan_inputs);
    const int scan_outputs = kernel->body_.num_outputs() - states;
    if (num_scan_inputs < 1 || states < 0 || kernel->body_.num_inputs() != inputs ||
        scan_outputs < 0 || info.node.output_size() != kernel->body_.num_outputs()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "num_scan_inputs=", num_scan_inputs, " with ", inputs, " inputs and ",
          info.node.output_size(), " outputs does not match a body of ", kernel->body_.num_inputs(),
          " inputs and ", kernel->body_.num_outputs(), " outputs"));
    }
    kernel->states_ = states;
    kernel->input_axes_ =
        attributes.Ints("scan_input_axes", std::vector<int64_t>(num_scan_inputs, 0));
    kernel->input_directions_ =
        attributes.Ints("scan_input_directions", std::vector<int64_t>(num_scan_inputs, 0));
    kernel->output_axes_ =
        attributes.Ints("scan_output_axes", std::vector<int64_t>(scan_outputs, 0));
    kernel->output_directions_ =
        attributes.Ints("scan_output_directions", std::vector<int64_t>(scan_outputs, 0));
    if (kernel->input_axes_.size() != static_cast<size_t>(num_scan_inputs) ||
        kernel->input_directions_.size() != static_cast<size_t>(num_scan_inputs) ||
        kernel->output_axes_.size() != static_cast<size_t>(scan_outputs) ||
        kernel->output_directions_.size() != static_cast<size_t>(scan_outputs)) {
      return absl::InvalidArgumentError(
          "scan_input_* attributes need one value per scan input, scan_output_* one per scan "
          "output");
    }
    for (int k = 0; k < scan_outputs; ++k) {
      kernel->empty_scans_.push_back(EmptyScanOutput(kernel->body_.graph().output(states + k)));
      if (states + k < static_cast<int>(info.output_types.size()) &&
          info.output_types[states + k] != DType::kUndefined) {
        kernel->empty_scans_.back().second = info.output_types[states + k];
      }
    }
    return kernel;
  }

  absl::Status Compute(KernelContext& context) override {
    const int scan_inputs = context.num_inputs() - states_;
    std::vector<int> axes(scan_inputs);
    int64_t length = -1;
    for (int j = 0; j < scan_inputs; ++j) {
      const Tensor& t = context.in(states_ + j);
      int64_t axis = input_axes_[j];
      if (axis < -t.rank() || axis >= t.rank()) {
        return NodeError(
            context, absl::StrCat("scan input ", j, " ", t.TypeString(), " has no axis ", axis));
      }
      axes[j] = static_cast<int>(axis < 0 ? axis + t.rank() : axis);
      if (length >= 0 && t.dim(axes[j]) != length) {
        return NodeError(
            context, absl::StrCat("scan input ", j, " has ", t.dim(axes[j]), " steps along axis ",
                                  axes[j], ", earlier ones ", length));
      }
      length = t.dim(axes[j]);
    }
    std::vector<Tensor> inputs(states_ + scan_inputs);
    for (int i = 0; i < states_; ++i) inputs[i] = context.in(i);
    std::vector<std::vector<Tensor>> scans(output_axes_.size());
    for (int64_t t = 0; t < length; ++t) {
      for (int j = 0; j < scan_inputs; ++j) {
        const int64_t index = input_directions_[j] != 0 ? length - 1 - t : t;
        AMPC_ASSIGN_OR_RETURN(
            inputs[states_ + j],
            SliceAlong(context.backend(), context.in(states_ + j), axes[j], index));
      }
      absl::StatusOr<std::vector<Tensor>> outputs = body_.Run(context, inputs);
      if (!outputs.ok()) {
        return NodeError(context, absl::StrCat("iteration ", t, ": ", outputs.status().message()));
      }
      for (int i = 0; i < states_; ++i) inputs[i] = std::move((*outputs)[i]);
      for (size_t k = 0; k < scans.size(); ++k) {
        scans[k].push_back(std::move((*outputs)[states_ + k]));
      }
    }
    for (int i = 0; i < states_; ++i) context.SetOutput(i, inputs[i]);
    for (size_t k = 0; k < scans.size(); ++k) {
      const auto& [shape, dtype] = empty_scans_[k];
      AMPC_RETURN_IF_ERROR(Stack(context, states_ + static_cast<int>(k), scans[k], output_axes_[k],
                                 output_directions_[k] != 0, shape, dtype));
    }
    return absl::OkStatus();
  }

 private:
  ScanKernel() = default;
  Subgraph body_;
  int states_ = 0;
  std::vector<int64_t> input_axes_, input_directions_, output_axes_, output_directions_;
  std::vector<std::pair<Shape, DType>> empty_scans_;
};

}  // namespace

void RegisterControlFlowKernels(KernelRegistry& registry) {
  registry.Register(KernelDef{"", "If", "cpu", {{0, {DType::kBool}}}, IfKernel::Create});
  registry.Register(KernelDef{
      "", "Loop", "cpu", {{0, {DType::kInt64}}, {1, {DType::kBool}}}, LoopKernel::Create});
  // Scan-8 is batched, with sequence_lens: another op.
  registry.Register(KernelDef{"", "Scan", "cpu", {}, ScanKernel::Create, {}, {.first = 9}});
}

}  // namespace ampc
