// How the CUDA CNN kernels read a node, checked on the host (no GPU needed): the windows the
// pooling kernels work out per output (pool.h's TapsOf) against the CPU kernels' plan
// (pool_plan.h), and the cuDNN plan of a Conv (symmetric padding, explicit padding, 1-D as 2-D)
// against ONNX's definition, by a naive convolution on each side.
#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/conv_geometry.h"
#include "kernels/cpu/pool_plan.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/core/kernel.h"
#include "tests/support/cuda_parity.h"
#include "tests/support/model_text.h"

#ifdef AMPC_HAVE_CUDA
#include "kernels/cuda/cudnn_conv.h"
#include "kernels/cuda/pool_geometry.h"
#endif

namespace ampc {
namespace {

#ifdef AMPC_HAVE_CUDA

constexpr char kHeader[] = R"(<ir_version: 8, opset_import: ["" : 17]>)";

// A KernelContext for the first node of `graph` (ONNX text) over host inputs of its graph inputs'
// shapes, as a kernel sees it at run time.
class NodeContext {
 public:
  explicit NodeContext(const std::string& graph)
      : model_(testing::ParseModelText(std::string(kHeader) + "\n" + graph)),
        inputs_(testing::RandomInputs(model_, {}, 1)) {
    std::vector<DType> types;
    for (Tensor& t : inputs_) {
      pointers_.push_back(&t);
      types.push_back(t.dtype());
    }
    info_ = std::make_unique<KernelInfo>(
        KernelInfo{model_.graph().node(0), 17, types, {DType::kFloat}, backend_, {}, {}});
    context_ = std::make_unique<KernelContext>(*info_, pointers_, std::span<Tensor* const>(),
                                               std::span<Tensor>());
  }

  KernelContext& context() { return *context_; }
  const Tensor& input(int i) const { return inputs_[i]; }

 private:
  onnx::ModelProto model_;
  CpuBackend backend_{1};
  std::vector<Tensor> inputs_;
  std::vector<Tensor*> pointers_;
  std::unique_ptr<KernelInfo> info_;
  std::unique_ptr<KernelContext> context_;
};

// Every output coordinate's window along every axis, as the GPU works it out, equals the CPU's.
void ExpectGpuWindowsMatchThePlan(const std::string& graph, pool::PoolOptions options) {
  SCOPED_TRACE(graph);
  NodeContext node(graph);
  auto plan = pool::MakePlan(node.context(), node.input(0), options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto g = cuda::PoolGeometryOf(*plan);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->planes, plan->planes);
  EXPECT_EQ(cuda::InPlaneSize(*g), plan->in_size);
  EXPECT_EQ(cuda::OutPlaneSize(*g), plan->out_size);
  const int dims = static_cast<int>(plan->in.size());
  const int lead = cuda::kMaxPoolDims - dims;
  for (int a = 0; a < lead; ++a) {
    const cuda::AxisTaps taps = cuda::TapsOf(*g, a, 0);
    EXPECT_EQ(taps.first, 0);
    EXPECT_EQ(taps.count, 1);
    EXPECT_EQ(taps.padded, 1);
  }
  for (int d = 0; d < dims; ++d) {
    for (int64_t o = 0; o < plan->out[d]; ++o) {
      const cuda::AxisTaps taps = cuda::TapsOf(*g, lead + d, o);
      const pool::AxisWindow& want = plan->axes[d][o];
      EXPECT_EQ(taps.first, want.first) << "axis " << d << ", output " << o;
      EXPECT_EQ(taps.count, want.count) << "axis " << d << ", output " << o;
      EXPECT_EQ(taps.padded, want.padded) << "axis " << d << ", output " << o;
    }
  }
}

TEST(CudaPoolPlanTest, WindowsMatchTheCpuPlan) {
  const pool::PoolOptions max_pool{true, true}, average_pool{false, true};
  ExpectGpuWindowsMatchThePlan(R"(g (float[2, 3, 8, 6] x) => (float[] y) {
  y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (x)
})",
                               max_pool);
  ExpectGpuWindowsMatchThePlan(R"(g (float[1, 2, 7, 6] x) => (float[] y) {
  y = MaxPool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]> (x)
})",
                               max_pool);
  ExpectGpuWindowsMatchThePlan(R"(g (float[1, 2, 7, 7] x) => (float[] y) {
  y = AveragePool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], ceil_mode = 1> (x)
})",
                               average_pool);
  ExpectGpuWindowsMatchThePlan(R"(g (float[1, 2, 9, 8] x) => (float[] y) {
  y = MaxPool <kernel_shape = [2, 3], dilations = [2, 2], pads = [1, 2, 0, 1], ceil_mode = 1> (x)
})",
                               max_pool);
  for (const char* auto_pad : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
    ExpectGpuWindowsMatchThePlan(std::string(R"(g (float[1, 2, 8, 7] x) => (float[] y) {
  y = AveragePool <kernel_shape = [3, 2], strides = [2, 3], auto_pad = ")") +
                                     auto_pad + R"("> (x)
})",
                                 average_pool);
  }
  ExpectGpuWindowsMatchThePlan(R"(g (float[2, 3, 10] x) => (float[] y) {
  y = MaxPool <kernel_shape = [3], strides = [2], pads = [2, 1]> (x)
})",
                               max_pool);
  ExpectGpuWindowsMatchThePlan(R"(g (float[1, 2, 4, 5, 6] x) => (float[] y) {
  y = AveragePool <kernel_shape = [2, 3, 3], strides = [1, 2, 2], pads = [0, 1, 1, 1, 1, 0]> (x)
})",
                               average_pool);
}

