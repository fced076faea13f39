#include "passes/graph/convert_constant.h"

#include <cassert>
#include <string>
#include <thread>

#include "passes/graph/tensor_data.h"

namespace ampc {
namespace {

using onnx::TensorProto;

constexpr size_t kParallelBytes = size_t{1} << 20;

size_t SizeOf(int type) { return type == TensorProto::FLOAT ? 4 : 2; }

}  // namespace

TensorProto ConvertConstant(const TensorProto& tensor, int to, bool clamp, ConversionStats& stats) {
  TensorProto out;
  out.mutable_dims()->CopyFrom(tensor.dims());
  out.set_data_type(to);
  std::string typed;  // only tensors without raw_data are copied out of their typed field
  const std::string* bytes = &tensor.raw_data();
  if (bytes->empty()) {
    typed = RawBytes(tensor);
    bytes = &typed;
  }
  const int from = tensor.data_type();
  const size_t n = bytes->size() / SizeOf(from);
  std::string& raw = *out.mutable_raw_data();
  raw.resize(n * SizeOf(to));
  const int threads =
      bytes->size() >= kParallelBytes && std::thread::hardware_concurrency() >= 2 ? 2 : 1;
  const bool converted =
      ConvertFloatsParallel(bytes->data(), from, raw.data(), to, n, clamp, stats, threads);
  assert(converted && "ConvertConstant takes FLOAT, FLOAT16 and BFLOAT16 only");
  if (!converted) raw.clear();
  return out;
}

}  // namespace ampc
