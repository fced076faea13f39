// Tensor family: views (Identity, Reshape, Flatten, Squeeze, Unsqueeze), shape queries and
// constants here; layout and indexing kernels in tensor_layout/tensor_index_kernels.cc.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/tensor_ops.h"
#include "kernels/numerics/cast_math.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/core/tensor_proto.h"

namespace ampc {
namespace tensor_ops {

absl::StatusOr<std::vector<int64_t>> ReadInts(const KernelContext& context, const Tensor& tensor,
                                              absl::string_view what) {
  if (tensor.dtype() == DType::kInt64) {
    return std::vector<int64_t>(tensor.data<int64_t>(), tensor.data<int64_t>() + tensor.size());
  }
  if (tensor.dtype() == DType::kInt32) {
    return std::vector<int64_t>(tensor.data<int32_t>(), tensor.data<int32_t>() + tensor.size());
  }
  return NodeError(context,
                   absl::StrCat(what, " must be int32 or int64, not ", DTypeName(tensor.dtype())));
}

absl::StatusOr<int> NormalizeAxis(const KernelContext& context, int64_t axis, int rank,
                                  absl::string_view what) {
  if (axis < -rank || axis >= rank) {
    return NodeError(context, absl::StrCat(what, " ", axis, " is out of range for rank ", rank));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * shape[d + 1];
  }
  return strides;
}

namespace {

// One output row of MappedCopy through its last map, elements as U (the element size); offsets
// below 0 read `fill`.
template <typename U>
void MapRow(const char* src, int64_t base, const std::vector<int64_t>& last, const char* fill,
            char* y) {
  const U* from = reinterpret_cast<const U*>(src);
  U* to = reinterpret_cast<U*>(y);
  U fill_value{};
  if (fill != nullptr) std::memcpy(&fill_value, fill, sizeof(U));
  for (size_t j = 0; j < last.size(); ++j) {
    const int64_t offset = base + last[j];
    to[j] = offset < 0 ? fill_value : from[offset];
  }
}

}  // namespace

void MappedCopy(KernelContext& context, const void* in, void* out, const Shape& shape,
                const std::vector<std::vector<int64_t>>& maps, size_t element_size,
                const void* fill) {
  const int rank = static_cast<int>(shape.size());
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  const char* fill_bytes = static_cast<const char*>(fill);
  if (ElementCount(shape) == 0) return;
  if (rank == 0) {
    CopyElement(dst, src, element_size);
    return;
  }
  const int64_t inner = shape[rank - 1];
  const std::vector<int64_t>& last = maps[rank - 1];
  bool contiguous = true;
  for (int64_t j = 0; j < inner && contiguous; ++j) contiguous = last[j] == last[0] + j;
  const int64_t rows = ElementCount(shape) / inner;
  const size_t es = element_size;
  auto copy_row = [&](int64_t base, char* y) {
    if (contiguous && base >= 0 && base + last[0] >= 0) {
      std::memcpy(y, src + (base + last[0]) * es, inner * es);
      return;
    }
    switch (es) {
      case 1:
        return MapRow<uint8_t>(src, base, last, fill_bytes, y);
      case 2:
        return MapRow<uint16_t>(src, base, last, fill_bytes, y);
      case 4:
        return MapRow<uint32_t>(src, base, last, fill_bytes, y);
      case 8:
        return MapRow<uint64_t>(src, base, last, fill_bytes, y);
      default:
        for (int64_t j = 0; j < inner; ++j) {
          const int64_t offset = base + last[j];
          CopyElement(y + j * es, offset < 0 ? fill_bytes : src + offset * es, es);
        }
    }
  };
  CpuOf(context.backend())
      .pool()
      .ParallelFor(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)),
                   [&](int64_t begin, int64_t end) {
                     // The row's index over the outer dims, divided out once and then counted.
                     std::vector<int64_t> index(std::max(rank - 1, 0));
                     for (int64_t d = rank - 2, rest = begin; d >= 0; --d) {
                       index[d] = rest % shape[d];
                       rest /= shape[d];
                     }
                     for (int64_t row = begin; row < end; ++row) {
                       int64_t base = 0;
                       for (int d = 0; d < rank - 1; ++d) base += maps[d][index[d]];
                       copy_row(base, dst + row * inner * es);
                       for (int d = rank - 2; d >= 0; --d) {
                         if (++index[d] < shape[d]) break;
                         index[d] = 0;
                       }
                     }
                   });
}

