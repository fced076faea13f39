// ConvGrad (ai.ampc): dy, x, w -> dx, dw, db (each optional), with Conv's attributes. Per image
// and group, as linalg_conv.h's forward: dx = col2im(W^T dy), dw += dy im2col(x)^T, db = the sum
// of dy over images and positions. FP16/BF16 widen to FP32, and each output is rounded once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/cpu/grad_common.h"
#include "kernels/cpu/lane_sums.h"
#include "kernels/cpu/linalg_conv.h"

namespace ampc::grad {

// Images per block of ConvGrad's GEMMs: as many as keep the column matrix [C*kernel,
// images*positions] within 4 * linalg::kConvColumnElements. Fixed by the shapes alone (never by
// the thread count), so dw's sum over images has one order whatever the threads.
inline int64_t GradImagesPerBlock(int64_t batch, int64_t kdim, int64_t osize) {
  const int64_t fits = 4 * linalg::kConvColumnElements / std::max<int64_t>(1, kdim * osize);
  return std::clamp<int64_t>(fits, 1, std::max<int64_t>(1, batch));
}

// ConvGrad's sizes and operands in the accumulation type; dx and dw nullptr when not wanted.
template <typename T>
struct ConvGradWork {
  using A = linalg::Acc<T>;
  int64_t batch, c, m, cg, mg, isize, osize, kdim, block;
  const A *dy, *x, *w;
  A *dx, *dw;
  const linalg::ConvPatches& patches;
  ThreadPool& pool;

  // dyb [mg, images * osize]: dy of `images` images from `first`, group `group`, side by side.
  void GatherDy(int64_t first, int64_t images, int64_t group, A* dyb) const {
    const int64_t columns = images * osize;
    pool.ParallelFor(mg * images, std::max<int64_t>(1, 16384 / osize), [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t k = t / images, image = t % images;
        const A* src = dy + ((first + image) * m + group * mg + k) * osize;
        std::copy(src, src + osize, dyb + k * columns + image * osize);
      }
    });
  }

  // One group, block by block in order: dx = col2im(W^T dy), dw += dy im2col(x)^T.
  void Group(int64_t group, A* col, A* dyb) const {
    for (int64_t first = 0; first < batch; first += block) {
      const int64_t images = std::min(block, batch - first), columns = images * osize;
      GatherDy(first, images, group, dyb);
      if (dx != nullptr) {
        linalg::ParallelGemm<A, T>(pool, true, false, kdim, columns, mg, A{1},
                                   w + group * mg * kdim, kdim, dyb, columns, A{0}, col, columns);
        patches.AddCol2Im(col, cg, images, columns, dx + (first * c + group * cg) * isize,
                          c * isize, pool);
      }
      if (dw != nullptr) {
        patches.Im2Col(x + (first * c + group * cg) * isize, cg, images, c * isize, col, columns,
                       pool);
        // The first block sets dw (beta 0), the others add to it.
        linalg::ParallelGemm<A, T>(pool, false, true, mg, kdim, columns, A{1}, dyb, columns, col,
                                   columns, first == 0 ? A{0} : A{1}, dw + group * mg * kdim, kdim);
      }
    }
  }

  // Every group: one task each, run at once on the pool's threads (a single group's work is
  // split over them instead), each with its own scratch.
  void AllGroups(int64_t groups) const {
    pool.ParallelFor(groups, 1, [&](int64_t begin, int64_t end) {
      linalg::Scratch<A> col, dyb;
      A* pc = col.Get(kdim * block * osize);
      A* pd = dyb.Get(mg * block * osize);
      for (int64_t group = begin; group < end; ++group) Group(group, pc, pd);
    });
  }
};

// db = the sum of dy [batch, m, osize] over images and positions, as ReduceSum adds them.
template <typename T>
absl::Status StoreBiasGrad(KernelContext& context, const linalg::Acc<T>* dy, int64_t batch,
                           int64_t m, int64_t osize) {
  using A = linalg::Acc<T>;
  std::vector<A> db(static_cast<size_t>(m), A{0});
  SumEveryRow(
      context, dy, RowBlock{batch, m, osize}, [](A v) { return v; }, db.data());
  return Store<T>(context, 2, {m}, db);
}

