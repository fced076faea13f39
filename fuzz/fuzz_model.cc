#include "fuzz/fuzz_model.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "compiler/model_io.h"

namespace ampc {
namespace {

// A directory private to this process, removed at exit.
const std::string& FuzzDir() {
  static const std::string* path = [] {
    const char* tmp = getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/ampc-fuzz.XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      perror("ampc fuzz: mkdtemp");
      abort();
    }
    static std::string dir = pattern;
    atexit([] { std::filesystem::remove_all(dir); });
    return new std::string(dir);
  }();
  return *path;
}

bool WriteAll(const std::string& path, const uint8_t* data, size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return done == size;
}

}  // namespace

std::string WriteFuzzFile(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = FuzzDir() + "/" + name;
  if (!WriteAll(path, data, size)) {
    perror("ampc fuzz: write");
    abort();
  }
  return path;
}

std::optional<onnx::ModelProto> LoadFuzzModel(const uint8_t* data, size_t size) {
  if (size > kMaxFuzzInputBytes) return std::nullopt;
  // The directory holds only the model, so external data can name nothing but the model itself.
  const std::string path = WriteFuzzFile("model.onnx", data, size);
  absl::StatusOr<LoadedModel> loaded = LoadModel(path);
  if (!loaded.ok()) return std::nullopt;
  return std::move(loaded->model);
}

}  // namespace ampc
