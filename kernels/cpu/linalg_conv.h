// Conv and ConvTranspose (1-D, 2-D, 3-D, ...): per image and group, im2col then one GEMM (Conv),
// or one GEMM then col2im (ConvTranspose). FP16/BF16 accumulate in FP32, bias included, and round
// once to the output type.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/linalg_gemm.h"

namespace ampc::linalg {

// The spatial axes of one convolution: `input` is what the GEMM reads per channel (im2col's
// source for Conv, col2im's column positions for ConvTranspose), `output` what it writes.
struct ConvGeometry {
  int rank = 0;
  Shape input, kernel, output;
  std::vector<int64_t> strides, dilations, pad_begin;
  int64_t group = 1;
};

// Python's floor(t / 2), for ConvTranspose's (possibly negative) total padding.
inline int64_t FloorHalf(int64_t t) { return t >= 0 ? t / 2 : -((1 - t) / 2); }

// The attributes Conv and ConvTranspose share; `pads` gets 2*rank values (begin..., end...).
inline absl::Status ReadConvAttributes(KernelContext& context, ConvGeometry& g,
                                       std::vector<int64_t>& pads, std::string& auto_pad) {
  const Tensor& x = context.in(0);
  const Tensor& w = context.in(1);
  if (x.rank() < 3 || w.rank() != x.rank()) {
    return NodeError(context,
                     absl::StrCat("X must be [N,C,spatial...] and W of the same rank, got ",
                                  ShapeString(x.shape()), " and ", ShapeString(w.shape())));
  }
  const Attributes at = context.attributes();
  g.rank = x.rank() - 2;
  const size_t n = static_cast<size_t>(g.rank);
  g.input.assign(x.shape().begin() + 2, x.shape().end());
  g.kernel.assign(w.shape().begin() + 2, w.shape().end());
  g.group = at.Int("group", 1);
  g.strides = at.Ints("strides", std::vector<int64_t>(n, 1));
  g.dilations = at.Ints("dilations", std::vector<int64_t>(n, 1));
  pads = at.Ints("pads", std::vector<int64_t>(2 * n, 0));
  auto_pad = at.String("auto_pad", "NOTSET");
  const std::vector<int64_t> kernel_shape = at.Ints("kernel_shape", g.kernel);
  if (g.group < 1) return NodeError(context, absl::StrCat("group must be >= 1, got ", g.group));
  if (g.strides.size() != n || g.dilations.size() != n || pads.size() != 2 * n) {
    return NodeError(context, absl::StrCat("strides, dilations and pads need ", n, ", ", n, " and ",
                                           2 * n, " values for ", n, " spatial axes"));
  }
  if (kernel_shape != g.kernel) {
    return NodeError(context, absl::StrCat("kernel_shape [", absl::StrJoin(kernel_shape, ","),
                                           "] differs from W's spatial dims [",
                                           absl::StrJoin(g.kernel, ","), "]"));
  }
  for (size_t d = 0; d < n; ++d) {
    if (g.strides[d] < 1 || g.dilations[d] < 1 || pads[d] < 0 || pads[d + n] < 0) {
      return NodeError(context, "strides and dilations must be >= 1, pads >= 0");
    }
  }
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER") {
    return NodeError(context, absl::StrCat("unknown auto_pad '", auto_pad, "'"));
  }
  const Tensor* bias = context.input(2);
  const int64_t channels = context.info().node.op_type() == "Conv" ? w.dim(0) : w.dim(1) * g.group;
  if (bias != nullptr && (bias->rank() != 1 || bias->dim(0) != channels)) {
    return NodeError(context,
                     absl::StrCat("B must be [", channels, "], got ", ShapeString(bias->shape())));
  }
  return absl::OkStatus();
}

inline absl::StatusOr<ConvGeometry> ConvShape(KernelContext& context) {
  ConvGeometry g;
  std::vector<int64_t> pads;
  std::string auto_pad;
  AMPC_RETURN_IF_ERROR(ReadConvAttributes(context, g, pads, auto_pad));
  const Tensor& x = context.in(0);
  const Tensor& w = context.in(1);
  if (w.dim(0) % g.group != 0 || x.dim(1) != w.dim(1) * g.group) {
    return NodeError(context, absl::StrCat("X ", ShapeString(x.shape()), " and W ",
                                           ShapeString(w.shape()), " do not fit group ", g.group,
                                           " (need C == W[1]*group, W[0] % group == 0)"));
  }
  const int n = g.rank;
  g.pad_begin.resize(n);
  g.output.resize(n);
  for (int d = 0; d < n; ++d) {
    const int64_t in = g.input[d], s = g.strides[d];
    const int64_t extent = (g.kernel[d] - 1) * g.dilations[d] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      g.output[d] = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (g.output[d] - 1) * s + extent - in);
      g.pad_begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      continue;
    }
    const int64_t begin = auto_pad == "VALID" ? 0 : pads[d];
    const int64_t end = auto_pad == "VALID" ? 0 : pads[d + n];
    if (in + begin + end < extent) {
      return NodeError(context,
                       absl::StrCat("spatial axis ", d, ": padded input ", in + begin + end,
                                    " is smaller than the dilated kernel ", extent));
    }
    g.pad_begin[d] = begin;
    g.output[d] = (in + begin + end - extent) / s + 1;
  }
  return g;
}

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