absl::StatusOr<ConstantFill> ReadConstantOfShape(const KernelContext& context) {
  AMPC_ASSIGN_OR_RETURN(Shape shape, ReadInts(context, context.in(0), "shape"));
  for (int64_t d : shape) {
    if (d < 0)
      return NodeError(context, absl::StrCat("shape ", ShapeString(shape), " is negative"));
  }
  Tensor value = Tensor::Host(DType::kFloat, {1});  // default: float 0
  if (const onnx::AttributeProto* attribute = context.attributes().Find("value")) {
    absl::StatusOr<Tensor> parsed = TensorFromProto(attribute->t());
    if (!parsed.ok()) return NodeError(context, parsed.status().message());
    if (parsed->size() != 1) return NodeError(context, "value must hold one element");
    value = *std::move(parsed);
  }
  return ConstantFill{std::move(shape), std::move(value)};
}

}  // namespace tensor_ops

namespace {

using tensor_ops::NormalizeAxis;
using tensor_ops::ReadInts;

absl::Status Identity(KernelContext& context) {
  context.SetOutput(0, context.in(0));
  return absl::OkStatus();
}

absl::Status Reshape(KernelContext& context) {
  const Tensor& data = context.in(0);
  Shape shape;
  if (context.info().opset < 5) {
    shape = context.attributes().Ints("shape");
  } else {
    AMPC_ASSIGN_OR_RETURN(shape, ReadInts(context, context.in(1), "shape"));
  }
  const bool allow_zero = context.attributes().Int("allowzero", 0) != 0;
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allow_zero) {
      if (i >= data.shape().size()) {
        return NodeError(context, absl::StrCat("shape ", ShapeString(shape), " copies dim ", i,
                                               " of a rank-", data.rank(), " input"));
      }
      shape[i] = data.dim(static_cast<int>(i));
    }
    if (shape[i] == -1) {
      if (inferred >= 0) {
        return NodeError(context, absl::StrCat("shape ", ShapeString(shape), " has two -1 dims"));
      }
      inferred = static_cast<int>(i);
    } else if (shape[i] < 0) {
      return NodeError(context, absl::StrCat("shape ", ShapeString(shape), " has dim ", shape[i]));
    } else {
      known *= shape[i];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || data.size() % known != 0) {
      return NodeError(context, absl::StrCat("cannot reshape ", ShapeString(data.shape()), " to ",
                                             ShapeString(shape)));
    }
    shape[inferred] = data.size() / known;
  } else if (known != data.size()) {
    return NodeError(context, absl::StrCat("cannot reshape ", ShapeString(data.shape()), " (",
                                           data.size(), " elements) to ", ShapeString(shape)));
  }
  context.SetOutput(0, data.Reshaped(std::move(shape)));
  return absl::OkStatus();
}

absl::Status Flatten(KernelContext& context) {
  const Tensor& data = context.in(0);
  const int64_t axis = context.attributes().Int("axis", 1);
  if (axis < -data.rank() || axis > data.rank()) {
    return NodeError(context,
                     absl::StrCat("axis ", axis, " is out of range for rank ", data.rank()));
  }
  const int a = static_cast<int>(axis < 0 ? axis + data.rank() : axis);
  int64_t outer = 1;
  for (int d = 0; d < a; ++d) outer *= data.dim(d);
  const int64_t inner = ElementCount(std::span(data.shape()).subspan(a));
  context.SetOutput(0, data.Reshaped({outer, inner}));
  return absl::OkStatus();
}

// Squeeze/Unsqueeze axes: an attribute before opset 13, the second input from 13.
absl::StatusOr<std::vector<int64_t>> AxesOf(KernelContext& context) {
  if (context.info().opset < 13) return context.attributes().Ints("axes");
  if (context.input(1) == nullptr) return std::vector<int64_t>{};
  return ReadInts(context, context.in(1), "axes");
}

absl::Status Squeeze(KernelContext& context) {
  const Tensor& data = context.in(0);
  AMPC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, AxesOf(context));
  std::vector<bool> drop(data.rank(), axes.empty());
  for (int64_t axis : axes) {
    AMPC_ASSIGN_OR_RETURN(int a, NormalizeAxis(context, axis, data.rank()));
    if (data.dim(a) != 1) {
      return NodeError(context, absl::StrCat("cannot squeeze axis ", axis, " of size ", data.dim(a),
                                             " in ", ShapeString(data.shape())));
    }
    drop[a] = true;
  }
  Shape shape;
  for (int d = 0; d < data.rank(); ++d) {
    if (!drop[d] || data.dim(d) != 1) shape.push_back(data.dim(d));
  }
  context.SetOutput(0, data.Reshaped(std::move(shape)));
  return absl::OkStatus();
}

