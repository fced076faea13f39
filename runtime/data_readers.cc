#include "runtime/data_readers.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <type_traits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/dtype.h"
#include "runtime/core/input_file.h"
#include "runtime/core/tensor_proto.h"
#include "runtime/npy.h"

namespace ampc {
namespace {

constexpr uint32_t kIdxImagesMagic = 0x00000803;  // unsigned bytes, 3 dims
constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // unsigned bytes, 1 dim
constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

absl::Status Bad(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

// Deflate's largest expansion is 1032:1; a gzip file declaring more data than that is refused
// before anything is decompressed.
constexpr uint64_t kMaxGzipRatio = 1032;
constexpr uint64_t kMaxTrailingCount = uint64_t{1} << 26;  // trailing bytes counted, at most

uint32_t BigEndian32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | uint32_t{u[3]};
}

// An IDX file of unsigned bytes, gzip or raw (zlib reads raw files unchanged): Open reads and
// checks the header; ReadData then reads exactly the bytes it declares, never more.
class IdxFile {
 public:
  static absl::StatusOr<IdxFile> Open(const std::string& path, uint32_t magic, int rank) {
    AMPC_ASSIGN_OR_RETURN(InputFile file, OpenInputFile(path));
    gzFile gz = gzdopen(file.fd.get(), "rb");
    if (gz == nullptr) return Bad(path, "cannot read: out of memory");
    file.fd.release();  // gzclose closes it
    IdxFile idx(path, gz, file.size);
    AMPC_RETURN_IF_ERROR(idx.ReadHeader(magic, rank));
    return idx;
  }
  IdxFile(IdxFile&& other) noexcept
      : path_(std::move(other.path_)),
        gz_(std::exchange(other.gz_, nullptr)),
        size_(other.size_),
        dims_(std::move(other.dims_)),
        count_(other.count_) {}
  ~IdxFile() {
    if (gz_ != nullptr) gzclose(gz_);
  }

  const Shape& dims() const { return dims_; }
  uint64_t count() const { return count_; }  // bytes of data

  // Reads the count() bytes of data into `out`; no byte may follow them.
  absl::Status ReadData(char* out) {
    AMPC_ASSIGN_OR_RETURN(uint64_t held, Read(out, count_));
    if (held < count_) {
      return Bad(path_, absl::StrCat("short read: the header declares ", ShapeString(dims_), " (",
                                     count_, " bytes of data), the file holds ", held));
    }
    uint64_t rest = 0;
    char scratch[1 << 16];
    for (uint64_t n = 1; n > 0 && rest < kMaxTrailingCount; rest += n) {
      AMPC_ASSIGN_OR_RETURN(n, Read(scratch, sizeof scratch));
    }
    if (rest == 0) return absl::OkStatus();
    return Bad(path_, absl::StrCat(rest >= kMaxTrailingCount ? "at least " : "", rest,
                                   " bytes after the ", ShapeString(dims_), " data"));
  }

 private:
  IdxFile(std::string path, gzFile gz, uint64_t size)
      : path_(std::move(path)), gz_(gz), size_(size) {}

  // Reads up to `count` bytes into `out`; how many arrived.
  absl::StatusOr<uint64_t> Read(char* out, uint64_t count) {
    uint64_t got = 0;
    while (got < count) {
      const int n =
          gzread(gz_, out + got, static_cast<unsigned>(std::min<uint64_t>(count - got, 1 << 30)));
      if (n < 0) {
        int error = Z_OK;
        const char* message = gzerror(gz_, &error);
        return Bad(path_, absl::StrCat("cannot read: ", message != nullptr ? message : ""));
      }
      if (n == 0) break;
      got += static_cast<uint64_t>(n);
    }
    return got;
  }

  absl::Status ReadHeader(uint32_t magic, int rank) {
    char header[16] = {};
    const uint64_t length = 4 + 4 * static_cast<uint64_t>(rank);
    AMPC_ASSIGN_OR_RETURN(uint64_t got, Read(header, length));
    if (got < 4) return Bad(path_, "short read: no IDX magic number");
    if (BigEndian32(header) != magic) {
      return Bad(path_,
                 absl::StrFormat("IDX magic number 0x%08x, expected 0x%08x (%s)",
                                 BigEndian32(header), magic, rank == 1 ? "labels" : "images"));
    }
    if (got < length) return Bad(path_, "short read: the IDX header is cut off");
    count_ = 1;
    for (int i = 0; i < rank; ++i) {
      dims_.push_back(BigEndian32(header + 4 + 4 * i));
      if (__builtin_mul_overflow(count_, static_cast<uint64_t>(dims_.back()), &count_)) {
        count_ = UINT64_MAX;
      }
    }
    const uint64_t most = size_ * (gzdirect(gz_) ? 1 : kMaxGzipRatio);
    if (count_ <= most) return absl::OkStatus();
    return Bad(path_,
               absl::StrCat("the header declares ", ShapeString(dims_), " (", count_,
                            " bytes of data); a file of ", size_, " bytes cannot hold that many"));
  }