// Per group and block of images, with the block's images side by side in one GEMM (so that
// layers with few output positions still make GEMMs the BLAS kernels run at speed):
// dx = col2im(W^T dy), dw += dy im2col(x)^T (blocks in order), db = the sum of dy over images
// and positions as ReduceSum adds them. Each output value is computed by one thread in a fixed
// order (a group's values by the one task of that group), so the result is the same at any
// thread count.
template <typename T>
absl::Status ConvGradTyped(KernelContext& context, const linalg::ConvGeometry& g) {
  using A = linalg::Acc<T>;
  const Tensor& dy = context.in(0);
  const Tensor& x = context.in(1);
  const Tensor& w = context.in(2);
  const int64_t batch = x.dim(0), c = x.dim(1), m = w.dim(0);
  const int64_t cg = c / g.group, mg = m / g.group;
  const int64_t isize = ElementCount(g.input), ksize = ElementCount(g.kernel);
  const int64_t osize = ElementCount(g.output), kdim = cg * ksize;
  const int64_t block = GradImagesPerBlock(batch, kdim, osize);
  if (!linalg::FitsBlas({mg, block * osize, kdim}))
    return NodeError(context, "a GEMM dimension exceeds 2^31-1");
  ThreadPool& pool = CpuOf(context.backend()).pool();
  linalg::SingleThreadedBlas();
  const bool want_dx = Wants(context, 0), want_dw = Wants(context, 1);
  // W only for dx, X only for dw (widened copies of FP16/BF16 otherwise made for nothing).
  linalg::AccInput<T> ady(dy.data<T>(), dy.size(), pool),
      ax(x.data<T>(), want_dw ? x.size() : 0, pool), aw(w.data<T>(), want_dx ? w.size() : 0, pool);
  linalg::AccOutput<T>* dx = nullptr;
  linalg::AccOutput<T>* dw = nullptr;
  std::optional<linalg::AccOutput<T>> dx_out, dw_out;
  if (want_dx) {
    AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, x.shape()));
    dx = &dx_out.emplace(out->data<T>(), out->size());
    std::fill(dx->data(), dx->data() + out->size(), A{0});
  }
  if (want_dw) {
    AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(1, w.shape()));
    dw = &dw_out.emplace(out->data<T>(), out->size());
    if (osize == 0 || batch == 0) std::fill(dw->data(), dw->data() + out->size(), A{0});
  }
  const linalg::ConvPatches patches(g);
  const ConvGradWork<T> work{.batch = batch,
                             .c = c,
                             .m = m,
                             .cg = cg,
                             .mg = mg,
                             .isize = isize,
                             .osize = osize,
                             .kdim = kdim,
                             .block = block,
                             .dy = ady.data(),
                             .x = ax.data(),
                             .w = aw.data(),
                             .dx = dx ? dx->data() : nullptr,
                             .dw = dw ? dw->data() : nullptr,
                             .patches = patches,
                             .pool = pool};
  const bool any = batch > 0 && osize > 0 && (dx || dw);  // else dx and dw hold their zeros
  if (any && cg == 1 && mg == 1 && g.group > 1 && patches.table() != nullptr) {
    linalg::DepthwiseConvGrad(work.dy, work.x, work.w, *patches.table(), batch, c, work.dx, work.dw,
                              pool);
  } else if (any) {
    work.AllGroups(g.group);
  }
  if (dx != nullptr) dx->Finish(pool);
  if (dw != nullptr) dw->Finish(pool);
  if (Wants(context, 2)) return StoreBiasGrad<T>(context, ady.data(), batch, m, osize);
  return absl::OkStatus();
}

inline absl::Status ConvGrad(KernelContext& context) {
  AMPC_RETURN_IF_ERROR(CheckSameType(context, {1, 2}, {"x", "w"}));
  // Conv's geometry from a view of this node with Conv's operands (x, w).
  Tensor* operands[] = {const_cast<Tensor*>(&context.in(1)), const_cast<Tensor*>(&context.in(2))};
  KernelContext conv(context.info(), operands, {}, {});
  AMPC_ASSIGN_OR_RETURN(const linalg::ConvGeometry g, linalg::ConvShape(conv));
  Shape y_shape = {context.in(1).dim(0), context.in(2).dim(0)};
  y_shape.insert(y_shape.end(), g.output.begin(), g.output.end());
  AMPC_RETURN_IF_ERROR(CheckShape(context, context.in(0), "dy", y_shape));
  absl::Status status;
  const bool handled = Dispatch<AMPC_FLOAT_TYPES>(
      context.in(0).dtype(), [&]<typename T>() { status = ConvGradTyped<T>(context, g); });
  return handled ? status : Unsupported(context);
}

}  // namespace ampc::grad