absl::Status Unsqueeze(KernelContext& context) {
  const Tensor& data = context.in(0);
  AMPC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, AxesOf(context));
  const int rank = data.rank() + static_cast<int>(axes.size());
  std::vector<bool> inserted(rank, false);
  for (int64_t axis : axes) {
    AMPC_ASSIGN_OR_RETURN(int a, NormalizeAxis(context, axis, rank));
    if (inserted[a]) return NodeError(context, absl::StrCat("axis ", axis, " is repeated"));
    inserted[a] = true;
  }
  Shape shape;
  int next = 0;
  for (int d = 0; d < rank; ++d) shape.push_back(inserted[d] ? 1 : data.dim(next++));
  context.SetOutput(0, data.Reshaped(std::move(shape)));
  return absl::OkStatus();
}

absl::Status ShapeOp(KernelContext& context) {
  const Shape& shape = context.in(0).shape();
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t start = context.attributes().Int("start", 0);
  int64_t end = context.attributes().Int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  const int64_t n = std::max<int64_t>(0, end - start);
  Tensor out = Tensor::Host(DType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) out.data<int64_t>()[i] = shape[start + i];
  context.SetOutput(0, std::move(out));
  return absl::OkStatus();
}

absl::Status Size(KernelContext& context) {
  Tensor out = Tensor::Host(DType::kInt64, {});
  out.data<int64_t>()[0] = context.in(0).size();
  context.SetOutput(0, std::move(out));
  return absl::OkStatus();
}

absl::Status ConstantOfShape(KernelContext& context) {
  AMPC_ASSIGN_OR_RETURN(tensor_ops::ConstantFill fill, tensor_ops::ReadConstantOfShape(context));
  const Tensor& value = fill.value;
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, std::move(fill.shape), value.dtype()));
  const size_t es = DTypeSize(value.dtype());
  char* y = static_cast<char*>(out->raw());
  tensor_ops::FillElements(y, out->size(), static_cast<const char*>(value.raw()), es);
  return absl::OkStatus();
}

// Range's element count, ceil((limit - start) / delta) clamped at 0: the quotient in C for floats
// (numpy's float32 arithmetic, as the spec's reference), in double for integers.
template <typename C>
absl::StatusOr<int64_t> RangeCount(const KernelContext& context, C start, C limit, C delta) {
  if (delta == C{0}) return NodeError(context, "delta is 0");
  double count;
  if constexpr (std::is_floating_point_v<C>) {
    count = std::ceil(static_cast<double>((limit - start) / delta));
  } else {
    count = std::ceil((static_cast<double>(limit) - static_cast<double>(start)) /
                      static_cast<double>(delta));
  }
  // NaN, inf or a count beyond any tensor (casting those to int64 is undefined).
  if (std::isnan(count) || count >= 9.2e18) {
    return NodeError(context, absl::StrCat("the output would have ", count,
                                           " elements (start, limit and delta give no finite "
                                           "count that fits a tensor)"));
  }
  return count > 0 ? static_cast<int64_t>(count) : int64_t{0};  // -inf too
}

// start + i * delta computed in C, each element rounded once to storage type T.
template <typename T, typename C>
absl::Status RangeIn(KernelContext& context) {
  auto scalar = [&](int i) { return static_cast<C>(Compute<T>::Load(context.in(i).data<T>()[0])); };
  const C start = scalar(0), limit = scalar(1), delta = scalar(2);
  AMPC_ASSIGN_OR_RETURN(const int64_t n, RangeCount(context, start, limit, delta));
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, {n}, context.in(0).dtype()));
  T* y = out->data<T>();
  for (int64_t i = 0; i < n; ++i) {
    y[i] = ConvertElement<C, T>(static_cast<C>(start + static_cast<C>(i) * delta));
  }
  return absl::OkStatus();
}

// FP16/BF16 compute in float, or in double with stash_type 11 (Range-27's attribute).
template <typename T>
absl::Status HalfRange(KernelContext& context) {
  const int64_t stash = context.attributes().Int("stash_type", onnx::TensorProto::FLOAT);
  if (stash == onnx::TensorProto::DOUBLE) return RangeIn<T, double>(context);
  if (stash != onnx::TensorProto::FLOAT) {
    return NodeError(context,
                     absl::StrCat("stash_type ", stash, " is not float (1) or double (11)"));
  }
  return RangeIn<T, float>(context);
}

absl::Status Range(KernelContext& context) {
  for (int i = 0; i < 3; ++i) {
    if (context.in(i).dtype() != context.in(0).dtype()) {
      return NodeError(context, "start, limit and delta differ in type");
    }
    if (context.in(i).size() != 1) {
      return NodeError(context, absl::StrCat("input ", i, " must be a scalar, it has shape ",
                                             ShapeString(context.in(i).shape())));
    }
  }
  absl::Status status;
  Dispatch<DType::kFloat, DType::kDouble, DType::kInt16, DType::kInt32, DType::kInt64>(
      context.in(0).dtype(), [&]<typename T>() { status = RangeIn<T, T>(context); });
  Dispatch<DType::kFloat16, DType::kBFloat16>(
      context.in(0).dtype(), [&]<typename T>() { status = HalfRange<T>(context); });
  return status;
}