// One image: col is [channels * kernel, output positions].
template <typename A>
void Im2Col(const A* x, const ConvGeometry& g, int64_t channels, A* col, ThreadPool& pool) {
  Im2Col(x, g, channels, 1, 0, col, ElementCount(g.output), pool);
}

// The reverse: adds each column entry (channel, kernel offset; input position) into the output
// position it maps to, skipping positions cut off by the padding. `y` is [channels, output...].
template <typename A>
void Col2Im(const A* col, const ConvGeometry& g, int64_t channels, A* y, ThreadPool& pool) {
  const int n = g.rank;
  const int64_t isize = ElementCount(g.input), ksize = ElementCount(g.kernel);
  const int64_t osize = ElementCount(g.output), last = g.input[n - 1];
  if (isize == 0) return;
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
        const A* src = col + (m * ksize + kr) * isize;
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

// Adds bias[c] to the `size` values of each of `channels` rows.
template <typename A>
void AddBias(const A* bias, int64_t channels, int64_t size, A* y) {
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t p = 0; p < size; ++p) y[c * size + p] += bias[c];
  }
}

// Runs task(t, scratch) for t in [0, tasks): in parallel when each task's GEMM is small enough
// for OpenBLAS to run it on one thread, else one at a time with OpenBLAS's threads.
template <typename A, typename Task>
void RunConvTasks(ThreadPool& pool, int64_t tasks, int64_t gemm_work, Task task) {
  if (gemm_work <= kSingleThreadedGemm) {
    pool.ParallelFor(tasks, 1, [&](int64_t begin, int64_t end) {
      std::vector<A> scratch;
      for (int64_t t = begin; t < end; ++t) task(t, scratch);
    });
  } else {
    std::vector<A> scratch;
    for (int64_t t = 0; t < tasks; ++t) task(t, scratch);
  }
}

// Allocates Y [N, channels, output...]; nullptr when it is empty (nothing to compute).
inline absl::StatusOr<Tensor*> ConvOutput(KernelContext& context, const ConvGeometry& g,
                                          int64_t channels,
                                          std::initializer_list<int64_t> gemm_dims) {
  Shape shape = {context.in(0).dim(0), channels};
  shape.insert(shape.end(), g.output.begin(), g.output.end());
  AMPC_ASSIGN_OR_RETURN(Tensor * y, context.Output(0, shape));
  if (y->size() == 0) return nullptr;
  if (!FitsBlas(gemm_dims)) return NodeError(context, "a GEMM dimension exceeds 2^31-1");
  return y;
}

// X, W and B in the accumulation type, and Y's accumulator.
template <typename T>
struct ConvOperands {
  ConvOperands(const KernelContext& context, Tensor& out, ThreadPool& pool)
      : x(context.in(0).data<T>(), context.in(0).size(), pool),
        w(context.in(1).data<T>(), context.in(1).size(), pool),
        bias(context.input(2) ? context.input(2)->data<T>() : nullptr,
             context.input(2) ? context.input(2)->size() : 0, pool),
        has_bias(context.input(2) != nullptr),
        y(out.data<T>(), out.size()) {
    MatchBlasThreads(pool);
  }
  AccInput<T> x, w, bias;
  bool has_bias;
  AccOutput<T> y;
};

// The column matrix of a batched Conv holds up to this many elements (16 MiB of floats).
inline constexpr int64_t kConvColumnElements = int64_t{1} << 22;

