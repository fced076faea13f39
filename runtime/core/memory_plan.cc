#include "runtime/core/memory_plan.h"

#include <algorithm>
#include <utility>

namespace ampc {
namespace {

constexpr size_t kAlign = 256;            // every place starts at a multiple (cudaMalloc's)
constexpr size_t kMaxPlans = 64;          // graphs and input shapes planned at most
constexpr size_t kMaxKeys = 4096;         // graphs and input shapes whose runs are counted
constexpr size_t kMaxRequests = 1 << 20;  // requests recorded in one run at most

size_t Aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

size_t MemoryPlanner::needed_bytes(uint64_t key) const {
  auto it = plans_.find(key);
  return it == plans_.end() ? 0 : it->second.bytes;
}

void MemoryPlanner::BeginRun(uint64_t key) {
  if (depth_++ > 0) return;
  key_ = key;
  if (runs_.size() >= kMaxKeys && !runs_.contains(key)) runs_.clear();
  const int seen = ++runs_[key];
  mode_ = Mode::kNone;
  auto it = plans_.find(key);
  if (it != plans_.end()) {
    // Only onto a free arena large enough: a place still held from an earlier run is no
    // place to give out again.
    if (served_.empty() && arena_ != nullptr && arena_bytes_ >= it->second.bytes) {
      mode_ = Mode::kReplay;
      plan_ = &it->second;
      next_ = 0;
      diverged_ = false;
      occupied_.assign(plan_->capacity.size(), false);
    }
    return;
  }
  if (seen == 2 && plans_.size() < kMaxPlans) mode_ = Mode::kRecord;
}

void MemoryPlanner::EndRun() {
  if (--depth_ > 0) return;
  if (mode_ == Mode::kRecord) plans_[key_] = Place(recorded_, begin_, end_);
  if (mode_ == Mode::kReplay) {
    Plan& plan = plans_[key_];
    plan.departures = diverged_ ? plan.departures + 1 : 0;
    if (plan.departures >= 2) {  // the requests changed: record the next run again
      plans_.erase(key_);
      runs_[key_] = 1;
    }
  }
  mode_ = Mode::kNone;
  plan_ = nullptr;
  recorded_.clear();
  begin_.clear();
  end_.clear();
  recording_.clear();
  pending_ = -1;
}

void* MemoryPlanner::Take(size_t capacity) {
  if (mode_ == Mode::kRecord) {
    if (recorded_.size() >= kMaxRequests) return nullptr;
    pending_ = static_cast<int>(recorded_.size());
    recorded_.push_back(capacity);
    begin_.push_back(clock_++);
    end_.push_back(-1);
    return nullptr;
  }
  if (mode_ != Mode::kReplay || diverged_) return nullptr;
  const int request = next_++;
  if (request >= static_cast<int>(plan_->capacity.size()) || plan_->capacity[request] != capacity) {
    diverged_ = true;  // the requests no longer follow the recording
    return nullptr;
  }
  if (plan_->offset[request] < 0) return nullptr;
  for (int below : plan_->under[request]) {
    if (occupied_[below]) return nullptr;  // held longer than when recorded
  }
  occupied_[request] = true;
  void* data = arena_ + plan_->offset[request];
  served_[data] = request;
  return data;
}

void MemoryPlanner::Served(void* data) {
  if (mode_ == Mode::kRecord && pending_ >= 0) recording_[data] = pending_;
  pending_ = -1;
}

bool MemoryPlanner::Release(void* data) {
  if (InArena(data)) {
    auto it = served_.find(data);
    if (it != served_.end()) {
      occupied_[it->second] = false;
      served_.erase(it);
    }
    return true;
  }
  if (mode_ == Mode::kRecord) {
    auto it = recording_.find(data);
    if (it != recording_.end()) {
      end_[it->second] = clock_++;
      recording_.erase(it);
    }
  }
  return false;
}

void* MemoryPlanner::SetArena(void* base, size_t bytes) {
  void* old = arena_;
  arena_ = static_cast<char*>(base);
  arena_bytes_ = base == nullptr ? 0 : bytes;
  return old;
}

bool MemoryPlanner::InArena(const void* data) const {
  const char* p = static_cast<const char*>(data);
  return arena_ != nullptr && p >= arena_ && p < arena_ + arena_bytes_;
}

MemoryPlanner::Plan MemoryPlanner::Place(const std::vector<size_t>& capacity,
                                         const std::vector<int64_t>& begin,
                                         const std::vector<int64_t>& end) {
  const int n = static_cast<int>(capacity.size());
  Plan plan;
  plan.capacity = capacity;
  plan.offset.assign(n, -1);
  plan.under.resize(n);
  std::vector<int> order;
  for (int i = 0; i < n; ++i) {
    if (end[i] >= 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return capacity[a] > capacity[b]; });
  auto alive_together = [&](int a, int b) { return begin[a] < end[b] && begin[b] < end[a]; };
  std::vector<int> placed;
  std::vector<std::pair<int64_t, int64_t>> taken;  // [offset, offset + size) of those alive
  for (int i : order) {
    taken.clear();
    for (int j : placed) {
      if (alive_together(i, j))
        taken.emplace_back(plan.offset[j], plan.offset[j] + Aligned(capacity[j]));
    }
    std::sort(taken.begin(), taken.end());
    int64_t at = 0;
    const int64_t size = static_cast<int64_t>(Aligned(capacity[i]));
    for (const auto& [from, to] : taken) {
      if (at + size <= from) break;
      at = std::max(at, to);
    }
    plan.offset[i] = at;
    plan.bytes = std::max(plan.bytes, static_cast<size_t>(at + size));
    placed.push_back(i);
  }
  for (int i = 0; i < n; ++i) {
    if (plan.offset[i] < 0) continue;
    for (int j = 0; j < i; ++j) {
      if (plan.offset[j] >= 0 &&
          plan.offset[j] < plan.offset[i] + static_cast<int64_t>(Aligned(capacity[i])) &&
          plan.offset[i] < plan.offset[j] + static_cast<int64_t>(Aligned(capacity[j]))) {
        plan.under[i].push_back(j);
      }
    }
  }
  return plan;
}

}  // namespace ampc
