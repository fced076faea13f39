#include "runtime/core/tensor_proto.h"

#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "passes/graph/tensor_data.h"
#include "runtime/core/attributes.h"
#include "runtime/core/input_file.h"

namespace ampc {

absl::StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& proto) {
  const DType dtype = static_cast<DType>(proto.data_type());
  const std::string label = absl::StrCat("tensor '", proto.name(), "'");
  if (absl::Status status = CheckSupported(dtype); !status.ok()) {
    return absl::UnimplementedError(absl::StrCat(label, ": ", status.message()));
  }
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": external data was not loaded"));
  }
  Shape shape(proto.dims().begin(), proto.dims().end());
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat(label, ": negative dimension"));
  }
  const std::optional<uint64_t> expected = DataBytes(proto);
  if (!expected.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": shape ", ShapeString(shape), " is too large to hold in memory"));
  }
  const std::string bytes = RawBytes(proto);
  if (bytes.size() != *expected) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": shape ", ShapeString(shape), " needs ",
                                                   *expected, " bytes of data, it has ",
                                                   bytes.size()));
  }
  Tensor tensor = Tensor::Host(dtype, std::move(shape));
  std::memcpy(tensor.raw(), bytes.data(), bytes.size());
  return tensor;
}

absl::StatusOr<Tensor> ReadTensorProtoFile(const std::string& path) {
  absl::StatusOr<InputFile> file = OpenInputFile(path);
  if (!file.ok()) return file.status();
  if (file->size > static_cast<uint64_t>(INT_MAX)) {  // protobuf's limit on one message
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": is ", file->size, " bytes; a TensorProto file must be under 2 GiB (use .npy)"));
  }
  onnx::TensorProto proto;
  google::protobuf::io::FileInputStream input(file->fd.get());
  if (!proto.ParseFromZeroCopyStream(&input)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a TensorProto"));
  }
  absl::StatusOr<Tensor> tensor = TensorFromProto(proto);
  if (!tensor.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", tensor.status().message()));
  }
  return tensor;
}

onnx::TensorProto TensorToProto(const Tensor& tensor, const std::string& name) {
  onnx::TensorProto proto;
  proto.set_name(name);
  proto.set_data_type(static_cast<int32_t>(tensor.dtype()));
  for (int64_t d : tensor.shape()) proto.add_dims(d);
  proto.set_raw_data(tensor.raw(), tensor.bytes());
  return proto;
}

absl::StatusOr<Tensor> ConstantNodeValue(const onnx::NodeProto& node) {
  const Attributes attributes(node);
  if (const onnx::AttributeProto* value = attributes.Find("value")) {
    absl::StatusOr<Tensor> tensor = TensorFromProto(value->t());
    if (tensor.ok()) return tensor;
    return absl::Status(tensor.status().code(),
                        absl::StrCat(NodeLabel(node), ": ", tensor.status().message()));
  }
  if (attributes.Has("value_float")) {
    Tensor t = Tensor::Host(DType::kFloat, {});
    t.data<float>()[0] = attributes.Float("value_float", 0);
    return t;
  }
  if (attributes.Has("value_int")) {
    Tensor t = Tensor::Host(DType::kInt64, {});
    t.data<int64_t>()[0] = attributes.Int("value_int", 0);
    return t;
  }
  if (attributes.Has("value_floats")) {
    const std::vector<float> values = attributes.Floats("value_floats");
    Tensor t = Tensor::Host(DType::kFloat, {static_cast<int64_t>(values.size())});
    std::copy(values.begin(), values.end(), t.data<float>());
    return t;
  }
  if (attributes.Has("value_ints")) {
    const std::vector<int64_t> values = attributes.Ints("value_ints");
    Tensor t = Tensor::Host(DType::kInt64, {static_cast<int64_t>(values.size())});
    std::copy(values.begin(), values.end(), t.data<int64_t>());
    return t;
  }
  return absl::UnimplementedError(absl::StrCat(
      NodeLabel(node),
      ": Constant needs one of value, value_float(s), value_int(s) (strings and sparse tensors "
      "are not supported)"));
}

}  // namespace ampc