// Conv with one group: the patches of a chunk of images side by side in one column matrix
// [C*kernel, images*output], so one GEMM per chunk (threaded by OpenBLAS) replaces a small GEMM
// per image; its [M, images*output] result is copied out per image, bias added.
template <typename T>
void ConvBatched(const KernelContext& context, const ConvGeometry& g, ConvOperands<T>& op,
                 ThreadPool& pool) {
  using A = Acc<T>;
  const int64_t batch = context.in(0).dim(0), c = context.in(0).dim(1), m = context.in(1).dim(0);
  const int64_t isize = ElementCount(g.input), osize = ElementCount(g.output);
  const int64_t kdim = c * ElementCount(g.kernel);
  const int64_t chunk =
      std::clamp<int64_t>(kConvColumnElements / std::max<int64_t>(1, kdim * osize), 1, batch);
  std::unique_ptr<A[]> col(new A[static_cast<size_t>(kdim * osize * chunk)]);
  std::unique_ptr<A[]> product(chunk > 1 ? new A[static_cast<size_t>(m * osize * chunk)] : nullptr);
  for (int64_t first = 0; first < batch; first += chunk) {
    const int64_t images = std::min(chunk, batch - first), columns = images * osize;
    Im2Col(op.x.data() + first * c * isize, g, c, images, c * isize, col.get(), columns, pool);
    A* y = op.y.data() + first * m * osize;
    if (images == 1) {
      Gemm<A>(false, false, m, osize, kdim, A{1}, op.w.data(), kdim, col.get(), osize, A{0}, y,
              osize);
      if (op.has_bias) AddBias(op.bias.data(), m, osize, y);
      continue;
    }
    Gemm<A>(false, false, m, columns, kdim, A{1}, op.w.data(), kdim, col.get(), columns, A{0},
            product.get(), columns);
    pool.ParallelFor(images * m, std::max<int64_t>(1, kCopyGrain / osize),
                     [&](int64_t begin, int64_t end) {
                       for (int64_t t = begin; t < end; ++t) {
                         const int64_t image = t / m, channel = t % m;
                         const A* src = product.get() + channel * columns + image * osize;
                         A* dst = y + t * osize;
                         const A bias = op.has_bias ? op.bias.data()[channel] : A{0};
                         for (int64_t p = 0; p < osize; ++p) dst[p] = src[p] + bias;
                       }
                     });
  }
}

template <typename T>
absl::Status ConvTyped(KernelContext& context, const ConvGeometry& g) {
  using A = Acc<T>;
  const Tensor& x = context.in(0);
  const Tensor& w = context.in(1);
  const int64_t batch = x.dim(0), c = x.dim(1), m = w.dim(0);
  const int64_t cg = c / g.group, mg = m / g.group;
  const int64_t isize = ElementCount(g.input), ksize = ElementCount(g.kernel);
  const int64_t osize = ElementCount(g.output), kdim = cg * ksize;
  AMPC_ASSIGN_OR_RETURN(Tensor * y, ConvOutput(context, g, m, {mg, osize, kdim}));
  if (y == nullptr) return absl::OkStatus();
  ThreadPool& pool = CpuOf(context.backend()).pool();
  ConvOperands<T> op(context, *y, pool);
  // A 1x1 kernel over an unpadded, unstrided input reads the input as it is.
  const bool direct =
      ksize == 1 && g.input == g.output &&
      std::all_of(g.pad_begin.begin(), g.pad_begin.end(), [](int64_t p) { return p == 0; });
  if (g.group == 1 && !direct && FitsBlas({batch * osize})) {
    ConvBatched<T>(context, g, op, pool);
    op.y.Finish(pool);
    return absl::OkStatus();
  }
  RunConvTasks<A>(pool, batch * g.group, mg * osize * kdim, [&](int64_t t, std::vector<A>& col) {
    const int64_t image = t / g.group, group = t % g.group;
    const A* src = op.x.data() + (image * c + group * cg) * isize;
    if (!direct) {
      col.resize(static_cast<size_t>(kdim * osize));
      Im2Col(src, g, cg, col.data(), pool);
      src = col.data();
    }
    A* yg = op.y.data() + (image * m + group * mg) * osize;
    Gemm<A>(false, false, mg, osize, kdim, A{1}, op.w.data() + group * mg * kdim, kdim, src, osize,
            A{0}, yg, osize);
    if (op.has_bias) AddBias(op.bias.data() + group * mg, mg, osize, yg);
  });
  op.y.Finish(pool);
  return absl::OkStatus();
}

inline absl::Status Conv(KernelContext& context) {
  AMPC_ASSIGN_OR_RETURN(const ConvGeometry g, ConvShape(context));
  return DispatchKernel<AMPC_FLOAT_TYPES>(context,
                                          [&]<typename T>() { return ConvTyped<T>(context, g); });
}

