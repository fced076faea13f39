// Im2Col and Col2Im, the patch copies under Conv, ConvTranspose and ConvGrad: by rows with the
// index work done per row, or, for small output planes (where that work would cost more than the
// copy: ResNet's and MobileNet's late layers have 1 to 64 positions), through a PatchTable that
// does it once per call.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "kernels/cpu/conv_geometry.h"
#include "kernels/cpu/linalg_shapes.h"
#include "runtime/core/thread_pool.h"

namespace ampc::linalg {

// One patch row of a 2-D Conv with stride 1 and output size = input size: the input plane shifted
// by dh*W + dw (kernel offset minus padding), so one contiguous copy instead of one per output
// row; then zeros where the shift wraps around a row edge (output columns outside [lo, hi)).
// Rows that read outside the plane fall outside the copied range.
template <typename A>
void SameShift2D(const A* x, const ConvGeometry& g, const std::vector<int64_t>& kk, int64_t lo,
                 int64_t hi, A* dst) {
  const int64_t h = g.input[0], w = g.input[1], size = h * w;
  const int64_t shift =
      (kk[0] * g.dilations[0] - g.pad_begin[0]) * w + kk[1] * g.dilations[1] - g.pad_begin[1];
  const int64_t first = std::clamp<int64_t>(-shift, 0, size);
  const int64_t end = std::clamp<int64_t>(size - shift, first, size);
  std::fill(dst, dst + first, A{0});
  std::copy(x + first + shift, x + end + shift, dst + first);
  std::fill(dst + end, dst + size, A{0});
  for (int64_t j = 0; j < lo; ++j) {  // column by column: an edge is a column or two wide
    for (int64_t row = 0; row < h; ++row) dst[row * w + j] = A{0};
  }
  for (int64_t j = hi; j < w; ++j) {
    for (int64_t row = 0; row < h; ++row) dst[row * w + j] = A{0};
  }
}

// Rows (channel, kernel offset) by columns (image, output position) of the input patches of
// `images` images `image_stride` apart; zero where a patch reads padding. Row r of image i
// starts at col + r * ld + i * osize.
template <typename A>
void Im2Col(const A* x, const ConvGeometry& g, int64_t channels, int64_t images,
            int64_t image_stride, A* col, int64_t ld, ThreadPool& pool) {
  const int n = g.rank;
  const int64_t isize = ElementCount(g.input), ksize = ElementCount(g.kernel);
  const int64_t osize = ElementCount(g.output), last = g.output[n - 1];
  const int64_t rows = channels * ksize;
  if (osize == 0) return;
  const bool same_2d = n == 2 && g.input == g.output && g.strides[0] == 1 && g.strides[1] == 1;
  pool.ParallelFor(
      images * rows, std::max<int64_t>(1, 16384 / osize), [&](int64_t begin, int64_t end) {
        std::vector<int64_t> kk(n), o(n);
        for (int64_t t = begin; t < end; ++t) {
          const int64_t image = t / rows, r = t % rows;
          const A* xc = x + image * image_stride + (r / ksize) * isize;
          for (int64_t d = n - 1, rest = r % ksize; d >= 0; --d) {
            kk[d] = rest % g.kernel[d];
            rest /= g.kernel[d];
          }
          const int64_t stride = g.strides[n - 1], in_last = g.input[n - 1];
          const int64_t shift = kk[n - 1] * g.dilations[n - 1] - g.pad_begin[n - 1];
          // Output columns [lo, hi) read inside the input row: j * stride + shift in [0, in_last).
          const int64_t lo = std::min(last, shift >= 0 ? 0 : (stride - 1 - shift) / stride);
          const int64_t hi = std::max(
              lo, std::min(last, shift >= in_last ? 0 : (in_last - shift + stride - 1) / stride));
          A* dst = col + r * ld + image * osize;
          if (same_2d) {
            SameShift2D(xc, g, kk, lo, hi, dst);
            continue;
          }
          std::fill(o.begin(), o.end(), 0);
          for (int64_t row = 0; row < osize / last; ++row, dst += last) {
            int64_t base = 0;
            bool inside = true;
            for (int d = 0; d < n - 1 && inside; ++d) {
              const int64_t i = o[d] * g.strides[d] + kk[d] * g.dilations[d] - g.pad_begin[d];
              inside = i >= 0 && i < g.input[d];
              base = base * g.input[d] + i;
            }
            if (!inside) {
              std::fill(dst, dst + last, A{0});
            } else {
              const A* xr = xc + base * in_last;
              std::fill(dst, dst + lo, A{0});
              if (stride == 1) {
                std::copy(xr + lo + shift, xr + hi + shift, dst + lo);
              } else {
                for (int64_t j = lo; j < hi; ++j) dst[j] = xr[j * stride + shift];
              }
              std::fill(dst + hi, dst + last, A{0});
            }
            for (int d = n - 2; d >= 0; --d) {
              if (++o[d] < g.output[d]) break;
              o[d] = 0;
            }
          }
        }
      });
}

// The reverse: adds each column entry (channel, kernel offset; input position) into the output
// position it maps to, skipping positions cut off by the padding. `y` is [channels, output...];
// row r of col starts at col + r * ld (ld 0: the input positions, rows back to back).
template <typename A>
void Col2Im(const A* col, const ConvGeometry& g, int64_t channels, A* y, ThreadPool& pool,
            int64_t ld = 0) {
  const int n = g.rank;
  const int64_t isize = ElementCount(g.input), ksize = ElementCount(g.kernel);
  const int64_t osize = ElementCount(g.output), last = g.input[n - 1];
  if (isize == 0) return;
  if (ld == 0) ld = isize;
  pool.ParallelFor(channels, 1, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> kk(n), i(n);
    for (int64_t m = begin; m < end; ++m) {
      A* ym = y + m * osize;
      for (int64_t kr = 0; kr < ksize; ++kr) {
        for (int64_t d = n - 1, rest = kr; d >= 0; --d) {
          kk[d] = rest % g.kernel[d];
          rest /= g.kernel[d];
        }
        const int64_t stride = g.strides[n - 1], out_last = g.output[n - 1];
        const int64_t shift = kk[n - 1] * g.dilations[n - 1] - g.pad_begin[n - 1];
        const A* src = col + (m * ksize + kr) * ld;
        std::fill(i.begin(), i.end(), 0);
        for (int64_t row = 0; row < isize / last; ++row, src += last) {
          int64_t base = 0;
          bool inside = true;
          for (int d = 0; d < n - 1 && inside; ++d) {
            const int64_t o = i[d] * g.strides[d] + kk[d] * g.dilations[d] - g.pad_begin[d];
            inside = o >= 0 && o < g.output[d];
            base = base * g.output[d] + o;
          }
          if (inside) {
            A* yr = ym + base * out_last;
            for (int64_t j = 0; j < last; ++j) {
              const int64_t o = j * stride + shift;
              if (o >= 0 && o < out_last) yr[o] += src[j];
            }
          }
          for (int d = n - 2; d >= 0; --d) {
            if (++i[d] < g.input[d]) break;
            i[d] = 0;
          }
        }
      }
    }
  });
}

