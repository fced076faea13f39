#include "kernels/cpu/broadcast.h"

#include <algorithm>

namespace ampc {

std::optional<Shape> BroadcastShapes(std::span<const Shape* const> shapes) {
  size_t rank = 0;
  for (const Shape* s : shapes) rank = std::max(rank, s->size());
  Shape out(rank, 1);
  for (const Shape* s : shapes) {
    const size_t pad = rank - s->size();
    for (size_t i = 0; i < s->size(); ++i) {
      int64_t& o = out[pad + i];
      const int64_t d = (*s)[i];
      if (d == o || d == 1) continue;
      if (o != 1) return std::nullopt;
      o = d;
    }
  }
  return out;
}

std::optional<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  const Shape* shapes[] = {&a, &b};
  return BroadcastShapes(shapes);
}

BroadcastIndex::BroadcastIndex(const Shape& output, std::span<const Shape* const> inputs)
    : output_(output) {
  const size_t rank = output.size();
  for (const Shape* s : inputs) {
    const bool single = ElementCount(*s) == 1;
    single_.push_back(single);
    trivial_ = trivial_ && (single || *s == output);
    std::vector<int64_t> strides(rank, 0);
    int64_t stride = 1;
    const size_t pad = rank - s->size();
    for (size_t i = s->size(); i-- > 0;) {
      strides[pad + i] = (*s)[i] == 1 ? 0 : stride;
      stride *= (*s)[i];
    }
    strides_.push_back(std::move(strides));
  }
}

BroadcastRows::BroadcastRows(const Shape& output, std::span<const Shape* const> inputs) {
  const size_t rank = output.size(), n = inputs.size();
  std::vector<Shape> padded;
  for (const Shape* s : inputs) {
    Shape p(rank - s->size(), 1);
    p.insert(p.end(), s->begin(), s->end());
    padded.push_back(std::move(p));
  }
  // Walk the dims from the last while every input stays all-full or all-ones over them.
  std::vector<bool> full(n, true), ones(n, true);
  size_t split = rank;
  for (; split > 0; --split) {
    const size_t d = split - 1;
    bool fits = true;
    for (size_t k = 0; k < n; ++k) {
      fits = fits && ((full[k] && padded[k][d] == output[d]) || (ones[k] && padded[k][d] == 1));
    }
    if (!fits) break;
    for (size_t k = 0; k < n; ++k) {
      full[k] = full[k] && padded[k][d] == output[d];
      ones[k] = ones[k] && padded[k][d] == 1;
    }
    inner_ *= output[d];
  }
  outer_.assign(output.begin(), output.begin() + static_cast<std::ptrdiff_t>(split));
  rows_ = ElementCount(outer_);
  for (size_t k = 0; k < n; ++k) {
    repeated_.push_back(!full[k]);
    row_elements_.push_back(full[k] ? inner_ : 1);
    outer_inputs_.emplace_back(padded[k].begin(),
                               padded[k].begin() + static_cast<std::ptrdiff_t>(split));
  }
}

}  // namespace ampc
