// Runs a program and captures its exit code, stdout and stderr (for tests of the real binary).
#pragma once

#include <string>
#include <vector>

namespace ampc::testing {

struct ProcessResult {
  int exit_code = -1;  // 128 + signal number when killed by a signal
  std::string out;
  std::string err;
};

// argv[0] is the program's path. Output is collected through files in `scratch_dir`.
ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& scratch_dir);

std::string ReadFileOrEmpty(const std::string& path);

// "ulimit -v KB && export OPENBLAS_NUM_THREADS=1 && " for a shell command line, or "" in an
// AddressSanitizer build: ASan reserves terabytes of address space for its shadow memory and
// cannot start under such a limit (that build checks memory errors; the normal build checks the
// bounds).
std::string AddressSpaceLimit(long long kb);

}  // namespace ampc::testing