TEST(CudaPoolPlanTest, MoreThanThreeSpatialDimsAreUnimplemented) {
  NodeContext node(R"(g (float[1, 1, 2, 2, 2, 2] x) => (float[] y) {
  y = MaxPool <kernel_shape = [1, 1, 1, 1]> (x)
})");
  auto plan = pool::MakePlan(node.context(), node.input(0), {true, true});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(cuda::PoolGeometryOf(*plan).status().code(), absl::StatusCode::kUnimplemented);
}

TEST(CudaPoolPlanTest, ColumnMajorOffsetsPutTheFirstSpatialAxisFastest) {
  cuda::PoolGeometry g;
  g.in[1] = 2;  // a 2 x 3 plane
  g.in[2] = 3;
  for (int64_t row = 0; row < 2; ++row) {
    for (int64_t col = 0; col < 3; ++col) {
      EXPECT_EQ(cuda::ColumnMajorOffset(g, row * 3 + col), row + 2 * col);
    }
  }
}

// Y of a one-channel 2-D convolution: tap (ky, kx) of output (oy, ox) reads input
// (oy * stride - pad + ky * dilation, ...), zero outside the input. ONNX's definition with its
// begin pads, cuDNN's with the plan's (symmetric) pads.
std::vector<double> Conv2D(const std::vector<double>& x, int64_t h, int64_t w,
                           const std::vector<double>& k, int64_t kh, int64_t kw, int64_t oh,
                           int64_t ow, const int64_t stride[2], const int64_t pad[2],
                           const int64_t dilation[2]) {
  std::vector<double> y;
  for (int64_t oy = 0; oy < oh; ++oy) {
    for (int64_t ox = 0; ox < ow; ++ox) {
      double sum = 0;
      for (int64_t ky = 0; ky < kh; ++ky) {
        for (int64_t kx = 0; kx < kw; ++kx) {
          const int64_t iy = oy * stride[0] - pad[0] + ky * dilation[0];
          const int64_t ix = ox * stride[1] - pad[1] + kx * dilation[1];
          if (iy >= 0 && iy < h && ix >= 0 && ix < w) sum += x[iy * w + ix] * k[ky * kw + kx];
        }
      }
      y.push_back(sum);
    }
  }
  return y;
}

// Plans the graph's one-channel 2-D Conv, checks the plan's dims, runs the plan (the explicit
// padding copy, then cuDNN's symmetric convolution) and ONNX's convolution on distinct values,
// and expects the same Y; returns whether the plan pads explicitly.
bool PlanComputesOnnxConv(const std::string& graph) {
  SCOPED_TRACE(graph);
  NodeContext node(graph);
  auto g = linalg::ConvShape(node.context());
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return false;
  const Shape& xs = node.input(0).shape();
  const Shape& ws = node.input(1).shape();
  auto plan = cuda::PlanCudnnConv(xs, ws, *g, cuda::ElemType::kFloat);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return false;
  const cuda::CudnnConvShape& s = plan->cudnn;
  EXPECT_EQ(s.spatial, 2);
  EXPECT_EQ(s.y[0], xs[0]);
  EXPECT_EQ(s.y[1], ws[0]);
  EXPECT_EQ(s.y[2], g->output[0]);
  EXPECT_EQ(s.y[3], g->output[1]);
  std::vector<double> x(static_cast<size_t>(xs[2] * xs[3])), k(static_cast<size_t>(ws[2] * ws[3]));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i + 1);
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<double>(3 * i + 1);
  const std::vector<double> want =
      Conv2D(x, xs[2], xs[3], k, ws[2], ws[3], g->output[0], g->output[1], g->strides.data(),
             g->pad_begin.data(), g->dilations.data());
  std::vector<double> input = x;
  if (plan->explicit_pad) {  // ShiftCopy on the host: padded[p] = x[p - shift] inside x, else 0
    input.clear();
    for (int64_t py = 0; py < plan->padded_dims[1]; ++py) {
      for (int64_t px = 0; px < plan->padded_dims[2]; ++px) {
        const int64_t sy = py - plan->shift[1], sx = px - plan->shift[2];
        const bool inside = sy >= 0 && sy < plan->x_dims[1] && sx >= 0 && sx < plan->x_dims[2];
        input.push_back(inside ? x[sy * plan->x_dims[2] + sx] : 0);
      }
    }
  }
  const int64_t stride[2] = {s.strides[0], s.strides[1]}, pad[2] = {s.pads[0], s.pads[1]};
  const int64_t dilation[2] = {s.dilations[0], s.dilations[1]};
  EXPECT_EQ(Conv2D(input, s.x[2], s.x[3], k, s.w[2], s.w[3], s.y[2], s.y[3], stride, pad, dilation),
            want);
  return plan->explicit_pad;
}

