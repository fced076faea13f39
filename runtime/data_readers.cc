#include "runtime/data_readers.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/dtype.h"
#include "runtime/npy.h"
#include "runtime/status_macros.h"
#include "runtime/tensor_proto.h"

namespace ampc {
namespace {

constexpr uint32_t kIdxImagesMagic = 0x00000803;  // unsigned bytes, 3 dims
constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // unsigned bytes, 1 dim
constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

absl::Status Bad(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

// The whole file, decompressed when it is gzip (zlib reads raw files unchanged).
absl::StatusOr<std::string> ReadMaybeGzip(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string bytes;
  char chunk[1 << 16];
  int n;
  while ((n = gzread(file, chunk, sizeof(chunk))) > 0) bytes.append(chunk, n);
  int error = Z_OK;
  const char* message = n < 0 ? gzerror(file, &error) : nullptr;
  const std::string reason = message != nullptr ? message : "";
  gzclose(file);
  if (n < 0) return Bad(path, absl::StrCat("cannot read: ", reason));
  return bytes;
}

uint32_t BigEndian32(const std::string& bytes, size_t offset) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + offset);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// The dims of an IDX file of unsigned bytes with `rank` dims, checked against its length.
absl::StatusOr<Shape> IdxHeader(const std::string& path, const std::string& bytes, uint32_t magic,
                                int rank) {
  const size_t header = 4 + 4 * static_cast<size_t>(rank);
  if (bytes.size() < 4) return Bad(path, "short read: no IDX magic number");
  if (BigEndian32(bytes, 0) != magic) {
    return Bad(path,
               absl::StrFormat("IDX magic number 0x%08x, expected 0x%08x (%s)",
                               BigEndian32(bytes, 0), magic, rank == 1 ? "labels" : "images"));
  }
  if (bytes.size() < header) return Bad(path, "short read: the IDX header is cut off");
  Shape dims;
  uint64_t count = 1;
  for (int i = 0; i < rank; ++i) {
    dims.push_back(BigEndian32(bytes, 4 + 4 * i));
    count *= static_cast<uint64_t>(dims.back());
  }
  const uint64_t data = bytes.size() - header;
  if (data < count) {
    return Bad(path, absl::StrCat("short read: the header declares ", ShapeString(dims), " (",
                                  count, " bytes of data), the file holds ", data));
  }
  if (data > count) {
    return Bad(path, absl::StrCat(data - count, " bytes after the ", ShapeString(dims), " data"));
  }
  return dims;
}

// First of `dir/name.gz` and `dir/name` that exists (the .gz when neither does, for the error).
std::string IdxPath(const std::string& dir, const std::string& name) {
  const std::filesystem::path base = std::filesystem::path(dir) / name;
  if (!std::filesystem::exists(base.string() + ".gz") && std::filesystem::exists(base)) {
    return base.string();
  }
  return base.string() + ".gz";
}

// Training on NaN or infinity poisons the weights (or, with loss scaling, skips every step).
absl::Status CheckFinite(const Tensor& images, const std::string& path) {
  if (images.dtype() != DType::kFloat || images.size() == 0) return absl::OkStatus();
  const int64_t per_sample = images.size() / std::max<int64_t>(images.dim(0), 1);
  const float* values = images.data<float>();
  for (int64_t i = 0; i < images.size(); ++i) {
    if (std::isfinite(values[i])) continue;
    return Bad(path, absl::StrCat("sample ", i / per_sample, " holds ",
                                  std::isnan(values[i]) ? "NaN" : "an infinite value", " (element ",
                                  i, "); ampc train needs finite data"));
  }
  return absl::OkStatus();
}

absl::StatusOr<DataSplits> LoadIdxDir(const std::string& label, const std::string& dir) {
  DataSplits splits;
  splits.files = {IdxPath(dir, "train-images-idx3-ubyte"), IdxPath(dir, "train-labels-idx1-ubyte"),
                  IdxPath(dir, "t10k-images-idx3-ubyte"), IdxPath(dir, "t10k-labels-idx1-ubyte")};
  AMPC_ASSIGN_OR_RETURN(splits.train, ReadIdxDataset(splits.files[0], splits.files[1]));
  AMPC_ASSIGN_OR_RETURN(splits.test, ReadIdxDataset(splits.files[2], splits.files[3]));
  splits.description = absl::StrCat(label, " (", dir, "): ", splits.train.size(), " train, ",
                                    splits.test.size(), " test");
  return splits;
}

// A dataset of images and labels read from the files `images` and `labels` (named in errors):
// images uint8 or float32 [N, ...], labels of any integer type [N], N the same.
absl::StatusOr<Dataset> DatasetOf(Tensor images_tensor, const std::string& images,
                                  const Tensor& raw_labels, const std::string& labels) {
  Dataset data;
  data.images = std::move(images_tensor);
  if (data.images.dtype() != DType::kUint8 && data.images.dtype() != DType::kFloat) {
    return Bad(images, absl::StrCat("images must be uint8 or float32, not ",
                                    DTypeName(data.images.dtype())));
  }
  if (data.images.rank() < 1 || raw_labels.rank() != 1) {
    return Bad(labels, absl::StrCat("expected images [N, ...] and labels [N], got ",
                                    ShapeString(data.images.shape()), " and ",
                                    ShapeString(raw_labels.shape())));
  }
  data.labels = Tensor::Host(DType::kInt64, raw_labels.shape());
  const bool integer = Dispatch<AMPC_INT_TYPES>(raw_labels.dtype(), [&]<typename T>() {
    for (int64_t i = 0; i < raw_labels.size(); ++i) {
      data.labels.data<int64_t>()[i] = static_cast<int64_t>(raw_labels.data<T>()[i]);
    }
  });
  if (!integer) {
    return Bad(labels,
               absl::StrCat("labels must be integers, not ", DTypeName(raw_labels.dtype())));
  }
  AMPC_RETURN_IF_ERROR(CheckFinite(data.images, images));
  if (data.images.dim(0) != data.labels.dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat(images, " holds ", data.images.dim(0),
                                                   " images but ", labels, " holds ",
                                                   data.labels.dim(0), " labels"));
  }
  return data;
}

}  // namespace

