// How the executor places inputs on a backend whose memory is not host memory, checked with a
// fake device (host memory that only its own kernels touch): device kernels get device tensors,
// host inputs (shapes, axes) get host tensors, small integer constants are mirrored on the host
// so reading them costs no copy, and Constant nodes run no kernel.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/core/graph_executor.h"
#include "runtime/core/kernel_registry.h"
#include "runtime/session.h"
#include "tests/support/cuda_parity.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"

namespace ampc {
namespace {

class FakeDevice final : public Backend {
 public:
  const std::string& name() const override { return name_; }
  absl::StatusOr<std::shared_ptr<Buffer>> Allocate(size_t bytes) override {
    return std::make_shared<Buffer>(new char[bytes + 1], bytes, this);
  }
  absl::Status CopyFromHost(const void* host, Tensor& tensor) override {
    ++uploads;
    std::memcpy(tensor.raw(), host, tensor.bytes());
    return absl::OkStatus();
  }
  absl::Status CopyToHost(const Tensor& tensor, void* host) override {
    ++downloads;
    std::memcpy(host, tensor.raw(), tensor.bytes());
    return absl::OkStatus();
  }
  absl::Status Synchronize() override { return absl::OkStatus(); }
  MemoryStats memory_stats() const override { return {}; }
  void ResetPeak() override {}

  int uploads = 0, downloads = 0;

 protected:
  void Release(void* data, size_t) override { delete[] static_cast<char*>(data); }

 private:
  const std::string name_ = "fake";
};

bool OnHost(const Tensor& t) { return InHostMemory(t); }

// Neg on the device: refuses host tensors.
absl::Status DeviceNeg(KernelContext& context) {
  const Tensor& x = context.in(0);
  if (OnHost(x)) return NodeError(context, "got a host tensor");
  absl::StatusOr<Tensor*> out = context.Output(0, x.shape());
  if (!out.ok()) return out.status();
  for (int64_t i = 0; i < x.size(); ++i) (*out)->data<float>()[i] = -x.data<float>()[i];
  return absl::OkStatus();
}

// Abs of int64 on the device (a device result that a host input then reads).
absl::Status DeviceAbs(KernelContext& context) {
  const Tensor& x = context.in(0);
  if (OnHost(x)) return NodeError(context, "got a host tensor");
  absl::StatusOr<Tensor*> out = context.Output(0, x.shape());
  if (!out.ok()) return out.status();
  for (int64_t i = 0; i < x.size(); ++i) {
    (*out)->data<int64_t>()[i] = std::abs(x.data<int64_t>()[i]);
  }
  return absl::OkStatus();
}

// Cast int64 -> float on the device (so a Shape result can feed device arithmetic).
absl::Status DeviceCast(KernelContext& context) {
  const Tensor& x = context.in(0);
  if (OnHost(x)) return NodeError(context, "got a host tensor");
  absl::StatusOr<Tensor*> out = context.Output(0, x.shape());
  if (!out.ok()) return out.status();
  for (int64_t i = 0; i < x.size(); ++i) {
    (*out)->data<float>()[i] = static_cast<float>(x.data<int64_t>()[i]);
  }
  return absl::OkStatus();
}

// Reshape reading its shape on the host; the data stays where it is.
absl::Status HostShapeReshape(KernelContext& context) {
  if (OnHost(context.in(0))) return NodeError(context, "data should be on the device");
  if (!OnHost(context.in(1))) return NodeError(context, "shape should be on the host");
  const Tensor& s = context.in(1);
  context.SetOutput(0,
                    context.in(0).Reshaped(Shape(s.data<int64_t>(), s.data<int64_t>() + s.size())));
  return absl::OkStatus();
}

absl::Status HostShape(KernelContext& context) {
  Tensor out = Tensor::Host(DType::kInt64, {context.in(0).rank()});
  for (int d = 0; d < context.in(0).rank(); ++d) out.data<int64_t>()[d] = context.in(0).dim(d);
  context.SetOutput(0, std::move(out));
  return absl::OkStatus();
}

KernelRegistry FakeRegistry() {
  KernelRegistry r;
  r.Register("fake", "", "Neg", {}, DeviceNeg);
  r.Register("fake", "", "Cast", {}, DeviceCast);
  r.Register("fake", "", "Abs", {}, DeviceAbs);
  r.Register("fake", "", "Reshape", {}, HostShapeReshape, {.host = {1}});
  r.Register("fake", "", "Shape", {}, HostShape, {.anywhere = {0}});
  return r;
}

constexpr char kModel[] = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x, int64[2] dynamic) => (float[3, 2] a, float[2] b, float[6] c) {
  shape = Constant <value = int64[2] {3, 2}> ()
  a0 = Reshape(x, shape)
  a = Neg(a0)
  s = Shape(x)
  b = Cast <to = 1> (s)
  flat = Constant <value = int64[1] {6}> ()
  c0 = Reshape(x, flat)
  d = Abs(dynamic)
  c1 = Reshape(c0, d)
  c2 = Reshape(c1, d)
  c = Reshape(c2, flat)
}
)";