std::string OneChannelConv(const std::string& x, const std::string& w,
                           const std::string& attributes) {
  return "g (float[1, 1, " + x + "] x, float[1, 1, " + w + "] w) => (float[] y) {\n  y = Conv <" +
         attributes + "> (x, w)\n}";
}

TEST(CudnnConvPlanTest, SymmetricPadsGoToCudnnAsTheyAre) {
  EXPECT_FALSE(PlanComputesOnnxConv(OneChannelConv("7, 6", "3, 3", "pads = [1, 1, 1, 1]")));
  // No pads, stride 2: the last row and column are read by no window, on both sides alike.
  EXPECT_FALSE(PlanComputesOnnxConv(OneChannelConv("8, 8", "3, 3", "strides = [2, 2]")));
  // SAME_LOWER over 8 with k 3, stride 2 pads 1 and 0, but no window reaches the end padding.
  EXPECT_FALSE(PlanComputesOnnxConv(
      OneChannelConv("8, 8", "3, 3", "auto_pad = \"SAME_LOWER\", strides = [2, 2]")));
}

TEST(CudnnConvPlanTest, PadsCudnnCannotGiveArePaddedExplicitly) {
  EXPECT_TRUE(PlanComputesOnnxConv(
      OneChannelConv("8, 8", "3, 3", "auto_pad = \"SAME_UPPER\", strides = [2, 2]")));
  EXPECT_TRUE(PlanComputesOnnxConv(OneChannelConv("7, 5", "3, 2", "pads = [0, 1, 2, 0]")));
  EXPECT_TRUE(PlanComputesOnnxConv(
      OneChannelConv("9, 6", "3, 2", "dilations = [2, 1], pads = [2, 0, 1, 0]")));
  EXPECT_TRUE(PlanComputesOnnxConv(OneChannelConv("5, 4", "3, 3", "pads = [3, 0, 0, 0]")));
  EXPECT_TRUE(PlanComputesOnnxConv(
      OneChannelConv("9, 7", "2, 3", "strides = [3, 2], pads = [0, 2, 1, 0]")));
}

TEST(CudnnConvPlanTest, OneDimensionalConvolutionsBecomeTwoDimensionalOnes) {
  NodeContext node(R"(g (float[2, 3, 11] x, float[4, 3, 3] w) => (float[] y) {
  y = Conv <strides = [2], pads = [1, 1], dilations = [2]> (x, w)
})");
  auto g = linalg::ConvShape(node.context());
  ASSERT_TRUE(g.ok()) << g.status();
  auto plan = cuda::PlanCudnnConv(node.input(0).shape(), node.input(1).shape(), *g,
                                  cuda::ElemType::kFloat16);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const cuda::CudnnConvShape& s = plan->cudnn;
  EXPECT_FALSE(plan->explicit_pad);
  EXPECT_EQ(s.type, cuda::ElemType::kFloat16);
  EXPECT_EQ(s.spatial, 2);
  EXPECT_EQ(s.x, (std::array<int, 5>{2, 3, 1, 11, 0}));
  EXPECT_EQ(s.w, (std::array<int, 5>{4, 3, 1, 3, 0}));
  EXPECT_EQ(s.y, (std::array<int, 5>{2, 4, 1, 5, 0}));  // (11 + 2 - 5) / 2 + 1
  EXPECT_EQ(s.pads, (std::array<int, 3>{0, 1, 0}));
  EXPECT_EQ(s.strides, (std::array<int, 3>{1, 2, 0}));
  EXPECT_EQ(s.dilations, (std::array<int, 3>{1, 2, 0}));
}

linalg::ConvGeometry Geometry(int rank, int64_t size) {
  linalg::ConvGeometry g;
  g.rank = rank;
  g.input = g.output = Shape(rank, size);
  g.kernel = g.strides = g.dilations = Shape(rank, 1);
  g.pad_begin = Shape(rank, 0);
  return g;
}

TEST(CudnnConvPlanTest, WhatCudnnCannotIndexIsAClearError) {
  const linalg::ConvGeometry big = Geometry(2, 70000);  // 4.9e9 elements per channel
  auto plan = cuda::PlanCudnnConv({1, 1, 70000, 70000}, {1, 1, 1, 1}, big, cuda::ElemType::kFloat);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  const linalg::ConvGeometry four = Geometry(4, 2);
  plan = cuda::PlanCudnnConv({1, 1, 2, 2, 2, 2}, {1, 1, 1, 1, 1, 1}, four, cuda::ElemType::kFloat);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kUnimplemented);
}

#else
TEST(CudaConvPlanTest, NotBuilt) { GTEST_SKIP() << "the CUDA backend is not built"; }
#endif

}  // namespace
}  // namespace ampc