absl::StatusOr<Tensor> ReadIdxImages(const std::string& path) {
  AMPC_ASSIGN_OR_RETURN(std::string bytes, ReadMaybeGzip(path));
  AMPC_ASSIGN_OR_RETURN(Shape dims, IdxHeader(path, bytes, kIdxImagesMagic, 3));
  Tensor images = Tensor::Host(DType::kUint8, dims);
  std::memcpy(images.raw(), bytes.data() + 16, images.bytes());
  return images;
}

absl::StatusOr<Tensor> ReadIdxLabels(const std::string& path) {
  AMPC_ASSIGN_OR_RETURN(std::string bytes, ReadMaybeGzip(path));
  AMPC_ASSIGN_OR_RETURN(Shape dims, IdxHeader(path, bytes, kIdxLabelsMagic, 1));
  Tensor labels = Tensor::Host(DType::kInt64, dims);
  for (int64_t i = 0; i < labels.size(); ++i) {
    labels.data<int64_t>()[i] = static_cast<unsigned char>(bytes[8 + i]);
  }
  return labels;
}

absl::StatusOr<Dataset> ReadIdxDataset(const std::string& images, const std::string& labels) {
  Dataset data;
  AMPC_ASSIGN_OR_RETURN(data.images, ReadIdxImages(images));
  AMPC_ASSIGN_OR_RETURN(data.labels, ReadIdxLabels(labels));
  AMPC_RETURN_IF_ERROR(CheckFinite(data.images, images));
  if (data.images.dim(0) != data.labels.dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat(images, " holds ", data.images.dim(0),
                                                   " images but ", labels, " holds ",
                                                   data.labels.dim(0), " labels"));
  }
  return data;
}

absl::StatusOr<Dataset> ReadNpyDataset(const std::string& images, const std::string& labels) {
  AMPC_ASSIGN_OR_RETURN(Tensor images_tensor, ReadNpy(images));
  AMPC_ASSIGN_OR_RETURN(Tensor raw_labels, ReadNpy(labels));
  return DatasetOf(std::move(images_tensor), images, raw_labels, labels);
}

absl::StatusOr<Dataset> ReadPbDataset(const std::string& images, const std::string& labels) {
  AMPC_ASSIGN_OR_RETURN(Tensor images_tensor, ReadTensorProtoFile(images));
  AMPC_ASSIGN_OR_RETURN(Tensor raw_labels, ReadTensorProtoFile(labels));
  return DatasetOf(std::move(images_tensor), images, raw_labels, labels);
}

Dataset SyntheticDataset(int64_t count, uint64_t seed) {
  constexpr int kClasses = 10, kPixels = 28 * 28;
  std::mt19937_64 engine(seed);
  auto uniform = [&engine] { return static_cast<float>(engine() >> 40) / float(1 << 24); };
  std::mt19937_64 pattern_engine(0x5eed);  // the class patterns are the same for every seed
  std::vector<float> patterns(kClasses * kPixels);
  for (float& p : patterns) p = static_cast<float>(pattern_engine() >> 40) / float(1 << 24);
  Dataset data{Tensor::Host(DType::kFloat, {count, 28, 28}), Tensor::Host(DType::kInt64, {count})};
  for (int64_t n = 0; n < count; ++n) {
    const int64_t label = static_cast<int64_t>(engine() % kClasses);
    data.labels.data<int64_t>()[n] = label;
    float* image = data.images.data<float>() + n * kPixels;
    for (int i = 0; i < kPixels; ++i) {
      image[i] = std::clamp(patterns[label * kPixels + i] + 0.6f * (uniform() - 0.5f), 0.0f, 1.0f);
    }
  }
  return data;
}