absl::Status EyeLike(KernelContext& context) {
  const Tensor& input = context.in(0);
  if (input.rank() != 2) {
    return NodeError(context,
                     absl::StrCat("input must be 2-D, it has shape ", ShapeString(input.shape())));
  }
  DType dtype = input.dtype();
  if (context.attributes().Has("dtype")) {
    dtype = static_cast<DType>(context.attributes().Int("dtype", 0));
  }
  const int64_t k = context.attributes().Int("k", 0);
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, input.shape(), dtype));
  std::memset(out->raw(), 0, out->bytes());
  const bool handled = Dispatch<AMPC_ALL_TYPES>(dtype, [&]<typename T>() {
    T* y = out->data<T>();
    const int64_t rows = input.dim(0), cols = input.dim(1);
    for (int64_t i = 0; i < rows; ++i) {
      if (i + k >= 0 && i + k < cols) y[i * cols + i + k] = Compute<T>::Store(1);
    }
  });
  if (!handled) return NodeError(context, absl::StrCat("dtype ", DTypeName(dtype), " unsupported"));
  return absl::OkStatus();
}

}  // namespace

void RegisterTensorKernels(KernelRegistry& r) {
  const std::vector<DType> all = {AMPC_ALL_TYPES};
  const std::vector<DType> ints = {DType::kInt32, DType::kInt64};
  const std::vector<DType> int64 = {DType::kInt64};
  auto reg = [&](const std::string& op, std::vector<TypeConstraint> constraints,
                 KernelFunction function) {
    r.Register("cpu", "", op, std::move(constraints), function);
  };
  // Views and shape queries touch no element data (shapes, axes and the results of Shape and
  // Size live in host memory), so the same functions serve every backend.
  for (const std::string backend : {"cpu", "cuda"}) {
    const InputMemory view{.host = {1}, .anywhere = {0}};
    r.Register(backend, "", "Identity", {{0, all}}, Identity, view);
    r.Register(backend, "", "Reshape", {{0, all}, {1, int64}}, Reshape, view);
    r.Register(backend, "", "Flatten", {{0, all}}, Flatten, view);
    r.Register(backend, "", "Squeeze", {{0, all}, {1, int64}}, Squeeze, view);
    r.Register(backend, "", "Unsqueeze", {{0, all}, {1, int64}}, Unsqueeze, view);
    r.Register(backend, "", "Shape", {{0, all}}, ShapeOp, view);
    r.Register(backend, "", "Size", {{0, all}}, Size, view);
  }
  reg("ConstantOfShape", {{0, int64}}, ConstantOfShape);
  reg("Range", {{0, {AMPC_FLOAT_TYPES, DType::kInt16, DType::kInt32, DType::kInt64}}}, Range);
  reg("EyeLike", {{0, all}}, EyeLike);

  using namespace tensor_ops;
  reg("Transpose", {{0, all}}, Transpose);
  reg("Concat", {}, Concat);
  reg("Split", {{0, all}, {1, int64}}, Split);
  reg("Slice", {{0, all}, {1, ints}, {2, ints}, {3, ints}, {4, ints}}, Slice);
  reg("Expand", {{0, all}, {1, int64}}, Expand);
  reg("Tile", {{0, all}, {1, int64}}, Tile);
  reg("Pad", {{0, all}, {1, int64}}, Pad);
  reg("DepthToSpace", {{0, all}}, DepthToSpace);
  reg("SpaceToDepth", {{0, all}}, SpaceToDepth);
  reg("Trilu", {{0, all}, {1, int64}}, Trilu);
  reg("ReverseSequence", {{0, all}, {1, int64}}, ReverseSequence);
  reg("Gather", {{0, all}, {1, ints}}, Gather);
  reg("GatherElements", {{0, all}, {1, ints}}, GatherElements);
  reg("GatherND", {{0, all}, {1, int64}}, GatherND);
  reg("Scatter", {{0, all}, {1, ints}}, ScatterElements);
  reg("ScatterElements", {{0, all}, {1, ints}}, ScatterElements);
  reg("ScatterND", {{0, all}, {1, int64}}, ScatterND);
  reg("OneHot", {{0, {AMPC_FLOAT_TYPES, AMPC_INT_TYPES}}}, OneHot);
  reg("NonZero", {{0, all}}, NonZero);
  reg("Compress", {{0, all}, {1, {DType::kBool}}}, Compress);
}

}  // namespace ampc
