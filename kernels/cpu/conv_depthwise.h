// Depthwise convolutions (one input and one output channel per group, MobileNet's 3x3 and 5x5
// layers) straight over the PatchTable: no column matrix, no one-row GEMM per group, and the taps
// that read padding skipped. Sums in the accumulation type, each in a fixed order (kernel
// offsets, then images and positions) by one task, so the same at any thread count.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/conv_patches.h"
#include "runtime/core/thread_pool.h"

namespace ampc::linalg {

// y [batch, channels, output] = the depthwise convolution of x with w [channels, kernel], then
// epilogue.Row(y row, channel) (bias, activation).
template <typename A, typename Epilogue>
void DepthwiseConv(const A* x, const A* w, const PatchTable& table, int64_t batch, int64_t channels,
                   const Epilogue& epilogue, A* y, ThreadPool& pool) {
  const int64_t ksize = table.ksize(), osize = table.osize(), isize = table.isize();
  const int64_t work = std::max<int64_t>(1, ksize * osize);
  pool.ParallelFor(batch * channels, std::max<int64_t>(1, 16384 / work), [&](int64_t b, int64_t e) {
    for (int64_t plane = b; plane < e; ++plane) {
      const int64_t channel = plane % channels;
      const A* xc = x + plane * isize;
      A* yc = y + plane * osize;
      std::fill(yc, yc + osize, A{0});
      for (int64_t kr = 0; kr < ksize; ++kr) {
        const A wk = w[channel * ksize + kr];
        for (const PatchTable::Tap& tap : table.taps(kr)) yc[tap.output] += wk * xc[tap.input];
      }
      epilogue.Row(yc, yc, osize, channel);
    }
  });
}

// Its gradients, one channel per task: dw[channel, kr] = the sum over images and positions of
// dy * x at the tap (when dw is not null), and dx (cleared by the caller; when not null) += w *
// dy scattered to the taps' input positions.
template <typename A>
void DepthwiseConvGrad(const A* dy, const A* x, const A* w, const PatchTable& table, int64_t batch,
                       int64_t channels, A* dx, A* dw, ThreadPool& pool) {
  const int64_t ksize = table.ksize(), osize = table.osize(), isize = table.isize();
  const int64_t work = std::max<int64_t>(1, batch * ksize * osize);
  pool.ParallelFor(channels, std::max<int64_t>(1, 16384 / work), [&](int64_t b, int64_t e) {
    for (int64_t channel = b; channel < e; ++channel) {
      for (int64_t kr = 0; kr < ksize && dw != nullptr; ++kr) {
        A sum{0};
        for (int64_t image = 0; image < batch; ++image) {
          const A* dyc = dy + (image * channels + channel) * osize;
          const A* xc = x + (image * channels + channel) * isize;
          for (const PatchTable::Tap& tap : table.taps(kr)) sum += dyc[tap.output] * xc[tap.input];
        }
        dw[channel * ksize + kr] = sum;
      }
      for (int64_t image = 0; image < batch && dx != nullptr; ++image) {
        const A* dyc = dy + (image * channels + channel) * osize;
        A* dxc = dx + (image * channels + channel) * isize;
        for (int64_t kr = 0; kr < ksize; ++kr) {
          const A wk = w[channel * ksize + kr];
          for (const PatchTable::Tap& tap : table.taps(kr)) dxc[tap.input] += wk * dyc[tap.output];
        }
      }
    }
  });
}

}  // namespace ampc::linalg
