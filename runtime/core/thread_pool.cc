#include "runtime/core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <system_error>
#include <thread>
#include <utility>

namespace ampc {
namespace {

thread_local bool in_parallel_region = false;

// How long a thread that waits for work (or for the other threads' chunks) spins before it
// sleeps: kernels follow each other within microseconds, and waking a sleeping thread takes
// longer than many of them run.
constexpr std::chrono::microseconds kSpin{100};

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until done() or kSpin has passed; returns done().
template <typename Done>
bool SpinUntil(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  while (!done()) {
    for (int i = 0; i < 64; ++i) CpuRelax();
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
  return true;
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) {
    try {
      workers_.emplace_back([this] { WorkerLoop(); });
    } catch (const std::system_error&) {
      break;  // no room for another stack (ulimit -v, -u): the threads started do the work
    }
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (workers_.empty() || n <= grain || in_parallel_region) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  const int64_t max_chunks = static_cast<int64_t>(threads()) * 4;
  const int64_t chunk = std::max(grain, (n + max_chunks - 1) / max_chunks);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_size_ = n;
    chunk_ = chunk;
    next_ = 0;
    pending_ = (n + chunk - 1) / chunk;
    ++generation_;
  }
  wake_.notify_all();
  RunChunks();
  SpinUntil([this] { return pending_.load(std::memory_order_acquire) == 0; });
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
    std::lock_guard<std::mutex> error_lock(error_mutex_);
    std::swap(error, error_);
  }
  if (error) std::rethrow_exception(error);
}

void ThreadPool::RunChunks() {
  in_parallel_region = true;
  std::unique_lock<std::mutex> lock(mutex_);
  while (job_ != nullptr && next_ < job_size_) {
    const int64_t begin = next_;
    const int64_t end = std::min(job_size_, begin + chunk_);
    next_ = end;
    const auto* job = job_;
    lock.unlock();
    try {
      (*job)(begin, end);
    } catch (...) {  // rethrown by ParallelFor once every chunk is accounted for
      std::lock_guard<std::mutex> error_lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
    lock.lock();
    if (--pending_ == 0) done_.notify_all();
  }
  in_parallel_region = false;
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  while (true) {
    SpinUntil([&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    RunChunks();
  }
}

}  // namespace ampc
