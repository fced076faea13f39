// POSIX file handling for model I/O: owned descriptors, full reads and writes, and files written
// beside their destination, fsync'ed and renamed into place.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"

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

// A temporary file `<final>.tmp.XXXXXX` beside `final`: renamed into place by Commit, removed
// otherwise. Errors are Unavailable and name the final path.
class TempFile {
 public:
  explicit TempFile(std::string final_path) : final_(std::move(final_path)) {}
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile();

  int fd() const { return fd_.get(); }
  bool created() const { return !name_.empty(); }

  absl::Status Create();  // with the permissions the umask gives new files
  absl::Status Write(const char* data, uint64_t size);
  absl::Status Close();  // fsyncs first
  absl::Status Commit();
  absl::Status Error(const char* what, int err) const;

 private:
  std::string final_;
  std::string name_;
  Fd fd_;
};

// Writes `text` to `path` atomically (temporary file, fsync, rename).
absl::Status WriteTextFile(const std::string& path, const std::string& text);

// Makes renames into the directory of `path` durable; the files themselves were fsync'ed already.
void SyncDirectory(const std::string& path);

}  // namespace ampc
