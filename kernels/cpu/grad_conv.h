// ConvGrad (ai.ampc): dy, x, w -> dx, dw, db (each optional), with Conv's attributes. Per image
// and group, as linalg_conv.h's forward: dx = col2im(W^T dy), dw += dy im2col(x)^T, db = the sum
// of dy over images and positions. FP16/BF16 widen to FP32, and each output is rounded once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/grad_common.h"
#include "kernels/cpu/linalg_conv.h"

namespace ampc::grad {

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
  if (!linalg::FitsBlas({mg, osize, kdim}))
    return NodeError(context, "a GEMM dimension exceeds 2^31-1");
  ThreadPool& pool = CpuOf(context.backend()).pool();
  linalg::SingleThreadedBlas();
  linalg::AccInput<T> ady(dy.data<T>(), dy.size(), pool), ax(x.data<T>(), x.size(), pool),
      aw(w.data<T>(), w.size(), pool);
  std::vector<A> col(static_cast<size_t>(kdim * osize));
  if (Wants(context, 0)) {
    AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, x.shape()));
    linalg::AccOutput<T> dx(out->data<T>(), out->size());
    std::fill(dx.data(), dx.data() + out->size(), A{0});
    // Col2Im scatters from the conv's output positions (its "input") into the image.
    linalg::ConvGeometry back = g;
    std::swap(back.input, back.output);
    for (int64_t t = 0; t < batch * g.group && osize > 0; ++t) {
      const int64_t image = t / g.group, group = t % g.group;
      const A* dyg = ady.data() + (image * m + group * mg) * osize;
      linalg::ParallelGemm<A>(pool, true, false, kdim, osize, mg, A{1},
                              aw.data() + group * mg * kdim, kdim, dyg, osize, A{0}, col.data(),
                              osize);
      linalg::Col2Im(col.data(), back, cg, dx.data() + (image * c + group * cg) * isize, pool);
    }
    dx.Finish(pool);
  }
  if (Wants(context, 1)) {
    AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(1, w.shape()));
    linalg::AccOutput<T> dw(out->data<T>(), out->size());
    std::fill(dw.data(), dw.data() + out->size(), A{0});
    for (int64_t t = 0; t < batch * g.group && osize > 0; ++t) {
      const int64_t image = t / g.group, group = t % g.group;
      linalg::Im2Col(ax.data() + (image * c + group * cg) * isize, g, cg, col.data(), pool);
      linalg::ParallelGemm<A>(pool, false, true, mg, kdim, osize, A{1},
                              ady.data() + (image * m + group * mg) * osize, osize, col.data(),
                              osize, A{1}, dw.data() + group * mg * kdim, kdim);
    }
    dw.Finish(pool);
  }
  if (Wants(context, 2)) {
    std::vector<A> db(static_cast<size_t>(m), A{0});
    for (int64_t image = 0; image < batch; ++image) {
      for (int64_t k = 0; k < m; ++k) {
        const A* row = ady.data() + (image * m + k) * osize;
        for (int64_t p = 0; p < osize; ++p) db[k] += row[p];
      }
    }
    AMPC_RETURN_IF_ERROR(Store<T>(context, 2, {m}, db));
  }
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
