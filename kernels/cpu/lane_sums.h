// Several sums kept side by side, each adding its terms in exactly reduce::ChunkedSum's order and
// chunks (float sums of kSumChunk terms, added up in double), while the terms arrive in pieces:
// for the batch statistics of several channels at once (norm_kernels.cc), bit for bit what
// ReduceSum gives each channel.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/reduce_common.h"

namespace ampc {

template <typename A, int kLanes>
class LaneSums {
 public:
  // Adds term(k, j) to lane k for j in [0, n), j by j; the lanes share their term count.
  template <typename Term>
  void Add(int64_t n, Term&& term) {
    for (int64_t j = 0; j < n;) {
      const int64_t m = std::min(n - j, reduce::kSumChunk - filled_);
      for (const int64_t end = j + m; j < end; ++j) {
        for (int k = 0; k < kLanes; ++k) sum_[k] += term(k, j);
      }
      filled_ += m;
      if (filled_ == reduce::kSumChunk) {
        for (int k = 0; k < kLanes; ++k) {
          total_[k] += static_cast<double>(sum_[k]);
          sum_[k] = A{0};
        }
        filled_ = 0;
      }
    }
  }

  // ChunkedSum's result: up to one chunk the float sum itself (0.0 + sum is exact).
  A Result(int k) const { return static_cast<A>(total_[k] + static_cast<double>(sum_[k])); }

 private:
  A sum_[kLanes] = {};
  double total_[kLanes] = {};
  int64_t filled_ = 0;
};

}  // namespace ampc
