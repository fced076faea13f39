// Several sums kept side by side, each adding its terms in exactly reduce::ChunkedSum's order and
// chunks (float sums of kSumChunk terms, added up in double), while the terms arrive in pieces:
// for ReduceSum over every axis but a contiguous run (reduce_kernels.cc) and the batch statistics
// of several channels at once (norm_kernels.cc), bit for bit what one sum at a time gives.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/elementwise_convert.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/reduce_common.h"
#include "kernels/cpu/scratch_arena.h"

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

// A tensor seen as [outer, rows, inner], summed per row over (outer, inner) in that order.
struct RowBlock {
  int64_t outer, rows, inner;
};

// Rows whose sums run side by side: each sum is a serial chain of adds, so one alone waits on
// every add; several in step keep the adder busy.
inline constexpr int kRowLanes = 8;

// The sums of rows [r0, r0 + kLanes) of term(k, value), each over (outer, inner) in order as
// reduce::ChunkedSum adds, with FP16/BF16 values widened a block of a row at a time.
template <int kLanes, typename T, typename C, typename Term>
void SumRows(const T* px, const RowBlock& s, int64_t r0, Term&& term, C* out) {
  ScratchBuffer<C> buffer(kLanes * kElementwiseBlock);
  LaneSums<C, kLanes> sums;
  const C* rows[kLanes];
  for (int64_t n = 0; n < s.outer; ++n) {
    const T* first = px + (n * s.rows + r0) * s.inner;
    if (s.inner <= kElementwiseBlock) {  // the lanes' rows lie side by side: widened in one go
      const C* wide = buffer.data();
      if constexpr (std::is_same_v<T, C>) {
        wide = first;
      } else {
        WidenToAcc(first, kLanes * s.inner, buffer.data());
      }
      for (int k = 0; k < kLanes; ++k) rows[k] = wide + k * s.inner;
      sums.Add(s.inner, [&](int k, int64_t j) { return term(k, rows[k][j]); });
      continue;
    }
    for (int64_t j0 = 0; j0 < s.inner; j0 += kElementwiseBlock) {
      const int64_t m = std::min(kElementwiseBlock, s.inner - j0);
      for (int k = 0; k < kLanes; ++k) {
        const T* row = first + k * s.inner + j0;
        if constexpr (std::is_same_v<T, C>) {
          rows[k] = row;
        } else {
          WidenToAcc(row, m, buffer.data() + k * kElementwiseBlock);
          rows[k] = buffer.data() + k * kElementwiseBlock;
        }
      }
      sums.Add(m, [&](int k, int64_t j) { return term(k, rows[k][j]); });
    }
  }
  for (int k = 0; k < kLanes; ++k) out[k] = sums.Result(k);
}

// Rows of one value per outer index (inner 1: a bias gradient's sum over [N, C]): rows [r0, r0 +
// lanes) side by side, lanes <= kColumnLanes, each outer index's values widened at once.
inline constexpr int kColumnLanes = 64;
template <typename T, typename C, typename Term>
void SumColumns(const T* px, const RowBlock& s, int64_t r0, int64_t lanes, Term&& term, C* out) {
  C values[kColumnLanes] = {};  // lanes past `lanes` stay 0 and are not read out
  LaneSums<C, kColumnLanes> sums;
  for (int64_t n = 0; n < s.outer; ++n) {
    const T* row = px + n * s.rows + r0;
    if constexpr (std::is_same_v<T, C>) {
      std::copy(row, row + lanes, values);
    } else {
      WidenToAcc(row, lanes, values);
    }
    sums.Add(1, [&](int k, int64_t) { return term(values[k]); });
  }
  for (int64_t k = 0; k < lanes; ++k) out[r0 + k] = sums.Result(static_cast<int>(k));
}

// out[r] = the sum of term(value) over row r, for every row, kRowLanes rows at a time (kColumnLanes
// when inner is 1); each row is summed by one thread, so the bits do not depend on the thread
// count.
template <typename T, typename C, typename Term>
void SumEveryRow(const KernelContext& context, const T* px, const RowBlock& s, Term&& term,
                 C* out) {
  if (s.inner == 1) {
    ParallelFor(context, (s.rows + kColumnLanes - 1) / kColumnLanes, kColumnLanes * s.outer,
                [&](int64_t begin, int64_t end) {
                  for (int64_t g = begin; g < end; ++g) {
                    const int64_t r0 = g * kColumnLanes;
                    SumColumns(px, s, r0, std::min<int64_t>(kColumnLanes, s.rows - r0), term, out);
                  }
                });
    return;
  }
  const int64_t groups = s.rows / kRowLanes, rest = s.rows % kRowLanes;
  const auto lane_term = [&](int, C v) { return term(v); };
  ParallelFor(context, groups + rest, kRowLanes * s.outer * s.inner,
              [&](int64_t begin, int64_t end) {
                for (int64_t g = begin; g < end; ++g) {
                  if (g < groups) {
                    SumRows<kRowLanes>(px, s, g * kRowLanes, lane_term, out + g * kRowLanes);
                  } else {
                    const int64_t r = groups * kRowLanes + (g - groups);
                    SumRows<1>(px, s, r, lane_term, out + r);
                  }
                }
              });
}

}  // namespace ampc
