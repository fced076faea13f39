#include "runtime/core/tensor.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/core/backend.h"

namespace ampc {

Buffer::~Buffer() {
  if (backend_ != nullptr) {
    backend_->Release(data_, bytes_);
  } else {
    ::operator delete[](data_, std::align_val_t{64});
  }
}

int64_t ElementCount(std::span<const int64_t> shape) {
  // A zero dim anywhere makes the tensor empty, however large the dims before it.
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  return count;
}

absl::StatusOr<size_t> CheckedBytes(DType dtype, std::span<const int64_t> shape) {
  constexpr uint64_t kLimit = uint64_t{1} << 48;
  uint64_t bits = static_cast<uint64_t>(DTypeBits(dtype));  // bits, so sub-byte types count too
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("negative dimension in shape ", ShapeString(shape)));
    }
    if (__builtin_mul_overflow(bits, static_cast<uint64_t>(d), &bits) || bits > kLimit * 8) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shape ", ShapeString(shape), " of ", DTypeName(dtype), " needs more than 2^48 bytes"));
    }
  }
  return static_cast<size_t>((bits + 7) / 8);
}

std::string ShapeString(std::span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

Tensor Tensor::Host(DType dtype, Shape shape) {
  const size_t bytes = DTypeBytes(dtype, ElementCount(shape));
  void* data = ::operator new[](bytes == 0 ? 1 : bytes, std::align_val_t{64});
  std::memset(data, 0, bytes);
  return Tensor(dtype, std::move(shape), std::make_shared<Buffer>(data, bytes, nullptr));
}

std::string Tensor::TypeString() const {
  return absl::StrCat(DTypeName(dtype_), ShapeString(shape_));
}

namespace {

// Physical memory, or the cgroup v2 limit when it is lower; read once.
uint64_t MachineMemory() {
  static const uint64_t memory = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    uint64_t bytes = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * page : UINT64_MAX;
    std::ifstream cgroup("/sys/fs/cgroup/memory.max");
    std::string text;
    uint64_t limit = 0;
    if (cgroup >> text && absl::SimpleAtoi(text, &limit) && limit > 0 && limit < bytes) {
      bytes = limit;
    }
    return bytes;
  }();
  return memory;
}

}  // namespace

absl::StatusOr<Tensor> Backend::NewTensor(DType dtype, Shape shape) {
  absl::StatusOr<size_t> bytes = CheckedBytes(dtype, shape);
  if (!bytes.ok()) return bytes.status();
  if (*bytes > limits_.max_tensor_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a tensor ", DTypeName(dtype), ShapeString(shape), " of ", *bytes,
                     " bytes is over the limit of ", limits_.max_tensor_bytes,
                     " bytes per tensor (--max-tensor-bytes)"));
  }
  const uint64_t live = memory_stats().live_bytes;
  const uint64_t max_memory = limits_.max_memory_bytes != 0 ? limits_.max_memory_bytes
                              : name() == "cpu"             ? MachineMemory()
                                                            : UINT64_MAX;
  if (*bytes > max_memory || live > max_memory - *bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a tensor ", DTypeName(dtype), ShapeString(shape), " of ", *bytes,
                     " bytes with ", live, " bytes in use is over the limit of ", max_memory,
                     " bytes of tensor memory (--max-memory)"));
  }
  absl::StatusOr<std::shared_ptr<Buffer>> buffer = Allocate(*bytes);
  if (!buffer.ok()) return buffer.status();
  return Tensor(dtype, std::move(shape), *std::move(buffer));
}

bool InHostMemory(const Tensor& tensor) {
  return tensor.backend() == nullptr || tensor.backend()->name() == "cpu";
}

absl::StatusOr<Tensor> ToHost(const Tensor& tensor) {
  if (InHostMemory(tensor)) return tensor;
  Tensor host = Tensor::Host(tensor.dtype(), tensor.shape());
  if (absl::Status status = tensor.backend()->CopyToHost(tensor, host.raw()); !status.ok())
    return status;
  return host;
}

absl::Status Backend::CopyAllToHost(std::span<const Tensor* const> tensors,
                                    std::span<void* const> hosts) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (InHostMemory(*tensors[i])) {
      std::memcpy(hosts[i], tensors[i]->raw(), tensors[i]->bytes());
    } else if (absl::Status status = CopyToHost(*tensors[i], hosts[i]); !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

absl::Status Backend::Copy(const Tensor& from, Tensor& to) {
  if (from.bytes() != to.bytes()) {
    return absl::InternalError(
        absl::StrCat("copying ", from.TypeString(), " into ", to.TypeString(), " (an ampc bug)"));
  }
  if (!InHostMemory(from) || !InHostMemory(to)) {
    return absl::UnimplementedError(absl::StrCat("the ", name(), " backend cannot copy tensors"));
  }
  std::memmove(to.raw(), from.raw(), from.bytes());
  return absl::OkStatus();
}

absl::Status Backend::BeginCapture() {
  return absl::UnimplementedError(absl::StrCat("the ", name(), " backend cannot capture work"));
}

absl::StatusOr<std::unique_ptr<CapturedWork>> Backend::EndCapture() {
  return absl::FailedPreconditionError("no capture in progress");
}

absl::StatusOr<Tensor> OnBackend(const Tensor& tensor, Backend& backend) {
  if (tensor.backend() == &backend || (tensor.backend() == nullptr && backend.name() == "cpu")) {
    return tensor;
  }
  absl::StatusOr<Tensor> copy = backend.NewTensor(tensor.dtype(), tensor.shape());
  if (!copy.ok()) return copy.status();
  if (absl::Status status = backend.CopyFromHost(tensor.raw(), *copy); !status.ok()) return status;
  return copy;
}

}  // namespace ampc
