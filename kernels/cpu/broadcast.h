// NumPy-style (ONNX multidirectional) broadcasting: the output shape of several inputs, and the
// offset of each input element for every output element.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "runtime/core/tensor.h"

namespace ampc {

// nullopt when the shapes do not broadcast.
std::optional<Shape> BroadcastShapes(std::span<const Shape* const> shapes);
std::optional<Shape> BroadcastShapes(const Shape& a, const Shape& b);

// Walks the output of a broadcast in order; offset(k) is the element of input k that feeds the
// current output element.
class BroadcastIndex {
 public:
  BroadcastIndex(const Shape& output, std::span<const Shape* const> inputs);

  // True when every input has the output's shape or is a single element: then offsets are the
  // output index (times 0 for a single element) and no walk is needed.
  bool trivial() const { return trivial_; }
  bool single(int k) const { return single_[k]; }

  // Calls fn(output_index, offsets) for every output element in [begin, end).
  template <typename Fn>
  void ForRange(int64_t begin, int64_t end, Fn&& fn) const;

 private:
  Shape output_;
  std::vector<std::vector<int64_t>> strides_;  // per input, per output dim (0 where broadcast)
  std::vector<bool> single_;
  bool trivial_ = true;
};

// The output of a broadcast seen as rows of inner() elements (its trailing dims, as many as
// possible) along which every input is either contiguous or one value repeated, so that a row
// runs as one contiguous loop: [N, C, H, W] op [1, C, 1, 1] is N * C rows of H * W.
class BroadcastRows {
 public:
  BroadcastRows(const Shape& output, std::span<const Shape* const> inputs);

  int64_t rows() const { return rows_; }
  int64_t inner() const { return inner_; }
  // Whether input k holds one value along each row (else its row is contiguous).
  bool repeated(int k) const { return repeated_[k]; }

  // Calls fn(row, offsets) for every row in [begin, end): offsets[k] is the element of input k
  // where the row starts.
  template <typename Fn>
  void ForRows(int64_t begin, int64_t end, Fn&& fn) const;

 private:
  int64_t rows_ = 1, inner_ = 1;
  std::vector<bool> repeated_;
  std::vector<int64_t> row_elements_;  // per input: elements one row step of its own covers
  std::vector<Shape> outer_inputs_;    // per input: its dims over the output's outer dims
  Shape outer_;
};

template <typename Fn>
void BroadcastIndex::ForRange(int64_t begin, int64_t end, Fn&& fn) const {
  const int rank = static_cast<int>(output_.size());
  const size_t n = strides_.size();
  std::vector<int64_t> index(rank, 0), offsets(n, 0);
  int64_t rest = begin;
  for (int d = rank - 1; d >= 0; --d) {
    index[d] = output_[d] == 0 ? 0 : rest % output_[d];
    rest = output_[d] == 0 ? 0 : rest / output_[d];
    for (size_t k = 0; k < n; ++k) offsets[k] += index[d] * strides_[k][d];
  }
  for (int64_t i = begin; i < end; ++i) {
    fn(i, std::span<const int64_t>(offsets));
    for (int d = rank - 1; d >= 0; --d) {
      ++index[d];
      for (size_t k = 0; k < n; ++k) offsets[k] += strides_[k][d];
      if (index[d] < output_[d]) break;
      for (size_t k = 0; k < n; ++k) offsets[k] -= index[d] * strides_[k][d];
      index[d] = 0;
    }
  }
}

template <typename Fn>
void BroadcastRows::ForRows(int64_t begin, int64_t end, Fn&& fn) const {
  std::vector<const Shape*> inputs;
  for (const Shape& s : outer_inputs_) inputs.push_back(&s);
  const BroadcastIndex outer(outer_, inputs);
  std::vector<int64_t> offsets(inputs.size());
  outer.ForRange(begin, end, [&](int64_t r, std::span<const int64_t> outer_offsets) {
    for (size_t k = 0; k < offsets.size(); ++k) offsets[k] = outer_offsets[k] * row_elements_[k];
    fn(r, std::span<const int64_t>(offsets));
  });
}

}  // namespace ampc
