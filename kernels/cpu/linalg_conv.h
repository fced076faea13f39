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
#include "kernels/cpu/conv_depthwise.h"
#include "kernels/cpu/conv_geometry.h"
#include "kernels/cpu/conv_patches.h"
#include "kernels/cpu/linalg_gemm.h"

namespace ampc::linalg {

// Python's floor(t / 2), for ConvTranspose's (possibly negative) total padding.
inline int64_t FloorHalf(int64_t t) { return t >= 0 ? t / 2 : -((1 - t) / 2); }

// Adds bias[c] to the `size` values of each of `channels` rows.
template <typename A>
void AddBias(const A* bias, int64_t channels, int64_t size, A* y) {
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t p = 0; p < size; ++p) y[c * size + p] += bias[c];
  }
}

// What Conv does to each output value after the GEMM: add the bias (when there is one) and apply
// Relu (FusedConv), as the separate nodes would, in the accumulation type. Loops without branches
// on the values, so they vectorise.
template <typename A>
struct ConvEpilogue {
  const A* bias;  // nullptr: none
  bool relu;

  // dst[p] = epilogue(src[p]) for the `size` values of channel `channel`; src may be dst.
  void Row(const A* src, A* dst, int64_t size, int64_t channel) const {
    const A b = bias != nullptr ? bias[channel] : A{0};
    // max(v, 0) is Relu's v < 0 ? 0 : v (a NaN stays NaN); without a bias nothing is added, so
    // a -0 product stays -0 as without the fusion.
    if (relu && bias != nullptr) {
      for (int64_t p = 0; p < size; ++p) dst[p] = std::max(src[p] + b, A{0});
    } else if (relu) {
      for (int64_t p = 0; p < size; ++p) dst[p] = std::max(src[p], A{0});
    } else if (bias != nullptr) {
      for (int64_t p = 0; p < size; ++p) dst[p] = src[p] + b;
    } else if (src != dst) {
      std::copy(src, src + size, dst);
    }
  }
  // In place over `channels` rows of `size` values, the first row being channel `first`.
  void Apply(int64_t first, int64_t channels, int64_t size, A* y) const {
    for (int64_t c = 0; c < channels; ++c) Row(y + c * size, y + c * size, size, first + c);
  }
};

// Uninitialised working memory that grows to the largest size asked for.
template <typename A>
using Scratch = ScratchBuffer<A>;

// Runs task(t, scratch) for t in [0, tasks) on the pool's threads, one Scratch per chunk of tasks.
// A task's own ParallelFor and ParallelGemm run inline when tasks run in parallel, and split
// over the pool when there is a single task.
template <typename A, typename Task>
void RunConvTasks(ThreadPool& pool, int64_t tasks, Task task) {
  pool.ParallelFor(tasks, 1, [&](int64_t begin, int64_t end) {
    Scratch<A> scratch;
    for (int64_t t = begin; t < end; ++t) task(t, scratch);
  });
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
    SingleThreadedBlas();
  }
  AccInput<T> x, w, bias;
  bool has_bias;
  AccOutput<T> y;
};

// A block of images shares one column matrix of up to this many elements (1 MiB of floats), so
// one GEMM covers them when each image has few output positions.
inline constexpr int64_t kConvColumnElements = int64_t{1} << 18;
// Below this many output positions per GEMM the BLAS kernels run at a fraction of their speed.
inline constexpr int64_t kConvGemmColumns = 256;

// Images per block of a one-group Conv: enough for kConvGemmColumns GEMM columns, few enough that
// the column matrix stays within kConvColumnElements. Fixed by the shapes alone: a block's GEMM,
// and so its bits, is the same at any thread count (when there are fewer blocks than threads,
// ParallelGemm splits each block's product).
inline int64_t ImagesPerBlock(int64_t batch, int64_t kdim, int64_t osize) {
  const int64_t wanted = (kConvGemmColumns + osize - 1) / osize;
  const int64_t fits = kConvColumnElements / std::max<int64_t>(1, kdim * osize);
  return std::max<int64_t>(1, std::min({wanted, fits, batch}));
}

