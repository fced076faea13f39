#include "compiler/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_format.h"
#include "passes/graph/deferred_data.h"

namespace ampc {
namespace {

constexpr auto kDelay = std::chrono::seconds(2);
constexpr auto kInterval = std::chrono::milliseconds(250);

}  // namespace

std::string ProgressText(uint64_t tensors, uint64_t total_tensors, uint64_t bytes,
                         uint64_t total_bytes, double rate) {
  // A tensor read by readers of two dtypes is converted twice: the counts stop at the totals.
  tensors = std::min(tensors, total_tensors);
  bytes = std::min(bytes, total_bytes);
  const double gb = 1e9;
  std::string text = absl::StrFormat("ampc: weights %d/%d tensors, %.1f/%.1f GB", tensors,
                                     total_tensors, bytes / gb, total_bytes / gb);
  if (rate <= 0) return text;
  return absl::StrFormat("%s, %.2f GB/s, %.0f s left", text, rate / gb,
                         (total_bytes - bytes) / rate);
}

ProgressLine::ProgressLine(uint64_t total_tensors, uint64_t total_bytes)
    : total_tensors_(total_tensors), total_bytes_(total_bytes) {
  if (total_bytes == 0 || ::isatty(STDERR_FILENO) != 1) return;
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (stop_.wait_for(lock, kDelay, [this] { return stopping_; })) return;
    do {
      Draw();
    } while (!stop_.wait_for(lock, kInterval, [this] { return stopping_; }));
  });
}

ProgressLine::~ProgressLine() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_one();
  thread_.join();
  if (drawn_) std::fputs("\r\033[K", stderr);  // the summary line takes its place
}

// The rate is over the time since the first bytes were seen written: the checks before the
// conversion read the weights but write nothing.
void ProgressLine::Draw() {
  const DeferredProgress done = DeferredProgressSoFar();
  const auto now = std::chrono::steady_clock::now();
  if (done.bytes > 0 && first_bytes_ == 0) {
    first_bytes_ = done.bytes;
    first_seen_ = now;
  }
  const double seconds = std::chrono::duration<double>(now - first_seen_).count();
  const uint64_t since = done.bytes - std::min(done.bytes, first_bytes_);
  const double rate = since > 0 && seconds > 0 ? since / seconds : 0;
  std::fprintf(stderr, "\r\033[K%s",
               ProgressText(done.tensors, total_tensors_, done.bytes, total_bytes_, rate).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace ampc