// For each kernel offset and output position of a convolution, the input position its patch
// reads there (-1: padding): Im2Col's and Col2Im's index work, done once per call.
class PatchTable {
 public:
  // Output planes of up to this many positions go through a table.
  static constexpr int64_t kMaxPositions = 256;
  static bool Suits(const ConvGeometry& g) { return ElementCount(g.output) <= kMaxPositions; }

  explicit PatchTable(const ConvGeometry& g)
      : ksize_(ElementCount(g.kernel)),
        osize_(ElementCount(g.output)),
        isize_(ElementCount(g.input)),
        input_(WindowTargets(g.kernel, g.output, g.strides, g.dilations, g.pad_begin, g.input)) {
    for (int64_t kr = 0; kr < ksize_; ++kr) {
      taps_begin_.push_back(static_cast<int64_t>(taps_.size()));
      for (int64_t p = 0; p < osize_; ++p) {
        if (row(kr)[p] >= 0) taps_.push_back({p, row(kr)[p]});
      }
    }
    taps_begin_.push_back(static_cast<int64_t>(taps_.size()));
  }

  // An output position and the input position one kernel offset reads there.
  struct Tap {
    int64_t output, input;
  };

  int64_t ksize() const { return ksize_; }
  int64_t osize() const { return osize_; }
  int64_t isize() const { return isize_; }
  // The input positions of kernel offset kr, one per output position.
  const int64_t* row(int64_t kr) const { return input_.data() + kr * osize_; }
  // Those of kernel offset kr that read inside the input, positions in order.
  std::span<const Tap> taps(int64_t kr) const {
    return std::span<const Tap>(taps_).subspan(taps_begin_[kr],
                                               taps_begin_[kr + 1] - taps_begin_[kr]);
  }

