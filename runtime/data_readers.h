// Training data for `ampc train`: IDX files (MNIST, Fashion-MNIST; gzip or raw), .npy files,
// ONNX TensorProto .pb files and a synthetic source, as a Dataset of images and labels in host
// memory, cut into batches in a seeded per-epoch order.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/core/tensor.h"

namespace ampc {

// One array of the by-name layout: the values of graph input `name` for every sample, [N, ...].
struct Column {
  std::string name;
  Tensor values;
  std::string file;  // where it was read ("" for synthetic data)
};

// Either images and labels (the IDX, {train,test}-{images,labels} and 784-pixel synthetic
// layouts) or named columns (by_name(): DIR/{train,test}/INPUT_NAME.npy, or synthetic samples
// shaped from the model), every one with the same N.
struct Dataset {
  // [N, ...] per-sample pixels: uint8 (0..255, scaled by 1/255 in batches) or float32 (as is).
  Tensor images;
  Tensor labels;  // int64 [N]
  std::vector<Column> columns;
  bool by_name() const { return !columns.empty(); }
  int64_t size() const {
    if (by_name()) return columns[0].values.rank() == 0 ? 0 : columns[0].values.dim(0);
    return labels.empty() ? 0 : labels.dim(0);
  }
  const Column* Find(const std::string& name) const {
    for (const Column& column : columns) {
      if (column.name == name) return &column;
    }
    return nullptr;
  }
};

struct DataSplits {
  Dataset train;
  Dataset test;
  std::string description;         // "fashion-mnist (/usr/share/...): 60000 train, 10000 test"
  std::vector<std::string> files;  // the files read (none for synthetic data)
  int64_t synthetic = 0;           // N of synthetic[:N]; 0 for data read from files
};

// The by-name layout of one split: every DIR/SPLIT/*.npy (or *.pb) file is the column named
// after the file's stem, [N, ...] of any integer or float dtype (float64 read as float32); every
// column has the same N (an error names the two files that differ).
absl::StatusOr<Dataset> ReadColumnsDir(const std::string& dir, const std::string& extension);

// IDX files (magic 0x00000803 with dims N, rows, cols for images; 0x00000801 with N for labels),
// read through zlib, so gzip-compressed and raw files alike. Errors name the file: a wrong
// magic, a header or data shorter than it declares, bytes after the data.
absl::StatusOr<Tensor> ReadIdxImages(const std::string& path);  // uint8 [N, rows, cols]
absl::StatusOr<Tensor> ReadIdxLabels(const std::string& path);  // int64 [N]

// Images and labels of matching count (an error names both files otherwise).
absl::StatusOr<Dataset> ReadIdxDataset(const std::string& images, const std::string& labels);
// .npy images (uint8 or float32, [N, ...]; float32 must be finite: an error names the first
// sample that is not) and labels (any integer type, [N]).
absl::StatusOr<Dataset> ReadNpyDataset(const std::string& images, const std::string& labels);
// The same from ONNX TensorProto .pb files (runtime/core/tensor_proto.h).
absl::StatusOr<Dataset> ReadPbDataset(const std::string& images, const std::string& labels);

// Every label of `data` in [0, classes) or equal to `ignored` (a loss's ignore_index, when it
// has one); the error names `file` and the first sample outside.
absl::Status CheckLabels(const Dataset& data, int64_t classes, const std::string& file,
                         std::optional<int64_t> ignored = std::nullopt);

// `count` float32 [28, 28] images of 10 classes: each class a fixed random pattern, each sample
// its class's pattern plus uniform noise, clamped to [0, 1]; labels uniform. Deterministic in
// `seed`.
Dataset SyntheticDataset(int64_t count, uint64_t seed);

// A --data value: `fashion-mnist[:DIR]` or `mnist:DIR` (DIR/{train,t10k}-{images-idx3,
// labels-idx1}-ubyte[.gz]; fashion-mnist's default DIR is /usr/share/datasets/fashion-mnist),
// `npy:DIR` (DIR/{train,test}-{images,labels}.npy, or the by-name layout DIR/{train,test}/
// INPUT_NAME.npy when DIR/train is a directory), `pb:DIR` (the same names with .pb) or
// `synthetic[:N]` (N training samples, default 2048, and N/4 test samples of other noise).
absl::StatusOr<DataSplits> LoadData(const std::string& spec);

// The syntax of a --data SOURCE alone (LoadData checks it first); InvalidArgument naming it.
absl::Status CheckDataSpec(const std::string& spec);

// The sample order of `epoch` (0-based): one std::mt19937_64 seeded with `seed` drives a
// Fisher-Yates shuffle per epoch, each epoch shuffling the previous epoch's order (the index
// for position i is engine() % (i + 1), so the order is the same on every platform). Epoch e
// replays the shuffles of epochs 0..e-1, so a resumed run gets the same order.
std::vector<int64_t> EpochOrder(int64_t size, uint64_t seed, int64_t epoch);

struct Batch {
  Tensor images;  // float32 [B, sample_shape...]
  Tensor labels;  // int64 [B]
};

// The samples at `indices`, each image reshaped to `sample_shape` (its element count must equal
// the dataset's per-sample count, e.g. [784] or [1, 28, 28]).
absl::StatusOr<Batch> MakeBatch(const Dataset& data, std::span<const int64_t> indices,
                                const Shape& sample_shape);

}  // namespace ampc
