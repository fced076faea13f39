// Tensor family, indexing: kernels driven by index or mask tensors (Gather, GatherElements,
// GatherND, ScatterElements, ScatterND, OneHot, NonZero, Compress). Every index is checked
// before use: an out-of-range one is an error naming its value and axis.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/tensor_ops.h"
#include "passes/graph/status_macros.h"

namespace ampc::tensor_ops {

absl::StatusOr<std::vector<int64_t>> CheckedIndices(const KernelContext& context,
                                                    const Tensor& indices, int64_t dim, int axis) {
  AMPC_ASSIGN_OR_RETURN(std::vector<int64_t> values, ReadInts(context, indices, "indices"));
  for (int64_t& v : values) {
    if (v < -dim || v >= dim) {
      return NodeError(
          context, absl::StrCat("index ", v, " is out of range for axis ", axis, " of size ", dim));
    }
    if (v < 0) v += dim;
  }
  return values;
}

namespace {

// GatherElements/ScatterElements: the data offset of every element of `indices`, i.e. its own
// position with the index on the "axis" attribute's axis replaced by its value.
absl::StatusOr<std::vector<int64_t>> ElementOffsets(const KernelContext& context,
                                                    const Tensor& data_tensor,
                                                    const Tensor& indices_tensor) {
  const Shape& data = data_tensor.shape();
  const Shape& indices = indices_tensor.shape();
  if (data.empty()) return NodeError(context, "data must not be a scalar");
  AMPC_ASSIGN_OR_RETURN(const int axis, NormalizeAxis(context, context.attributes().Int("axis", 0),
                                                      data_tensor.rank()));
  AMPC_ASSIGN_OR_RETURN(const std::vector<int64_t> values,
                        CheckedIndices(context, indices_tensor, data[axis], axis));
  if (data.size() != indices.size()) {
    return NodeError(context, absl::StrCat("indices ", ShapeString(indices), " and data ",
                                           ShapeString(data), " differ in rank"));
  }
  for (size_t d = 0; d < data.size(); ++d) {
    if (static_cast<int>(d) != axis && indices[d] > data[d]) {
      return NodeError(context, absl::StrCat("indices ", ShapeString(indices), " exceed data ",
                                             ShapeString(data), " on axis ", d));
    }
  }
  const std::vector<int64_t> strides = Strides(data);
  const int rank = static_cast<int>(data.size());
  std::vector<int64_t> offsets(values.size());
  std::vector<int64_t> index(rank, 0);
  for (size_t i = 0; i < values.size(); ++i) {
    int64_t offset = 0;
    for (int d = 0; d < rank; ++d) offset += (d == axis ? values[i] : index[d]) * strides[d];
    offsets[i] = offset;
    for (int d = rank - 1; d >= 0; --d) {
      if (++index[d] < indices[d]) break;
      index[d] = 0;
    }
  }
  return offsets;
}

}  // namespace

absl::StatusOr<Reduction> ReductionOf(const KernelContext& context) {
  const std::string name = context.attributes().String("reduction", "none");
  if (name == "none") return Reduction::kNone;
  if (name == "add") return Reduction::kAdd;
  if (name == "mul") return Reduction::kMul;
  if (name == "max") return Reduction::kMax;
  if (name == "min") return Reduction::kMin;
  return NodeError(context, absl::StrCat("reduction '", name, "' is not supported"));
}

namespace {

// dst[offset..offset+count) op= src[0..count), in the compute type, rounded once per update.
absl::Status Combine(const KernelContext& context, Reduction reduction, Tensor& out, int64_t offset,
                     const Tensor& updates, int64_t from, int64_t count) {
  const size_t es = DTypeSize(out.dtype());
  if (reduction == Reduction::kNone) {
    std::memcpy(static_cast<char*>(out.raw()) + offset * es,
                static_cast<const char*>(updates.raw()) + from * es, count * es);
    return absl::OkStatus();
  }
  const bool handled = Dispatch<AMPC_ALL_TYPES>(out.dtype(), [&]<typename T>() {
    using C = typename Compute<T>::type;
    T* y = out.data<T>() + offset;
    const T* u = updates.data<T>() + from;
    for (int64_t i = 0; i < count; ++i) {
      const C a = Compute<T>::Load(y[i]), b = Compute<T>::Load(u[i]);
      C r;
      switch (reduction) {
        case Reduction::kAdd:
          r = static_cast<C>(a + b);
          break;
        case Reduction::kMul:
          r = static_cast<C>(a * b);
          break;
        case Reduction::kMax:
          r = std::max(a, b);
          break;
        default:
          r = std::min(a, b);
          break;
      }
      y[i] = Compute<T>::Store(r);
    }
  });
  if (!handled) return NodeError(context, "reduction is not supported for this type");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GatherPlan> GatherShape(const KernelContext& context) {
  const Tensor& data = context.in(0);
  const Tensor& indices = context.in(1);
  if (data.rank() == 0) return NodeError(context, "data must not be a scalar");
  GatherPlan plan;
  AMPC_ASSIGN_OR_RETURN(plan.axis,
                        NormalizeAxis(context, context.attributes().Int("axis", 0), data.rank()));
  const int axis = plan.axis;
  plan.dim = data.dim(axis);
  plan.output.assign(data.shape().begin(), data.shape().begin() + axis);
  plan.output.insert(plan.output.end(), indices.shape().begin(), indices.shape().end());
  plan.output.insert(plan.output.end(), data.shape().begin() + axis + 1, data.shape().end());
  for (int d = 0; d < axis; ++d) plan.outer *= data.dim(d);
  plan.chunk = ElementCount(std::span(data.shape()).subspan(axis + 1)) * DTypeSize(data.dtype());
  return plan;
}

absl::StatusOr<GatherPlan> PlanGather(const KernelContext& context) {
  AMPC_ASSIGN_OR_RETURN(GatherPlan plan, GatherShape(context));
  AMPC_ASSIGN_OR_RETURN(plan.index, CheckedIndices(context, context.in(1), plan.dim, plan.axis));
  return plan;
}

absl::Status Gather(KernelContext& context) {
  const Tensor& data = context.in(0);
  AMPC_ASSIGN_OR_RETURN(const GatherPlan plan, PlanGather(context));
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, plan.output, data.dtype()));
  const std::vector<int64_t>& index = plan.index;
  const int64_t dim = plan.dim, outer = plan.outer;
  const size_t chunk = plan.chunk;
  const int64_t n = static_cast<int64_t>(index.size());
  char* y = static_cast<char*>(out->raw());
  const char* x = static_cast<const char*>(data.raw());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < n; ++j) {
      std::memcpy(y + (o * n + j) * chunk, x + (o * dim + index[j]) * chunk, chunk);
    }
  }
  return absl::OkStatus();
}