// ConvTranspose's output size and padding per axis: from output_shape or auto_pad SAME_* (the
// total padding split as the ONNX spec says, floor division included), else from pads.
inline absl::StatusOr<ConvGeometry> ConvTransposeShape(KernelContext& context) {
  ConvGeometry g;
  std::vector<int64_t> pads;
  std::string auto_pad;
  AMPC_RETURN_IF_ERROR(ReadConvAttributes(context, g, pads, auto_pad));
  const Tensor& x = context.in(0);
  const Tensor& w = context.in(1);
  if (x.dim(1) % g.group != 0 || w.dim(0) != x.dim(1)) {
    return NodeError(
        context, absl::StrCat("X ", ShapeString(x.shape()), " and W ", ShapeString(w.shape()),
                              " do not fit group ", g.group, " (need W[0] == C, C % group == 0)"));
  }
  const Attributes at = context.attributes();
  const int n = g.rank;
  const std::vector<int64_t> output_padding = at.Ints("output_padding", std::vector<int64_t>(n, 0));
  std::vector<int64_t> output_shape = at.Ints("output_shape");
  if (output_shape.size() == static_cast<size_t>(n) + 2) {  // [N, C, spatial...] also seen
    output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  }
  if (output_padding.size() != static_cast<size_t>(n) ||
      (!output_shape.empty() && output_shape.size() != static_cast<size_t>(n))) {
    return NodeError(context, absl::StrCat("output_padding and output_shape need ", n,
                                           " values for ", n, " spatial axes"));
  }
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  g.pad_begin.resize(n);
  g.output.resize(n);
  for (int d = 0; d < n; ++d) {
    const int64_t in = g.input[d], s = g.strides[d];
    const int64_t full = s * (in - 1) + output_padding[d] + (g.kernel[d] - 1) * g.dilations[d] + 1;
    if (!output_shape.empty() || same) {
      g.output[d] = output_shape.empty() ? in * s : output_shape[d];
      const int64_t total = full - g.output[d];
      g.pad_begin[d] = auto_pad == "SAME_UPPER" ? FloorHalf(total) : total - FloorHalf(total);
    } else {
      g.pad_begin[d] = auto_pad == "VALID" ? 0 : pads[d];
      g.output[d] = full - g.pad_begin[d] - (auto_pad == "VALID" ? 0 : pads[d + n]);
    }
    if (g.output[d] < 0) {
      return NodeError(
          context, absl::StrCat("spatial axis ", d, ": output size ", g.output[d], " is negative"));
    }
  }
  return g;
}

template <typename T>
absl::Status ConvTransposeTyped(KernelContext& context, const ConvGeometry& g) {
  using A = Acc<T>;
  const Tensor& x = context.in(0);
  const Tensor& w = context.in(1);
  const int64_t batch = x.dim(0), c = x.dim(1), mg = w.dim(1);
  const int64_t cg = c / g.group, m = mg * g.group;
  const int64_t isize = ElementCount(g.input), ksize = ElementCount(g.kernel);
  const int64_t osize = ElementCount(g.output), rows = mg * ksize;
  AMPC_ASSIGN_OR_RETURN(Tensor * y, ConvOutput(context, g, m, {rows, isize, cg}));
  if (y == nullptr) return absl::OkStatus();
  ThreadPool& pool = CpuOf(context.backend()).pool();
  ConvOperands<T> op(context, *y, pool);
  RunConvTasks<A>(pool, batch * g.group, rows * isize * cg, [&](int64_t t, std::vector<A>& col) {
    const int64_t image = t / g.group, group = t % g.group;
    const A* xg = op.x.data() + (image * c + group * cg) * isize;
    col.resize(static_cast<size_t>(rows * isize));
    // col[(m, kernel offset), input position] = sum over c of W[c, m, offset] * X[c, position]
    Gemm<A>(true, false, rows, isize, cg, A{1}, op.w.data() + group * cg * rows, rows, xg, isize,
            A{0}, col.data(), isize);
    A* yg = op.y.data() + (image * m + group * mg) * osize;
    std::fill(yg, yg + mg * osize, A{0});
    Col2Im(col.data(), g, mg, yg, pool);
    if (op.has_bias) AddBias(op.bias.data() + group * mg, mg, osize, yg);
  });
  op.y.Finish(pool);
  return absl::OkStatus();
}

inline absl::Status ConvTranspose(KernelContext& context) {
  AMPC_ASSIGN_OR_RETURN(const ConvGeometry g, ConvTransposeShape(context));
  return DispatchKernel<AMPC_FLOAT_TYPES>(
      context, [&]<typename T>() { return ConvTransposeTyped<T>(context, g); });
}

}  // namespace ampc::linalg