TEST(DevicePlacementTest, HostInputsGetHostTensorsAndDeviceKernelsDeviceTensors) {
  FakeDevice device;
  const KernelRegistry registry = FakeRegistry();
  auto session = Session::Create(testing::ParseModelText(kModel), registry, device);
  ASSERT_TRUE(session.ok()) << session.status();
  const int uploads_at_creation = device.uploads;
  EXPECT_EQ(uploads_at_creation, 2);  // the two Constant values, once

  std::vector<Tensor> inputs = {testing::Floats({2, 3}, {1, 2, 3, 4, 5, 6}),
                                testing::Int64s({2}, {2, 3})};
  auto outputs = (*session)->Run(inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  // Uploads, once each however many device kernels read them: x, Shape's host result for the
  // device Cast, `dynamic` for the device Abs. Downloads: Abs's result, which two Reshapes read
  // on the host (the second from the first's copy); the constant shapes come from their host
  // mirrors.
  EXPECT_EQ(device.uploads - uploads_at_creation, 3);
  EXPECT_EQ(device.downloads, 1);
  EXPECT_EQ((*outputs)[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(testing::Values<float>((*outputs)[0]), (std::vector<float>{-1, -2, -3, -4, -5, -6}));
  EXPECT_EQ(testing::Values<float>((*outputs)[1]), (std::vector<float>{2, 3}));
  EXPECT_EQ((*outputs)[2].shape(), (Shape{6}));
  EXPECT_EQ((*outputs)[0].backend(), &device);
}

// Abs of int64 on the host (the CPU kernel of shape arithmetic).
absl::Status HostAbs(KernelContext& context) {
  const Tensor& x = context.in(0);
  if (!OnHost(x) || context.backend().name() != "cpu") return NodeError(context, "not the host");
  absl::StatusOr<Tensor*> out = context.Output(0, x.shape());
  if (!out.ok()) return out.status();
  if (!OnHost(**out)) return NodeError(context, "allocated off the host");
  for (int64_t i = 0; i < x.size(); ++i) {
    (*out)->data<int64_t>()[i] = std::abs(x.data<int64_t>()[i]);
  }
  return absl::OkStatus();
}

// A node with integer outputs whose inputs are all small and on the host (shape arithmetic) runs
// its CPU kernel where there is one: no upload for it, no download for the Reshapes reading it.
TEST(DevicePlacementTest, SmallIntegerArithmeticOnHostValuesStaysOnTheHost) {
  FakeDevice device;
  KernelRegistry registry = FakeRegistry();
  registry.Register("cpu", "", "Abs", {}, HostAbs);
  auto session = Session::Create(testing::ParseModelText(kModel), registry, device);
  ASSERT_TRUE(session.ok()) << session.status();
  const int uploads_at_creation = device.uploads;
  const std::vector<Tensor> inputs = {testing::Floats({2, 3}, {1, 2, 3, 4, 5, 6}),
                                      testing::Int64s({2}, {-2, 3})};
  auto outputs = (*session)->Run(inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_EQ(device.uploads - uploads_at_creation, 2);  // x, and Shape's result for the Cast
  EXPECT_EQ(device.downloads, 0);
  EXPECT_EQ((*outputs)[2].shape(), (Shape{6}));
  EXPECT_EQ(testing::Values<float>((*outputs)[2]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

// Backend's default CopyAllToHost: a download per device tensor, a plain copy of a host one.
TEST(DevicePlacementTest, CopyAllToHostDownloadsOnlyDeviceTensors) {
  FakeDevice device;
  const Tensor host = testing::Floats({2}, {1, 2});
  auto on_device = OnBackend(testing::Floats({3}, {3, 4, 5}), device);
  ASSERT_TRUE(on_device.ok());
  std::vector<float> a(2), b(3);
  const Tensor* tensors[] = {&host, &*on_device};
  void* hosts[] = {a.data(), b.data()};
  ASSERT_TRUE(device.CopyAllToHost(tensors, hosts).ok());
  EXPECT_EQ(a, (std::vector<float>{1, 2}));
  EXPECT_EQ(b, (std::vector<float>{3, 4, 5}));
  EXPECT_EQ(device.downloads, 1);
}

TEST(DevicePlacementTest, ConstantNodeErrorsNameTheNode) {
  FakeDevice device;
  const KernelRegistry registry = FakeRegistry();
  auto session = Session::Create(testing::ParseModelText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) {
  k = Constant <value_string = "no"> ()
  y = Neg(x)
}
)"),
                                 registry, device);
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("Constant"), std::string::npos) << session.status();
  EXPECT_NE(session.status().message().find("value_float"), std::string::npos) << session.status();
}

// The comparison the CUDA parity tests rely on must see a difference where there is one.
TEST(DevicePlacementTest, ParityComparisonFindsDifferences) {
  const Tensor a = testing::Floats({3}, {1, 2, 3});
  EXPECT_EQ(testing::CompareOutputs(a, testing::Floats({3}, {1, 2, 3}), 0), "");
  EXPECT_NE(testing::CompareOutputs(a, testing::Floats({3}, {1, 2, 3.01f}), 1e-3), "");
  EXPECT_EQ(testing::CompareOutputs(a, testing::Floats({3}, {1, 2, 3.0001f}), 1e-3), "");
  EXPECT_NE(testing::CompareOutputs(a, testing::Floats({1, 3}, {1, 2, 3}), 1), "");
  const float nan = std::nanf("");
  EXPECT_NE(
      testing::CompareOutputs(testing::Floats({2}, {1, nan}), testing::Floats({2}, {1, 2}), 1), "");
  EXPECT_NE(testing::CompareOutputs(testing::Int64s({2}, {1, 2}), testing::Int64s({2}, {1, 3}), 1),
            "");
}

}  // namespace
}  // namespace ampc