absl::Status GatherElements(KernelContext& context) {
  const Tensor& data = context.in(0);
  const Tensor& indices = context.in(1);
  AMPC_ASSIGN_OR_RETURN(const std::vector<int64_t> offsets, ElementOffsets(context, data, indices));
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, indices.shape(), data.dtype()));
  const size_t es = DTypeSize(data.dtype());
  for (size_t i = 0; i < offsets.size(); ++i) {
    CopyElement(static_cast<char*>(out->raw()) + i * es,
                static_cast<const char*>(data.raw()) + offsets[i] * es, es);
  }
  return absl::OkStatus();
}

absl::Status ScatterElements(KernelContext& context) {
  const Tensor& data = context.in(0);
  const Tensor& indices = context.in(1);
  const Tensor& updates = context.in(2);
  if (updates.shape() != indices.shape() || updates.dtype() != data.dtype()) {
    return NodeError(context,
                     absl::StrCat("updates ", updates.TypeString(), " must match indices shape ",
                                  ShapeString(indices.shape()), " and data type"));
  }
  AMPC_ASSIGN_OR_RETURN(const Reduction reduction, ReductionOf(context));
  AMPC_ASSIGN_OR_RETURN(const std::vector<int64_t> offsets, ElementOffsets(context, data, indices));
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, data.shape(), data.dtype()));
  std::memcpy(out->raw(), data.raw(), data.bytes());
  for (size_t i = 0; i < offsets.size(); ++i) {
    AMPC_RETURN_IF_ERROR(
        Combine(context, reduction, *out, offsets[i], updates, static_cast<int64_t>(i), 1));
  }
  return absl::OkStatus();
}

// GatherND/ScatterND: the data offset each index tuple (last dim of `indices`, k long) selects,
// within data dims [first, first + k).
absl::StatusOr<std::vector<int64_t>> TupleOffsets(const KernelContext& context, const Shape& data,
                                                  const Tensor& indices, int first) {
  const int64_t k = indices.dim(indices.rank() - 1);
  if (k < 1 || k > static_cast<int64_t>(data.size()) - first) {
    return NodeError(context, absl::StrCat("index tuples of length ", k, " do not fit data ",
                                           ShapeString(data)));
  }
  AMPC_ASSIGN_OR_RETURN(const std::vector<int64_t> values, ReadInts(context, indices, "indices"));
  const std::vector<int64_t> strides = Strides(data);
  std::vector<int64_t> offsets(values.size() / k);
  for (size_t t = 0; t < offsets.size(); ++t) {
    int64_t offset = 0;
    for (int64_t j = 0; j < k; ++j) {
      const int axis = first + static_cast<int>(j);
      int64_t v = values[t * k + j];
      if (v < -data[axis] || v >= data[axis]) {
        return NodeError(context, absl::StrCat("index ", v, " is out of range for axis ", axis,
                                               " of size ", data[axis]));
      }
      offset += (v < 0 ? v + data[axis] : v) * strides[axis];
    }
    offsets[t] = offset;
  }
  return offsets;
}

