// A runtime tensor: element type, shape and a view of a buffer that a Backend allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/core/dtype.h"

namespace ampc {

class Backend;

// Memory owned by a backend; returned to it when the last Tensor viewing it goes away.
class Buffer {
 public:
  Buffer(void* data, size_t bytes, Backend* backend)
      : data_(data), bytes_(bytes), backend_(backend) {}
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Backend* backend() const { return backend_; }

 private:
  void* data_;
  size_t bytes_;
  Backend* backend_;  // nullptr: host memory allocated with new[] (tests, file readers)
};

using Shape = std::vector<int64_t>;

// Number of elements (1 for a scalar). The shape must have passed CheckedBytes.
int64_t ElementCount(std::span<const int64_t> shape);

// The bytes a tensor of this type and shape holds; InvalidArgument for a negative dim, or a
// size that overflows or exceeds 2^48 bytes (shapes come from untrusted models and files).
absl::StatusOr<size_t> CheckedBytes(DType dtype, std::span<const int64_t> shape);

// "[2,3,4]"; "[]" for a scalar.
std::string ShapeString(std::span<const int64_t> shape);

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape, std::shared_ptr<Buffer> buffer, size_t offset = 0)
      : dtype_(dtype), shape_(std::move(shape)), buffer_(std::move(buffer)), offset_(offset) {}

  // A tensor in host memory of its own (zero-filled), for tests, file readers and constants.
  // The shape must have passed CheckedBytes.
  static Tensor Host(DType dtype, Shape shape);

  bool empty() const { return buffer_ == nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int axis) const { return shape_[axis]; }
  int64_t size() const { return ElementCount(shape_); }
  size_t bytes() const { return DTypeBytes(dtype_, size()); }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  Backend* backend() const { return buffer_ ? buffer_->backend() : nullptr; }

  void* raw() const { return static_cast<char*>(buffer_->data()) + offset_; }
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw());
  }
  template <typename T>
  std::span<T> span() const {
    return {data<T>(), static_cast<size_t>(size())};
  }

  // The same data seen with another shape of the same element count (Reshape, Flatten, ...).
  Tensor Reshaped(Shape shape) const { return Tensor(dtype_, std::move(shape), buffer_, offset_); }

  // "float16[2,3]".
  std::string TypeString() const;

 private:
  DType dtype_ = DType::kUndefined;
  Shape shape_;
  std::shared_ptr<Buffer> buffer_;
  size_t offset_ = 0;
};

}  // namespace ampc
