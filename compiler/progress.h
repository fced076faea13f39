// The progress line of a long compile (docs/autocast.md, "Progress"): on a terminal, once a
// compile has run for two seconds, one line on stderr redrawn in place with the weights written
// so far (passes/graph/deferred_data.h's counts), the rate and the time left. Nothing when stderr
// is not a terminal.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace ampc {

// "ampc: weights 12/291 tensors, 3.1/27.0 GB, 1.52 GB/s, 16 s left", at `rate` bytes per
// second (0: not known yet, and no rate or time left shown).
std::string ProgressText(uint64_t tensors, uint64_t total_tensors, uint64_t bytes,
                         uint64_t total_bytes, double rate);

// Draws the line from a thread of its own while it lives; clears it when destroyed.
class ProgressLine {
 public:
  ProgressLine(uint64_t total_tensors, uint64_t total_bytes);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

 private:
  void Draw();

  const uint64_t total_tensors_;
  const uint64_t total_bytes_;
  uint64_t first_bytes_ = 0;  // the count when bytes were first seen written, and when
  std::chrono::steady_clock::time_point first_seen_;
  std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  bool drawn_ = false;
  std::thread thread_;
};

}  // namespace ampc