absl::Status GatherND(KernelContext& context) {
  const Tensor& data = context.in(0);
  const Tensor& indices = context.in(1);
  const int b = static_cast<int>(context.attributes().Int("batch_dims", 0));
  if (indices.rank() < 1 || b < 0 || b >= std::min(data.rank(), indices.rank())) {
    return NodeError(
        context, absl::StrCat("batch_dims ", b, " is invalid for data ", ShapeString(data.shape()),
                              " and indices ", ShapeString(indices.shape())));
  }
  for (int d = 0; d < b; ++d) {
    if (data.dim(d) != indices.dim(d)) {
      return NodeError(context,
                       absl::StrCat("batch dim ", d, " differs: data ", ShapeString(data.shape()),
                                    ", indices ", ShapeString(indices.shape())));
    }
  }
  AMPC_ASSIGN_OR_RETURN(const std::vector<int64_t> offsets,
                        TupleOffsets(context, data.shape(), indices, b));
  const int64_t k = indices.dim(indices.rank() - 1);
  Shape shape(indices.shape().begin(), indices.shape().end() - 1);
  shape.insert(shape.end(), data.shape().begin() + b + k, data.shape().end());
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, shape, data.dtype()));
  const size_t es = DTypeSize(data.dtype());
  const int64_t slice = ElementCount(std::span(data.shape()).subspan(b + k));
  const int64_t batches = ElementCount(std::span(data.shape()).subspan(0, b));
  const int64_t batch_size = ElementCount(std::span(data.shape()).subspan(b));
  const int64_t per_batch = batches == 0 ? 0 : static_cast<int64_t>(offsets.size()) / batches;
  for (size_t t = 0; t < offsets.size(); ++t) {
    const int64_t source = (static_cast<int64_t>(t) / per_batch) * batch_size + offsets[t];
    std::memcpy(static_cast<char*>(out->raw()) + t * slice * es,
                static_cast<const char*>(data.raw()) + source * es, slice * es);
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ScatterNDSlice(const KernelContext& context) {
  const Tensor& data = context.in(0);
  const Tensor& indices = context.in(1);
  const Tensor& updates = context.in(2);
  if (indices.rank() < 1) return NodeError(context, "indices must have rank >= 1");
  const int64_t k = indices.dim(indices.rank() - 1);
  if (k < 1 || k > data.rank()) {
    return NodeError(context, absl::StrCat("index tuples of length ", k, " do not fit data ",
                                           ShapeString(data.shape())));
  }
  Shape expected(indices.shape().begin(), indices.shape().end() - 1);
  expected.insert(expected.end(), data.shape().begin() + k, data.shape().end());
  if (updates.shape() != expected || updates.dtype() != data.dtype()) {
    return NodeError(context, absl::StrCat("updates ", updates.TypeString(), ", expected shape ",
                                           ShapeString(expected)));
  }
  return ElementCount(std::span(data.shape()).subspan(k));
}

absl::StatusOr<ScatterNDPlan> PlanScatterND(const KernelContext& context) {
  ScatterNDPlan plan;
  AMPC_ASSIGN_OR_RETURN(plan.reduction, ReductionOf(context));
  AMPC_ASSIGN_OR_RETURN(plan.slice, ScatterNDSlice(context));
  AMPC_ASSIGN_OR_RETURN(plan.offsets,
                        TupleOffsets(context, context.in(0).shape(), context.in(1), 0));
  return plan;
}

absl::Status ScatterND(KernelContext& context) {
  const Tensor& data = context.in(0);
  const Tensor& updates = context.in(2);
  AMPC_ASSIGN_OR_RETURN(const ScatterNDPlan plan, PlanScatterND(context));
  const Reduction reduction = plan.reduction;
  const std::vector<int64_t>& offsets = plan.offsets;
  const int64_t slice = plan.slice;
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, data.shape(), data.dtype()));
  std::memcpy(out->raw(), data.raw(), data.bytes());
  for (size_t t = 0; t < offsets.size(); ++t) {
    AMPC_RETURN_IF_ERROR(Combine(context, reduction, *out, offsets[t], updates,
                                 static_cast<int64_t>(t) * slice, slice));
  }
  return absl::OkStatus();
}

