// The geometry of Conv (and, for its attributes, ConvTranspose): output sizes and padding from the
// attributes, as the ONNX spec gives them. Shared by the CPU kernels (linalg_conv.h, grad_conv.h)
// and the CUDA ones (kernels/cuda/conv_ops.cc), so both backends read a node alike.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/kernel.h"

namespace ampc::linalg {

// The spatial axes of one convolution: `input` is what the GEMM reads per channel (im2col's
// source for Conv, col2im's column positions for ConvTranspose), `output` what it writes.
struct ConvGeometry {
  int rank = 0;
  Shape input, kernel, output;
  std::vector<int64_t> strides, dilations, pad_begin;
  int64_t group = 1;
};

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
  const bool transpose = context.info().node.op_type() == "ConvTranspose";
  const int64_t channels = transpose ? w.dim(1) * g.group : w.dim(0);
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

}  // namespace ampc::linalg
