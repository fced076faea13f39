// MaxUnpool: scatters X into zeros at the flat indices MaxPool returned. As ONNX's reference, the
// indices address the inferred shape ((in - 1) * stride - pads + kernel per spatial axis); an
// output_shape input at least that large holds it in its leading corner.
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_kernels.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

absl::StatusOr<Shape> InferredShape(const KernelContext& context, const Tensor& x) {
  const Attributes attributes = context.attributes();
  const std::vector<int64_t> kernel = attributes.Ints("kernel_shape");
  const size_t dims = kernel.size();
  if (x.rank() < 3 || static_cast<size_t>(x.rank()) != dims + 2) {
    return NodeError(context, absl::StrCat("kernel_shape has ", dims, " axes for X of shape ",
                                           ShapeString(x.shape())));
  }
  const std::vector<int64_t> strides = attributes.Ints("strides", std::vector<int64_t>(dims, 1));
  const std::vector<int64_t> pads = attributes.Ints("pads", std::vector<int64_t>(2 * dims, 0));
  if (strides.size() != dims || pads.size() != 2 * dims) {
    return NodeError(context, "strides and pads must match kernel_shape");
  }
  Shape shape{x.dim(0), x.dim(1)};
  for (size_t d = 0; d < dims; ++d) {
    const int64_t n =
        (x.dim(static_cast<int>(d) + 2) - 1) * strides[d] - pads[d] - pads[d + dims] + kernel[d];
    if (n < 0) return NodeError(context, "kernel, strides and pads give a negative output dim");
    shape.push_back(n);
  }
  return shape;
}

absl::StatusOr<Shape> OutputShape(const KernelContext& context, const Shape& inferred) {
  const Tensor* given = context.input(2);
  if (given == nullptr) return inferred;
  const Shape shape(given->data<int64_t>(), given->data<int64_t>() + given->size());
  bool fits = shape.size() == inferred.size();
  for (size_t d = 0; fits && d < shape.size(); ++d) fits = shape[d] >= inferred[d];
  if (!fits) {
    return NodeError(context,
                     absl::StrCat("output_shape ", ShapeString(shape),
                                  " does not hold the unpooled shape ", ShapeString(inferred)));
  }
  return shape;
}

// The output offset of flat index `flat` of the inferred shape.
int64_t OutputOffset(const Shape& inferred, const Shape& out, int64_t flat) {
  int64_t offset = 0, stride = 1;
  for (int d = static_cast<int>(inferred.size()) - 1; d >= 0; --d) {
    offset += (flat % inferred[d]) * stride;
    flat /= inferred[d];
    stride *= out[d];
  }
  return offset;
}

absl::Status MaxUnpool(KernelContext& context) {
  const Tensor &x = context.in(0), &indices = context.in(1);
  if (indices.shape() != x.shape()) {
    return NodeError(context, absl::StrCat("I has shape ", ShapeString(indices.shape()), ", X ",
                                           ShapeString(x.shape())));
  }
  AMPC_ASSIGN_OR_RETURN(const Shape inferred, InferredShape(context, x));
  AMPC_ASSIGN_OR_RETURN(const Shape shape, OutputShape(context, inferred));
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, shape, x.dtype()));
  const int64_t count = ElementCount(inferred);
  const int64_t* index = indices.data<int64_t>();
  for (int64_t i = 0; i < x.size(); ++i) {
    if (index[i] < 0 || index[i] >= count) {
      return NodeError(context, absl::StrCat("index ", index[i], " is outside the unpooled shape ",
                                             ShapeString(inferred)));
    }
  }
  Dispatch<AMPC_FLOAT_TYPES>(x.dtype(), [&]<typename T>() {
    T* py = y->data<T>();
    const T zero = Compute<T>::Store(typename Compute<T>::type{0});
    for (int64_t i = 0; i < y->size(); ++i) py[i] = zero;
    const T* px = x.data<T>();
    for (int64_t i = 0; i < x.size(); ++i) py[OutputOffset(inferred, shape, index[i])] = px[i];
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterUnpoolKernels(KernelRegistry& r) {
  const std::vector<DType> floats = {AMPC_FLOAT_TYPES};
  r.Register("cpu", "", "MaxUnpool", {{0, floats}, {1, {DType::kInt64}}, {2, {DType::kInt64}}},
             MaxUnpool, InputMemory{.host = {2}});
}

}  // namespace ampc