namespace {

// A numeric tensor's values as double (OneHot's indices and depth may be of any numeric type).
std::vector<double> ReadNumbers(const Tensor& tensor) {
  std::vector<double> values;
  Dispatch<AMPC_FLOAT_TYPES, AMPC_INT_TYPES>(tensor.dtype(), [&]<typename T>() {
    for (const T& v : tensor.span<T>()) values.push_back(static_cast<double>(Compute<T>::Load(v)));
  });
  return values;
}

}  // namespace

absl::Status OneHot(KernelContext& context) {
  const Tensor& indices = context.in(0);
  const Tensor& values = context.in(2);
  const std::vector<double> depth_values = ReadNumbers(context.in(1));
  if (depth_values.size() != 1 || values.size() != 2) {
    return NodeError(context, "depth must hold one value and values two");
  }
  const int64_t depth = static_cast<int64_t>(depth_values[0]);
  if (depth < 1) return NodeError(context, absl::StrCat("depth ", depth, " must be positive"));
  const int rank = indices.rank() + 1;
  AMPC_ASSIGN_OR_RETURN(const int axis,
                        NormalizeAxis(context, context.attributes().Int("axis", -1), rank));
  Shape shape = indices.shape();
  shape.insert(shape.begin() + axis, depth);
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, shape, values.dtype()));
  const size_t es = DTypeSize(values.dtype());
  const char* off = static_cast<const char*>(values.raw());
  const char* on = off + es;
  char* y = static_cast<char*>(out->raw());
  tensor_ops::FillElements(y, out->size(), off, es);
  const int64_t inner = ElementCount(std::span(indices.shape()).subspan(axis));
  const std::vector<double> index = ReadNumbers(indices);
  for (size_t i = 0; i < index.size(); ++i) {
    int64_t v = static_cast<int64_t>(index[i]);
    if (v < 0) v += depth;
    if (v < 0 || v >= depth) continue;  // out of range: all "off", as the spec says
    const int64_t o = static_cast<int64_t>(i) / inner, r = static_cast<int64_t>(i) % inner;
    CopyElement(y + ((o * depth + v) * inner + r) * es, on, es);
  }
  return absl::OkStatus();
}

absl::Status NonZero(KernelContext& context) {
  const Tensor& input = context.in(0);
  std::vector<int64_t> found;
  Dispatch<AMPC_ALL_TYPES>(input.dtype(), [&]<typename T>() {
    const T* x = input.data<T>();
    for (int64_t i = 0; i < input.size(); ++i) {
      if (Compute<T>::Load(x[i]) != typename Compute<T>::type{0}) found.push_back(i);
    }
  });
  const int rank = input.rank();
  const int64_t n = static_cast<int64_t>(found.size());
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, {rank, n}, DType::kInt64));
  int64_t* y = out->data<int64_t>();
  for (int64_t j = 0; j < n; ++j) {
    int64_t rest = found[j];
    for (int d = rank - 1; d >= 0; --d) {
      y[d * n + j] = rest % input.dim(d);
      rest /= input.dim(d);
    }
  }
  return absl::OkStatus();
}

absl::Status Compress(KernelContext& context) {
  const Tensor& input = context.in(0);
  const Tensor& condition = context.in(1);
  if (condition.rank() != 1) return NodeError(context, "condition must be 1-D");
  const bool has_axis = context.attributes().Has("axis");
  const Shape flat = {input.size()};
  const Shape& view = has_axis ? input.shape() : flat;
  int axis = 0;
  if (has_axis) {
    AMPC_ASSIGN_OR_RETURN(
        axis, NormalizeAxis(context, context.attributes().Int("axis", 0), input.rank()));
  }
  const int64_t dim = view[axis];
  if (condition.size() > dim) {
    return NodeError(context, absl::StrCat("condition has ", condition.size(), " values for axis ",
                                           axis, " of size ", dim));
  }
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < condition.size(); ++i) {
    if (condition.data<bool>()[i]) kept.push_back(i);
  }
  Shape shape = view;
  shape[axis] = static_cast<int64_t>(kept.size());
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, shape, input.dtype()));
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= view[d];
  const size_t chunk = ElementCount(std::span(view).subspan(axis + 1)) * DTypeSize(input.dtype());
  char* y = static_cast<char*>(out->raw());
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t j = 0; j < kept.size(); ++j) {
      std::memcpy(y + (o * kept.size() + j) * chunk,
                  static_cast<const char*>(input.raw()) + (o * dim + kept[j]) * chunk, chunk);
    }
  }
  return absl::OkStatus();
}

}  // namespace ampc::tensor_ops
