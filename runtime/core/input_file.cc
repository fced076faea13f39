#include "runtime/core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ampc {
namespace {

// "PATH: the WHAT is a directory, ..." or, without `what`, "PATH: is a directory, ...".
absl::Status Refused(const std::string& path, absl::string_view what, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": ", what.empty() ? "" : absl::StrCat("the ", what, " "), why));
}

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "is a directory, not a file";
  if (S_ISFIFO(mode)) return "is a FIFO, not a regular file";
  if (S_ISSOCK(mode)) return "is a socket, not a regular file";
  return "is a device, not a regular file";
}

}  // namespace

std::string ErrnoText(int err) { return std::generic_category().message(err); }

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

int ReadAt(int fd, char* buffer, uint64_t size, uint64_t offset) {
  while (size > 0) {
    ssize_t n = ::pread(fd, buffer, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    buffer += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<uint64_t>(n);
  }
  return 0;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

absl::StatusOr<InputFile> OpenInputFile(const std::string& path, absl::string_view what) {
  // O_NONBLOCK: opening a FIFO with no writer would wait forever; it is refused below instead.
  InputFile file{Fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY))};
  if (file.fd.get() < 0) {
    const int err = errno;
    const std::string message = absl::StrCat(path, ": cannot open", what.empty() ? "" : " the ",
                                             what, ": ", ErrnoText(err));
    return err == ENOENT ? absl::NotFoundError(message) : absl::InvalidArgumentError(message);
  }
  struct stat st;
  if (::fstat(file.fd.get(), &st) != 0) {
    return Refused(path, what, absl::StrCat("cannot be examined: ", ErrnoText(errno)));
  }
  if (!S_ISREG(st.st_mode)) return Refused(path, what, KindOf(st.st_mode));
  // Reads of a regular file never block; clearing the flag keeps stdio-like readers simple.
  ::fcntl(file.fd.get(), F_SETFL, ::fcntl(file.fd.get(), F_GETFL) & ~O_NONBLOCK);
  file.size = static_cast<uint64_t>(st.st_size);
  return file;
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, uint64_t max_bytes,
                                          absl::string_view what) {
  absl::StatusOr<InputFile> file = OpenInputFile(path, what);
  if (!file.ok()) return file.status();
  if (file->size > max_bytes) {
    return Refused(path, what,
                   absl::StrCat("is ", file->size, " bytes; ampc reads at most ", max_bytes,
                                " from such a file"));
  }
  std::string bytes(file->size, '\0');
  if (int err = ReadAt(file->fd.get(), bytes.data(), bytes.size(), 0); err != 0) {
    return Refused(path, what, absl::StrCat("cannot be read: ", ErrnoText(err)));
  }
  return bytes;
}

}  // namespace ampc
