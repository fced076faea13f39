// Reading and writing ONNX model files: external data, atomic writes.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/external_data.h"

namespace ampc {

struct LoadedModel {
  onnx::ModelProto model;               // every tensor's data inline (external data read in)
  bool used_external_data = false;      // the file referenced external data
  std::vector<std::string> data_files;  // the external data files read (paths)
};

// Loads `path`. External data (ONNX spec: data_location EXTERNAL with `location`, `offset`,
// `length`, `checksum` entries) is read into raw_data and the external fields are cleared, in
// the graph, its subgraphs, tensor attributes, sparse tensors, functions and training_info.
// A `location` is relative to the model's directory and may not leave it; a missing `length`
// means dims x element size; `checksum` is accepted but not verified.
// Errors are InvalidArgument/NotFound, one line, starting with `path` (and naming the tensor).
// With `defer_min_bytes` (0: none), tensors of at least that many bytes of external data stay
// in their files (passes/graph/deferred_data.h) and are read when used: the compile of a large
// model holds one chunk of its weights at a time.
struct LoadOptions {
  uint64_t defer_min_bytes = 0;
};
absl::StatusOr<LoadedModel> LoadModel(const std::string& path, const LoadOptions& options = {});

struct SaveOptions {
  enum class ExternalData { kAuto, kAlways, kNever };
  ExternalData external_data = ExternalData::kAuto;
  bool input_used_external_data = false;  // kAuto writes external data when the input used it
  // kAuto also writes external data when the inline model would exceed this many bytes
  // (protobuf cannot serialize a message of 2 GiB or more).
  int64_t inline_limit_bytes = int64_t{1} << 30;
  // Tensors with at least this many bytes of data go to the external file.
  int64_t external_min_bytes = 1024;
  // Files this save must neither write nor remove: the external data of the model it came from.
  std::vector<std::string> keep = {};
  // The external data file, opened by OpenOutputData before the compile (the sink of its deferred
  // tensors); null: the save opens one. Set, the save writes external data whatever the mode.
  ExternalDataWriter* data = nullptr;
};

// Writes `model` to `path` through a temporary file renamed into place. External data goes to
// one file `<basename of path>.data` beside it (not written when no tensor qualifies), each
// tensor at an offset that is a multiple of 4096 (page-aligned, so a runtime can mmap it).
// Serialization is deterministic: the same model gives byte-identical files. `model` is not
// modified. On failure no temporary file is left and existing outputs are untouched.
// Write failures are Unavailable (exit code 3); a model that cannot be written inline
// (2 GiB or more with kNever) is InvalidArgument.
absl::Status SaveModel(const onnx::ModelProto& model, const std::string& path,
                       const SaveOptions& options = {});

// The external data file a save of `path` under `options` writes, opened now (written from the
// first tensor on, renamed into place by the save; removed if the save never happens).
absl::StatusOr<std::unique_ptr<ExternalDataWriter>> OpenOutputData(const std::string& path,
                                                                   const SaveOptions& options);

// `also`, then `path` and the external data files a save to `path` may write.
std::vector<std::string> FilesASaveMayWrite(const std::string& path,
                                            std::vector<std::string> also = {});

// CheckWritable for `path`, and CheckReplaceable for the data files a save to it may write: a
// directory named OUT.data is refused before any work, not after it.
absl::Status CheckSaveDestination(const std::string& path);

// The data files a save to `target` may write (FilesASaveMayWrite) that the model file at
// `model` names, found by scanning its bytes without loading it: a model copied from a
// checkpoint reads the checkpoint's data.
std::vector<std::string> DataFilesItReads(const std::string& model, const std::string& target);

// Records the model file at `path` and its external data files as inputs of this run
// (NoteInputFile): no save may replace them.
void NoteInputs(const std::string& path, const LoadedModel& loaded);

// True if `a` and `b` name the same file: both exist and are the same inode, or their
// normalized absolute paths are equal.
bool SameFile(const std::string& a, const std::string& b);

}  // namespace ampc
