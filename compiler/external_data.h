// ONNX external data: tensor bytes kept in files beside the model (data_location EXTERNAL with
// `location`, `offset` and `length` entries), read in on load and written out on save.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/file_io.h"
#include "passes/graph/deferred_data.h"

namespace ampc {

// Reads every external tensor of `model` (loaded from `model_path`) into raw_data and clears its
// external fields; a tensor of at least `defer_min_bytes` (0: none) is deferred instead
// (passes/graph/deferred_data.h: read when used, from the file kept open). Returns the paths of
// the files read (none: no tensor was external). Errors start with `model_path`.
absl::StatusOr<std::vector<std::string>> ReadExternalData(const std::string& model_path,
                                                          onnx::ModelProto& model,
                                                          uint64_t defer_min_bytes = 0);

// Writes the external data file `data_name` (a file name, beside the model) for a model about to
// be saved at `model_path`: a temporary file, renamed into place by Commit.
// It is also the sink of deferred tensors converted during a compile (deferred_data.h): their
// data is written here as it is converted, before the save.
class ExternalDataWriter : public DeferredSink {
 public:
  ExternalDataWriter(const std::string& model_path, const std::string& data_name,
                     int64_t min_bytes);

  const std::string& data_name() const { return location_; }
  // Moves the data of each tensor with at least min_bytes of it to the file, at offsets that are
  // multiples of 4096, and points the tensor there (deferred tensors whatever their size); then
  // closes the file.
  absl::Status Externalize(onnx::ModelProto& model);
  // Renames the file into place; nothing to do when no tensor qualified.
  absl::Status Commit();

  absl::StatusOr<uint64_t> Begin(uint64_t bytes) override;
  absl::Status Write(const char* data, uint64_t size) override;

 private:
  absl::Status ExternalizeTensor(onnx::TensorProto& tensor);
  absl::Status PlaceDeferred(onnx::TensorProto& tensor);
  void PointAt(onnx::TensorProto& tensor, uint64_t offset, uint64_t length) const;

  TempFile file_;
  std::string location_;
  uint64_t min_bytes_;
  uint64_t end_ = 0;
};

}  // namespace ampc