  std::string path_;
  gzFile gz_;
  uint64_t size_;
  Shape dims_;
  uint64_t count_ = 0;
};

// First of `dir/name.gz` and `dir/name` that exists (the .gz when neither does, for the error).
std::string IdxPath(const std::string& dir, const std::string& name) {
  const std::filesystem::path base = std::filesystem::path(dir) / name;
  if (!Exists(base.string() + ".gz") && Exists(base.string())) {
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

absl::Status CountsMatch(int64_t image_count, const std::string& images, int64_t label_count,
                         const std::string& labels) {
  if (image_count != label_count) {
    return absl::InvalidArgumentError(absl::StrCat(images, " holds ", image_count, " images but ",
                                                   labels, " holds ", label_count, " labels"));
  }
  return absl::OkStatus();
}

// Images and labels of one count, at least one sample, finite images.
absl::StatusOr<Dataset> CheckCounts(Dataset data, const std::string& images,
                                    const std::string& labels) {
  AMPC_RETURN_IF_ERROR(CheckFinite(data.images, images));
  AMPC_RETURN_IF_ERROR(CountsMatch(data.images.dim(0), images, data.labels.dim(0), labels));
  return data;
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
  int64_t too_large = -1;  // the first unsigned label beyond int64
  const bool integer = Dispatch<AMPC_INT_TYPES>(raw_labels.dtype(), [&]<typename T>() {
    for (int64_t i = 0; i < raw_labels.size(); ++i) {
      const T label = raw_labels.data<T>()[i];
      if constexpr (std::is_unsigned_v<T> && sizeof(T) == 8) {
        if (label > static_cast<T>(INT64_MAX) && too_large < 0) too_large = i;
      }
      data.labels.data<int64_t>()[i] = static_cast<int64_t>(label);
    }
  });
  if (!integer) {
    return Bad(labels,
               absl::StrCat("labels must be integers, not ", DTypeName(raw_labels.dtype())));
  }
  if (too_large >= 0) {
    return Bad(labels, absl::StrCat("sample ", too_large, " has label ",
                                    raw_labels.data<uint64_t>()[too_large],
                                    ", which is not a class index"));
  }
  return CheckCounts(std::move(data), images, labels);
}

}  // namespace

namespace {

absl::StatusOr<Tensor> ReadImages(IdxFile& file) {
  Tensor images = Tensor::Host(DType::kUint8, file.dims());
  AMPC_RETURN_IF_ERROR(file.ReadData(static_cast<char*>(images.raw())));
  return images;
}

absl::StatusOr<Tensor> ReadLabels(IdxFile& file) {
  std::string bytes(file.count(), '\0');
  AMPC_RETURN_IF_ERROR(file.ReadData(bytes.data()));
  Tensor labels = Tensor::Host(DType::kInt64, file.dims());
  for (int64_t i = 0; i < labels.size(); ++i) {
    labels.data<int64_t>()[i] = static_cast<unsigned char>(bytes[i]);
  }
  return labels;
}

}  // namespace

absl::StatusOr<Tensor> ReadIdxImages(const std::string& path) {
  AMPC_ASSIGN_OR_RETURN(IdxFile file, IdxFile::Open(path, kIdxImagesMagic, 3));
  return ReadImages(file);
}

absl::StatusOr<Tensor> ReadIdxLabels(const std::string& path) {
  AMPC_ASSIGN_OR_RETURN(IdxFile file, IdxFile::Open(path, kIdxLabelsMagic, 1));
  return ReadLabels(file);
}

absl::StatusOr<Dataset> ReadIdxDataset(const std::string& images, const std::string& labels) {
  // Both headers first: counts that differ are refused before any data is read.
  AMPC_ASSIGN_OR_RETURN(IdxFile image_file, IdxFile::Open(images, kIdxImagesMagic, 3));
  AMPC_ASSIGN_OR_RETURN(IdxFile label_file, IdxFile::Open(labels, kIdxLabelsMagic, 1));
  AMPC_RETURN_IF_ERROR(CountsMatch(image_file.dims()[0], images, label_file.dims()[0], labels));
  Dataset data;
  AMPC_ASSIGN_OR_RETURN(data.images, ReadImages(image_file));
  AMPC_ASSIGN_OR_RETURN(data.labels, ReadLabels(label_file));
  return CheckCounts(std::move(data), images, labels);
}

absl::StatusOr<Dataset> ReadColumnsDir(const std::string& dir, const std::string& extension) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().extension() == "." + extension) files.push_back(entry.path());
  }
  if (error) return Bad(dir, absl::StrCat("cannot list: ", error.message()));
  std::sort(files.begin(), files.end());
  if (files.empty()) return Bad(dir, absl::StrCat("holds no .", extension, " files"));
  Dataset data;
  for (const std::filesystem::path& file : files) {
    const std::string path = file.string();
    AMPC_ASSIGN_OR_RETURN(Tensor values,
                          extension == "npy" ? ReadNpy(path) : ReadTensorProtoFile(path));
    if (values.rank() < 1) return Bad(path, "is a scalar; a column is [N, ...], N samples");
    if (values.dtype() == DType::kDouble) {
      Tensor narrowed = Tensor::Host(DType::kFloat, values.shape());
      for (int64_t i = 0; i < values.size(); ++i) {
        narrowed.data<float>()[i] = static_cast<float>(values.data<double>()[i]);
      }
      values = std::move(narrowed);
    }
    if (values.dtype() == DType::kFloat) AMPC_RETURN_IF_ERROR(CheckFinite(values, path));
    if (!data.columns.empty() && values.dim(0) != data.size()) {
      return Bad(path, absl::StrCat("holds ", values.dim(0), " samples; ", data.columns[0].file,
                                    " holds ", data.size()));
    }
    data.columns.push_back({file.stem().string(), std::move(values), path});
  }
  return data;
}