 private:
  int64_t ksize_, osize_, isize_;
  std::vector<int64_t> input_;
  std::vector<Tap> taps_;
  std::vector<int64_t> taps_begin_;  // taps_[taps_begin_[kr], taps_begin_[kr + 1]): offset kr's
};

// Im2Col's column matrix through a table: row (channel, kernel offset) of image i at
// col + row * ld + i * osize.
template <typename A>
void Im2ColByTable(const A* x, const PatchTable& table, int64_t channels, int64_t images,
                   int64_t image_stride, A* col, int64_t ld, ThreadPool& pool) {
  const int64_t ksize = table.ksize(), osize = table.osize(), isize = table.isize();
  const int64_t rows = channels * ksize;
  if (osize == 0) return;
  pool.ParallelFor(images * rows, std::max<int64_t>(1, 16384 / osize), [&](int64_t b, int64_t e) {
    int64_t image = b / rows, r = b % rows, channel = r / ksize, kr = r % ksize;
    for (int64_t t = b; t < e; ++t) {
      const A* xc = x + image * image_stride + channel * isize;
      const int64_t* at = table.row(kr);
      A* dst = col + r * ld + image * osize;
      for (int64_t p = 0; p < osize; ++p) dst[p] = at[p] >= 0 ? xc[at[p]] : A{0};
      if (++kr == ksize) {  // the next row, without divisions
        kr = 0;
        ++channel;
      }
      if (++r == rows) {
        r = channel = 0;
        ++image;
      }
    }
  });
}

// The reverse, for `images` images at once: plane (image, channel) of y, at y + image *
// image_stride + channel * isize, adds each column entry at its table position, kernel offsets
// then positions in order (Col2Im's order).
template <typename A>
void Col2ImByTable(const A* col, const PatchTable& table, int64_t channels, int64_t images,
                   int64_t ld, A* y, int64_t image_stride, ThreadPool& pool) {
  const int64_t ksize = table.ksize(), osize = table.osize(), isize = table.isize();
  const int64_t work = std::max<int64_t>(1, ksize * osize);
  auto plane_task = [&](int64_t image, int64_t channel) {
    A* plane = y + image * image_stride + channel * isize;
    for (int64_t kr = 0; kr < ksize; ++kr) {
      const A* src = col + (channel * ksize + kr) * ld + image * osize;
      for (const PatchTable::Tap& tap : table.taps(kr)) plane[tap.input] += src[tap.output];
    }
  };
  pool.ParallelFor(images * channels, std::max<int64_t>(1, 16384 / work),
                   [&](int64_t b, int64_t e) {
                     for (int64_t t = b; t < e; ++t) plane_task(t / channels, t % channels);
                   });
}

// A convolution's patch copies, through a PatchTable where one suits the geometry.
class ConvPatches {
 public:
  explicit ConvPatches(const ConvGeometry& g) : g_(g) {
    if (PatchTable::Suits(g)) table_.emplace(g);
  }
  // The table, or nullptr when the planes are too large for one.
  const PatchTable* table() const { return table_ ? &*table_ : nullptr; }

  // Im2Col of `images` images `image_stride` apart into col (row r of image i at col + r * ld +
  // i * output positions).
  template <typename A>
  void Im2Col(const A* x, int64_t channels, int64_t images, int64_t image_stride, A* col,
              int64_t ld, ThreadPool& pool) const {
    if (table_) {
      Im2ColByTable(x, *table_, channels, images, image_stride, col, ld, pool);
    } else {
      linalg::Im2Col(x, g_, channels, images, image_stride, col, ld, pool);
    }
  }

  // Adds col's entries (laid out as Im2Col writes them) back into the input planes of `images`
  // images `image_stride` apart in y.
  template <typename A>
  void AddCol2Im(const A* col, int64_t channels, int64_t images, int64_t ld, A* y,
                 int64_t image_stride, ThreadPool& pool) const {
    if (table_) {
      Col2ImByTable(col, *table_, channels, images, ld, y, image_stride, pool);
      return;
    }
    ConvGeometry back = g_;  // Col2Im scatters from the conv's output positions (its "input")
    std::swap(back.input, back.output);
    const int64_t osize = ElementCount(g_.output);
    for (int64_t image = 0; image < images; ++image) {
      Col2Im(col + image * osize, back, channels, y + image * image_stride, pool, ld);
    }
  }

 private:
  const ConvGeometry& g_;
  std::optional<PatchTable> table_;
};

}  // namespace ampc::linalg
