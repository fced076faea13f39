// POSIX file handling for model I/O: owned descriptors, full reads and writes, and files written
// beside their destination, fsync'ed and renamed into place.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "runtime/core/input_file.h"

namespace ampc {

// Records a file this run reads (the model, its external data, --input, --policy, a data set):
// CheckWritable, and so every save, refuses to replace it.
void NoteInputFile(const std::string& path);

// Records a file this run writes under a name of its own (--metrics, --report); it need not
// exist yet. No save removes it or writes its data there.
void NoteOutputFile(const std::string& path);

// Whether `path` is, by inode, a file NoteInputFile or NoteOutputFile recorded: a save must
// neither remove nor replace it. False when nothing is at `path`.
bool IsRunFile(const std::string& path);

// Undoes NoteInputFile for `path`: the checkpoint a resumed run read, whose data files the run's
// own saves replace.
void ForgetInputFile(const std::string& path);

// A usage error when `path` is a file NoteInputFile recorded (the same file, by inode); the
// message starts with `flag` ("-o", "--metrics") when given. An empty path is no file.
absl::Status CheckNotInput(const std::string& path, absl::string_view flag = "");

// Unavailable, naming `path`, when something other than a regular file or symlink is there (a
// directory, device, FIFO or socket), which a rename into place would fail on or replace.
absl::Status CheckReplaceable(const std::string& path);

// Unavailable, naming `path`, when a file cannot be written there by renaming a new one into
// place: `path` is a directory, device, FIFO or socket, or its directory does not exist; the
// usage error of CheckNotInput when it is an input of this run.
absl::Status CheckWritable(const std::string& path);

// A temporary file `<final>.tmp.<pid>.XXXXXX` beside `final`: renamed into place by Commit,
// removed otherwise (a process killed with -9 leaves it; RemoveStaleTempFiles clears it later).
// Errors are Unavailable and name the final path.
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

// Makes renames into the directory of `path` durable; the files themselves were fsync'ed already.
void SyncDirectory(const std::string& path);

// Removes the temporary files of `final` (`<final>.tmp.<pid>.*`) whose process is gone: what a
// writer killed mid-save left behind. A live writer's file is left alone.
void RemoveStaleTempFiles(const std::string& final_path);

// A test hook for crash safety: with AMPC_FAULT_INJECT=POINT or POINT:N in the environment, the
// N-th (default: first) arrival at POINT ends the process at once with _exit(137), as a kill -9
// there would. Inert when the variable is unset. The points, in the order a save meets them per
// file: after-create (empty temporary file), after-write (data written, not fsync'ed),
// before-rename (fsync'ed and closed), after-rename (in place, directory not fsync'ed), and
// before-cleanup (everything in place, the previous external data file not yet removed).
void FaultPoint(const char* point);

}  // namespace ampc