absl::Status CheckLabels(const Dataset& data, int64_t classes, const std::string& file,
                         std::optional<int64_t> ignored) {
  const int64_t* labels = data.labels.data<int64_t>();
  for (int64_t i = 0; i < data.labels.size(); ++i) {
    if ((labels[i] >= 0 && labels[i] < classes) || labels[i] == ignored) continue;
    return Bad(file, absl::StrCat("sample ", i, " has label ", labels[i], "; the model has ",
                                  classes, " classes (labels 0 to ", classes - 1, ")"));
  }
  return absl::OkStatus();
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
  Dataset data;
  data.images = Tensor::Host(DType::kFloat, {count, 28, 28});
  data.labels = Tensor::Host(DType::kInt64, {count});
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

namespace {

// A training set needs samples (an empty test set only has no accuracy to print).
absl::StatusOr<DataSplits> WithTrainingSamples(absl::StatusOr<DataSplits> splits) {
  if (splits.ok() && splits->train.size() == 0 && !splits->files.empty()) {
    return Bad(splits->files[0], "holds no samples (its first dim is 0); training needs some");
  }
  return splits;
}

// The data sets read from files: fashion-mnist, mnist, npy or pb (CheckDataSpec passed).
absl::StatusOr<DataSplits> LoadFiles(const std::string& kind, const std::string& arg) {
  if (kind == "fashion-mnist") return LoadIdxDir(kind, arg.empty() ? kFashionMnistDir : arg);
  if (kind == "mnist" && !arg.empty()) return LoadIdxDir(kind, arg);
  if ((kind == "npy" || kind == "pb") && !arg.empty()) {
    const std::filesystem::path dir(arg);
    DataSplits splits;
    if (std::filesystem::is_directory(dir / "train")) {
      AMPC_ASSIGN_OR_RETURN(splits.train, ReadColumnsDir((dir / "train").string(), kind));
      if (std::filesystem::is_directory(dir / "test")) {
        AMPC_ASSIGN_OR_RETURN(splits.test, ReadColumnsDir((dir / "test").string(), kind));
      }
      for (const Dataset* split : {&splits.train, &splits.test}) {
        for (const Column& column : split->columns) splits.files.push_back(column.file);
      }
    } else {
      const auto read = kind == "npy" ? ReadNpyDataset : ReadPbDataset;
      auto path = [&](const char* split, const char* part) {
        return (dir / absl::StrCat(split, "-", part, ".", kind)).string();
      };
      splits.files = {path("train", "images"), path("train", "labels"), path("test", "images"),
                      path("test", "labels")};
      AMPC_ASSIGN_OR_RETURN(splits.train, read(splits.files[0], splits.files[1]));
      AMPC_ASSIGN_OR_RETURN(splits.test, read(splits.files[2], splits.files[3]));
    }
    splits.description = absl::StrCat(kind, " (", arg, "): ", splits.train.size(), " train, ",
                                      splits.test.size(), " test");
    return splits;
  }
  return absl::InternalError(absl::StrCat("unchecked --data kind '", kind, "'"));
}

}  // namespace

absl::StatusOr<DataSplits> LoadData(const std::string& spec) {
  if (absl::Status s = CheckDataSpec(spec); !s.ok()) return s;
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (kind != "synthetic") return WithTrainingSamples(LoadFiles(kind, arg));
  int64_t count = 2048;  // synthetic[:N], N checked by CheckDataSpec
  if (!arg.empty() && !absl::SimpleAtoi(arg, &count)) return absl::InternalError("unchecked N");
  DataSplits splits{SyntheticDataset(count, 1),
                    SyntheticDataset(std::max<int64_t>(count / 4, 1), 2),
                    "",
                    {},
                    count};
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
