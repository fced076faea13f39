// Opening the files a run reads (models, external data, .npy/.pb inputs, data sets, JSON
// settings): regular files only, opened without blocking, sized before anything is read.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ampc {

std::string ErrnoText(int err);

// An owned file descriptor, closed on destruction.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~Fd();
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Reads exactly `size` bytes at `offset`. Returns 0, or errno (EIO at an unexpected end of file).
int ReadAt(int fd, char* buffer, uint64_t size, uint64_t offset);

// Whether anything is at `path` (a dangling symlink is nothing); never throws.
bool Exists(const std::string& path);

// A regular file open for reading and its size when opened.
struct InputFile {
  Fd fd;
  uint64_t size = 0;
};

// Opens `path` for reading. A directory, FIFO, socket or device is refused before any read (a
// FIFO would block forever, a device has no end); so is a missing file (NotFound). Errors are one
// line: "PATH: WHAT" with `what` ("--input file") before the reason when given.
absl::StatusOr<InputFile> OpenInputFile(const std::string& path, absl::string_view what = "");

// The whole of a regular file of at most `max_bytes` (a larger one is refused unread).
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, uint64_t max_bytes,
                                          absl::string_view what = "");

}  // namespace ampc
