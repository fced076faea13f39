// Intra-op parallelism: a fixed set of worker threads and ParallelFor over index ranges.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ampc {

class ThreadPool {
 public:
  // `threads` workers in all, the calling thread included; 0 means one per hardware thread. Fewer
  // when the system refuses a thread (threads() says how many started).
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n), each about `grain` long or more,
  // and returns when all are done. Runs inline when n is small, when there is one thread, and when
  // called from inside another ParallelFor (no nested parallelism). An exception thrown by fn is
  // rethrown here after all chunks have finished.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop();
  void RunChunks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_size_ = 0;
  int64_t chunk_ = 0;
  int64_t next_ = 0;
  // Written under mutex_; atomic so that waiting threads can spin on them before sleeping.
  std::atomic<int64_t> pending_ = 0;  // chunks not yet finished
  std::atomic<uint64_t> generation_ = 0;
  std::atomic<bool> stop_ = false;
  std::mutex call_mutex_;  // one ParallelFor at a time
  std::mutex error_mutex_;
  std::exception_ptr error_;  // the first exception a chunk threw
};

}  // namespace ampc