absl::Status CheckDataSpec(const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : spec.substr(colon + 1);
  int64_t count = 0;
  if (kind == "synthetic" && !arg.empty() && (!absl::SimpleAtoi(arg, &count) || count < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--data ", spec, ": expected synthetic:N with N >= 1"));
  }
  if (kind == "fashion-mnist" || kind == "synthetic" ||
      ((kind == "mnist" || kind == "npy" || kind == "pb") && !arg.empty())) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--data ", spec,
                   ": expected fashion-mnist[:DIR], mnist:DIR, npy:DIR, pb:DIR or synthetic[:N]"));
}

absl::StatusOr<DataSplits> LoadData(const std::string& spec) {
  if (absl::Status s = CheckDataSpec(spec); !s.ok()) return s;
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (kind == "fashion-mnist") return LoadIdxDir(kind, arg.empty() ? kFashionMnistDir : arg);
  if (kind == "mnist" && !arg.empty()) return LoadIdxDir(kind, arg);
  if ((kind == "npy" || kind == "pb") && !arg.empty()) {
    const auto read = kind == "npy" ? ReadNpyDataset : ReadPbDataset;
    const std::filesystem::path dir(arg);
    auto path = [&](const char* split, const char* part) {
      return (dir / absl::StrCat(split, "-", part, ".", kind)).string();
    };
    DataSplits splits;
    splits.files = {path("train", "images"), path("train", "labels"), path("test", "images"),
                    path("test", "labels")};
    AMPC_ASSIGN_OR_RETURN(splits.train, read(splits.files[0], splits.files[1]));
    AMPC_ASSIGN_OR_RETURN(splits.test, read(splits.files[2], splits.files[3]));
    splits.description = absl::StrCat(kind, " (", arg, "): ", splits.train.size(), " train, ",
                                      splits.test.size(), " test");
    return splits;
  }
  int64_t count = 2048;  // what is left is synthetic[:N], N checked by CheckDataSpec
  if (!arg.empty() && !absl::SimpleAtoi(arg, &count)) return absl::InternalError("unchecked N");
  DataSplits splits{
      SyntheticDataset(count, 1), SyntheticDataset(std::max<int64_t>(count / 4, 1), 2), "", {}};
  splits.description =
      absl::StrCat("synthetic: ", splits.train.size(), " train, ", splits.test.size(), " test");
  return splits;
}

std::vector<int64_t> EpochOrder(int64_t size, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(size);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 engine(seed);
  for (int64_t e = 0; e <= epoch; ++e) {
    for (int64_t i = size - 1; i > 0; --i) {
      std::swap(order[i], order[engine() % static_cast<uint64_t>(i + 1)]);
    }
  }
  return order;
}

absl::StatusOr<Batch> MakeBatch(const Dataset& data, std::span<const int64_t> indices,
                                const Shape& sample_shape) {
  const int64_t n = data.size();
  const int64_t per_sample = n == 0 ? 0 : data.images.size() / n;
  if (ElementCount(sample_shape) != per_sample) {
    return absl::InvalidArgumentError(absl::StrCat("the model's image input takes samples of ",
                                                   ShapeString(sample_shape), "; the data has ",
                                                   per_sample, " values per sample"));
  }
  const int64_t count = static_cast<int64_t>(indices.size());
  Shape shape = {count};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  Batch batch{Tensor::Host(DType::kFloat, shape), Tensor::Host(DType::kInt64, {count})};
  float* out = batch.images.data<float>();
  for (int64_t b = 0; b < count; ++b) {
    const int64_t index = indices[b];
    if (index < 0 || index >= n) {
      return absl::OutOfRangeError(absl::StrCat("sample ", index, " of ", n));
    }
    batch.labels.data<int64_t>()[b] = data.labels.data<int64_t>()[index];
    if (data.images.dtype() == DType::kUint8) {
      const uint8_t* pixels = data.images.data<uint8_t>() + index * per_sample;
      for (int64_t i = 0; i < per_sample; ++i) out[b * per_sample + i] = pixels[i] / 255.0f;
    } else {
      std::memcpy(out + b * per_sample, data.images.data<float>() + index * per_sample,
                  per_sample * sizeof(float));
    }
  }
  return batch;
}

}  // namespace ampc
