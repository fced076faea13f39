#include "compiler/file_io.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "compiler/exit_codes.h"
#include "passes/graph/status_macros.h"

namespace ampc {
namespace {

namespace fs = std::filesystem;

int WriteAll(int fd, const char* data, uint64_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    data += n;
    size -= static_cast<uint64_t>(n);
  }
  return 0;
}

mode_t CurrentUmask() {
  // Read once: umask() can only be read by setting it.
  static const mode_t mask = [] {
    mode_t old = ::umask(0);
    ::umask(old);
    return old;
  }();
  return mask;
}

}  // namespace

TempFile::~TempFile() {
  if (!name_.empty()) ::unlink(name_.c_str());
}

namespace {

using FileId = std::pair<dev_t, ino_t>;

// The identity of the file at `path` (symlinks followed), when there is one.
std::optional<FileId> IdOf(const std::string& path) {
  struct stat st;
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId(st.st_dev, st.st_ino);
}

std::vector<FileId>& InputFiles() {
  static auto* const kFiles = new std::vector<FileId>;
  return *kFiles;
}

std::vector<std::string>& OutputFiles() {
  static auto* const kFiles = new std::vector<std::string>;
  return *kFiles;
}

bool IsNotedInput(const FileId& id) {
  return std::find(InputFiles().begin(), InputFiles().end(), id) != InputFiles().end();
}

}  // namespace

void NoteInputFile(const std::string& path) {
  if (std::optional<FileId> id = IdOf(path)) InputFiles().push_back(*id);
}

void NoteOutputFile(const std::string& path) {
  if (!path.empty()) OutputFiles().push_back(path);
}

bool IsRunFile(const std::string& path) {
  const std::optional<FileId> id = IdOf(path);
  if (!id) return false;
  if (IsNotedInput(*id)) return true;
  return std::any_of(OutputFiles().begin(), OutputFiles().end(),
                     [&](const std::string& output) { return IdOf(output) == id; });
}

void ForgetInputFile(const std::string& path) {
  if (std::optional<FileId> id = IdOf(path)) std::erase(InputFiles(), *id);
}

absl::Status CheckNotInput(const std::string& path, absl::string_view flag) {
  const std::optional<FileId> id = IdOf(path);
  if (!id || !IsNotedInput(*id)) return absl::OkStatus();
  return UsageError(absl::StrCat(flag, flag.empty() ? "" : " ", path,
                                 " is an input of this run; ampc never overwrites its input"));
}

absl::Status CheckReplaceable(const std::string& path) {
  // The rename that commits would replace a device or FIFO by a regular file (run as root,
  // `-o /dev/null` would have replaced /dev/null), and fail on a directory only after the work.
  struct stat existing;
  if (::lstat(path.c_str(), &existing) == 0 && !S_ISREG(existing.st_mode) &&
      !S_ISLNK(existing.st_mode)) {
    return absl::UnavailableError(absl::StrCat(
        path, ": cannot write: ",
        S_ISDIR(existing.st_mode) ? "a directory" : "not a regular file (a device, FIFO or socket)",
        "; ampc writes a new file and renames it into place"));
  }
  return absl::OkStatus();
}

absl::Status CheckWritable(const std::string& path) {
  AMPC_RETURN_IF_ERROR(CheckNotInput(path));
  AMPC_RETURN_IF_ERROR(CheckReplaceable(path));
  const fs::path dir = fs::path(path).parent_path();
  std::error_code error;
  if (!dir.empty() && !fs::is_directory(dir, error)) {
    return absl::UnavailableError(
        absl::StrCat(path, ": cannot write: ", dir.string(),
                     fs::exists(dir, error) ? " is not a directory" : " does not exist"));
  }
  return absl::OkStatus();
}

absl::Status TempFile::Create() {
  AMPC_RETURN_IF_ERROR(CheckWritable(final_));
  std::string name = absl::StrCat(final_, ".tmp.", ::getpid(), ".XXXXXX");
  Fd fd(::mkstemp(name.data()));
  if (fd.get() < 0) return Error("cannot create", errno);
  name_ = std::move(name);
  fd_ = std::move(fd);
  // mkstemp makes the file 0600; the output gets the usual permissions.
  if (::fchmod(fd_.get(), 0666 & ~CurrentUmask()) != 0) return Error("cannot chmod", errno);
  FaultPoint("after-create");
  return absl::OkStatus();
}

absl::Status TempFile::Write(const char* data, uint64_t size) {
  if (int err = WriteAll(fd_.get(), data, size); err != 0) return Error("cannot write", err);
  return absl::OkStatus();
}

absl::Status TempFile::Close() {
  FaultPoint("after-write");
  if (::fsync(fd_.get()) != 0) return Error("cannot write", errno);
  if (::close(fd_.release()) != 0) return Error("cannot write", errno);
  FaultPoint("before-rename");
  return absl::OkStatus();
}

absl::Status TempFile::Commit() {
  // Inputs read after Create (a report is staged before the model is loaded) are checked here.
  AMPC_RETURN_IF_ERROR(CheckNotInput(final_));
  if (::rename(name_.c_str(), final_.c_str()) != 0) return Error("cannot replace", errno);
  name_.clear();
  FaultPoint("after-rename");
  return absl::OkStatus();
}

absl::Status TempFile::Error(const char* what, int err) const {
  return absl::UnavailableError(absl::StrCat(final_, ": ", what, ": ", ErrnoText(err)));
}

void SyncDirectory(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  Fd fd(::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() >= 0) ::fsync(fd.get());
}

void RemoveStaleTempFiles(const std::string& final_path) {
  const fs::path final(final_path);
  const fs::path dir = final.parent_path().empty() ? fs::path(".") : final.parent_path();
  const std::string prefix = final.filename().string() + ".tmp.";
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    // Held by value: filename() returns a temporary, which a string_view of it would outlive.
    const std::string filename = entry.path().filename().string();
    absl::string_view name = filename;
    if (!absl::ConsumePrefix(&name, prefix)) continue;
    const size_t dot = name.find('.');
    int pid = 0;
    if (dot == absl::string_view::npos || name.size() - dot != 7 ||
        !absl::SimpleAtoi(name.substr(0, dot), &pid) || pid <= 0) {
      continue;  // not a name TempFile makes
    }
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    if (IsRunFile(entry.path().string())) continue;  // named so, but read or written by this run
    ::unlink(entry.path().c_str());
  }
}

void FaultPoint(const char* point) {
  static const char* const spec = std::getenv("AMPC_FAULT_INJECT");
  if (spec == nullptr) return;
  static int arrivals = 0;
  absl::string_view want = spec;
  int nth = 1;
  if (const size_t colon = want.find(':'); colon != absl::string_view::npos) {
    if (!absl::SimpleAtoi(want.substr(colon + 1), &nth)) nth = 1;
    want = want.substr(0, colon);
  }
  if (want == point && ++arrivals == nth) ::_exit(137);
}

}  // namespace ampc