// Conv of one group over a block of images: their patches side by side in one column matrix
// [C/group*kernel, images*output] and one GEMM; with one image the GEMM writes Y directly, else
// its [M/group, images*output] product is copied out per image. Epilogue applied either way.
template <typename T>
void ConvImageBlock(const ConvGeometry& g, const ConvPatches& patches, ConvOperands<T>& op,
                    const ConvEpilogue<Acc<T>>& epilogue, int64_t c, int64_t m, int64_t group,
                    int64_t first, int64_t images, Scratch<Acc<T>>& scratch, ThreadPool& pool) {
  using A = Acc<T>;
  const int64_t isize = ElementCount(g.input), osize = ElementCount(g.output);
  const int64_t cg = c / g.group, mg = m / g.group;
  const int64_t kdim = cg * ElementCount(g.kernel), columns = images * osize;
  A* col = scratch.Get(kdim * columns + (images > 1 ? mg * columns : 0));
  patches.Im2Col(op.x.data() + (first * c + group * cg) * isize, cg, images, c * isize, col,
                 columns, pool);
  const A* wg = op.w.data() + group * mg * kdim;
  A* y = op.y.data() + (first * m + group * mg) * osize;
  if (images == 1) {
    ParallelGemm<A, T>(pool, false, false, mg, osize, kdim, A{1}, wg, kdim, col, osize, A{0}, y,
                       osize);
    epilogue.Apply(group * mg, mg, osize, y);
    return;
  }
  A* product = col + kdim * columns;
  ParallelGemm<A, T>(pool, false, false, mg, columns, kdim, A{1}, wg, kdim, col, columns, A{0},
                     product, columns);
  for (int64_t image = 0; image < images; ++image) {
    for (int64_t channel = 0; channel < mg; ++channel) {
      epilogue.Row(product + channel * columns + image * osize, y + (image * m + channel) * osize,
                   osize, group * mg + channel);
    }
  }
}

template <typename T>
absl::Status ConvTyped(KernelContext& context, const ConvGeometry& g, bool relu) {
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
  const ConvEpilogue<A> epilogue{op.has_bias ? op.bias.data() : nullptr, relu};
  const ConvPatches patches(g);
  // A 1x1 kernel over an unpadded, unstrided input reads the input as it is.
  const bool direct =
      ksize == 1 && g.input == g.output &&
      std::all_of(g.pad_begin.begin(), g.pad_begin.end(), [](int64_t p) { return p == 0; });
  if (cg == 1 && mg == 1 && g.group > 1 && patches.table() != nullptr) {
    DepthwiseConv(op.x.data(), op.w.data(), *patches.table(), batch, c, epilogue, op.y.data(),
                  pool);
    op.y.Finish(pool);
    return absl::OkStatus();
  }
  // Blocks of images per group, unless a 1x1 kernel could read X as it is and the output planes
  // are large enough for one image per GEMM anyway.
  const int64_t block = ImagesPerBlock(batch, kdim, osize);
  if (!(direct && block == 1) && FitsBlas({block * osize})) {
    const int64_t blocks = (batch + block - 1) / block;
    RunConvTasks<A>(pool, g.group * blocks, [&](int64_t t, Scratch<A>& scratch) {
      const int64_t group = t / blocks, first = t % blocks * block;
      ConvImageBlock<T>(g, patches, op, epilogue, c, m, group, first,
                        std::min(block, batch - first), scratch, pool);
    });
    op.y.Finish(pool);
    return absl::OkStatus();
  }
  RunConvTasks<A>(pool, batch * g.group, [&](int64_t t, Scratch<A>& scratch) {
    const int64_t image = t / g.group, group = t % g.group;
    const A* src = op.x.data() + (image * c + group * cg) * isize;
    if (!direct) {
      A* col = scratch.Get(kdim * osize);
      patches.Im2Col(src, cg, 1, 0, col, osize, pool);
      src = col;
    }
    A* yg = op.y.data() + (image * m + group * mg) * osize;
    ParallelGemm<A, T>(pool, false, false, mg, osize, kdim, A{1}, op.w.data() + group * mg * kdim,
                       kdim, src, osize, A{0}, yg, osize);
    epilogue.Apply(group * mg, mg, osize, yg);
  });
  op.y.Finish(pool);
  return absl::OkStatus();
}

inline absl::Status Conv(KernelContext& context) {
  AMPC_ASSIGN_OR_RETURN(const ConvGeometry g, ConvShape(context));
  return DispatchKernel<AMPC_FLOAT_TYPES>(
      context, [&]<typename T>() { return ConvTyped<T>(context, g, false); });
}

// FusedConv (runtime/conv_fusion.h): Conv with its activation applied as it writes Y.
inline absl::Status FusedConv(KernelContext& context) {
  const std::string activation = context.attributes().String("activation", "");
  if (activation != "Relu") {
    return NodeError(context, absl::StrCat("unsupported activation '", activation, "'"));
  }
  AMPC_ASSIGN_OR_RETURN(const ConvGeometry g, ConvShape(context));
  return DispatchKernel<AMPC_FLOAT_TYPES>(
      context, [&]<typename T>() { return ConvTyped<T>(context, g, true); });
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
  RunConvTasks<A>(pool, batch * g.group, [&](int64_t t, Scratch<A>& scratch) {
    const int64_t image = t / g.group, group = t % g.group;
    const A* xg = op.x.data() + (image * c + group * cg) * isize;
    A* col = scratch.Get(rows * isize);
    // col[(m, kernel offset), input position] = sum over c of W[c, m, offset] * X[c, position]
    ParallelGemm<A, T>(pool, true, false, rows, isize, cg, A{1}, op.w.data() + group * cg * rows,
                       rows, xg, isize, A{0}, col, isize);
    A* yg = op.y.data() + (image * m + group * mg) * osize;
    std::fill(yg, yg + mg * osize, A{0});
    Col2Im(col, g, mg, yg, pool);
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
