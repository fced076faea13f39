// Col2Im (opset 18): the inverse of im2col. Input [N, C * prod(block_shape), L] holds, for every
// block position of a sliding window over an image of image_shape, the window's taps; the output
// [N, C, image...] sums each tap into the image element it came from. Sums accumulate in FP32
// (FP64, 64-bit integers) in the order of the input and are rounded once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/linalg_shapes.h"
#include "kernels/cpu/reduce_common.h"
#include "passes/graph/status_macros.h"

namespace ampc::linalg {

// Where each of the K * L input elements of one (n, c) plane goes in the image (-1: outside it).
struct Col2ImPlan {
  Shape output;
  int64_t planes = 0, taps = 0, image_size = 1;
  std::vector<int64_t> target;
};

struct Col2ImGeometry {
  std::vector<int64_t> image, block, dilations, pads, strides, blocks;
};

inline absl::StatusOr<Col2ImGeometry> ReadCol2ImGeometry(const KernelContext& context) {
  Col2ImGeometry g;
  AMPC_ASSIGN_OR_RETURN(g.image, reduce::ReadInts(context, context.in(1), "image_shape"));
  AMPC_ASSIGN_OR_RETURN(g.block, reduce::ReadInts(context, context.in(2), "block_shape"));
  const size_t n = g.image.size();
  const Attributes attributes = context.attributes();
  g.dilations = attributes.Ints("dilations", std::vector<int64_t>(n, 1));
  g.pads = attributes.Ints("pads", std::vector<int64_t>(2 * n, 0));
  g.strides = attributes.Ints("strides", std::vector<int64_t>(n, 1));
  if (n == 0 || g.block.size() != n || g.dilations.size() != n || g.pads.size() != 2 * n ||
      g.strides.size() != n) {
    return NodeError(context, absl::StrCat("image_shape [", absl::StrJoin(g.image, ","),
                                           "] needs as many block_shape, dilations and strides "
                                           "values and twice as many pads"));
  }
  for (size_t d = 0; d < n; ++d) {
    const int64_t extent = g.dilations[d] * (g.block[d] - 1) + 1;
    if (g.image[d] < 0 || g.block[d] < 1 || g.dilations[d] < 1 || g.strides[d] < 1 ||
        g.pads[d] < 0 || g.pads[d + n] < 0 || g.image[d] + g.pads[d] + g.pads[d + n] < extent) {
      return NodeError(context, absl::StrCat("spatial dimension ", d, ": image ", g.image[d],
                                             ", block ", g.block[d], ", dilation ", g.dilations[d],
                                             ", stride ", g.strides[d], " and pads give no block"));
    }
    g.blocks.push_back((g.image[d] + g.pads[d] + g.pads[d + n] - extent) / g.strides[d] + 1);
  }
  return g;
}

// The image offset of every (tap, block position) pair, taps and positions row-major.
inline std::vector<int64_t> Col2ImTargets(const Col2ImGeometry& g) {
  return WindowTargets(g.block, g.blocks, g.strides, g.dilations, g.pads, g.image);
}

inline absl::StatusOr<Col2ImPlan> PlanCol2Im(const KernelContext& context) {
  const Tensor& x = context.in(0);
  AMPC_ASSIGN_OR_RETURN(const Col2ImGeometry g, ReadCol2ImGeometry(context));
  const int64_t taps = ElementCount(g.block), blocks = ElementCount(g.blocks);
  if (x.rank() != 3 || x.dim(1) % taps != 0 || x.dim(2) != blocks) {
    return NodeError(
        context, absl::StrCat("input ", ShapeString(x.shape()), " is not [N, C * ", taps, ", ",
                              blocks, "] for block_shape [", absl::StrJoin(g.block, ","), "] and ",
                              blocks, " block positions"));
  }
  Col2ImPlan plan;
  plan.output = {x.dim(0), x.dim(1) / taps};
  plan.output.insert(plan.output.end(), g.image.begin(), g.image.end());
  plan.planes = plan.output[0] * plan.output[1];
  plan.taps = taps * blocks;
  plan.image_size = ElementCount(g.image);
  plan.target = Col2ImTargets(g);
  return plan;
}

inline absl::Status Col2Im(KernelContext& context) {
  const Tensor& x = context.in(0);
  AMPC_ASSIGN_OR_RETURN(const Col2ImPlan plan, PlanCol2Im(context));
  AMPC_ASSIGN_OR_RETURN(Tensor * out, context.Output(0, plan.output));
  const bool handled = Dispatch<AMPC_FLOAT_TYPES, AMPC_INT_TYPES>(x.dtype(), [&]<typename T>() {
    using A = reduce::Acc<T>;
    const T* px = x.data<T>();
    T* py = out->data<T>();
    reduce::ParallelFor(context, plan.planes, plan.taps, [&](int64_t begin, int64_t end) {
      std::vector<A> image(plan.image_size);
      for (int64_t p = begin; p < end; ++p) {
        std::fill(image.begin(), image.end(), A{0});
        const T* in = px + p * plan.taps;
        for (int64_t j = 0; j < plan.taps; ++j) {
          if (plan.target[j] >= 0) image[plan.target[j]] += reduce::LoadAcc(in[j]);
        }
        for (int64_t i = 0; i < plan.image_size; ++i) {
          py[p * plan.image_size + i] = reduce::StoreAs<T>(image[i]);
        }
      }
    });
  });
  return handled ? absl::OkStatus() : reduce::UnsupportedType(context);
}

}  // namespace ampc::linalg
