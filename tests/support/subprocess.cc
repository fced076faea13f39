#include "tests/support/subprocess.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

extern char** environ;

#if defined(__SANITIZE_ADDRESS__)
#define AMPC_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AMPC_UNDER_ASAN 1
#endif
#endif

namespace ampc::testing {

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& scratch_dir) {
  const std::string out_path = scratch_dir + "/.stdout", err_path = scratch_dir + "/.stderr";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  std::vector<char*> raw;
  for (const std::string& arg : argv) raw.push_back(const_cast<char*>(arg.c_str()));
  raw.push_back(nullptr);
  pid_t pid;
  int status = 0;
  ProcessResult result;
  if (posix_spawn(&pid, raw[0], &actions, nullptr, raw.data(), environ) == 0 &&
      waitpid(pid, &status, 0) == pid) {
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  posix_spawn_file_actions_destroy(&actions);
  result.out = ReadFileOrEmpty(out_path);
  result.err = ReadFileOrEmpty(err_path);
  unlink(out_path.c_str());
  unlink(err_path.c_str());
  return result;
}

std::string AddressSpaceLimit(long long kb) {
#ifdef AMPC_UNDER_ASAN
  (void)kb;
  return "";
#else
  // OpenBLAS starts a thread per core as it loads, each retrying a refused 128 MB buffer forever.
  return "ulimit -v " + std::to_string(kb) + " && export OPENBLAS_NUM_THREADS=1 && ";
#endif
}

}  // namespace ampc::testing
