// The CUDA backend itself: memory, copies, the buffer cache, and a model of views and shape
// queries run on it. Skipped, and counted as skipped, where no GPU is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "runtime/session.h"
#include "tests/support/cuda_parity.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"

#ifdef AMPC_HAVE_CUDA
#include "runtime/core/cuda_backend.h"
#endif

namespace ampc {
namespace {

#ifdef AMPC_HAVE_CUDA
TEST(CudaBackendTest, CopiesRoundTripAndFreedBuffersAreReused) {
  AMPC_SKIP_WITHOUT_GPU();
  auto backend = CudaBackend::Create(0);
  ASSERT_TRUE(backend.ok()) << backend.status();
  const Tensor host = testing::Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  {
    auto device = OnBackend(host, **backend);
    ASSERT_TRUE(device.ok()) << device.status();
    EXPECT_EQ(device->backend(), backend->get());
    auto back = ToHost(*device);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(testing::Values<float>(*back), testing::Values<float>(host));
  }
  auto again = (*backend)->NewTensor(DType::kFloat, {3, 2});
  ASSERT_TRUE(again.ok());
  const MemoryStats stats = (*backend)->memory_stats();
  EXPECT_EQ(stats.allocations, 2u);
  EXPECT_EQ(stats.reuses, 1u);
}

// Device tensors of several sizes and a host tensor, in one call (one wait), twice: the staging
// buffer grows for the second, larger set.
TEST(CudaBackendTest, CopyAllToHostCopiesDeviceAndHostTensors) {
  AMPC_SKIP_WITHOUT_GPU();
  auto backend = CudaBackend::Create(0);
  ASSERT_TRUE(backend.ok()) << backend.status();
  for (const int64_t n : {int64_t{3}, int64_t{1000}}) {
    std::vector<float> a(n), b(7);
    for (int64_t i = 0; i < n; ++i) a[i] = static_cast<float>(i) * 0.5f;
    for (int i = 0; i < 7; ++i) b[i] = -static_cast<float>(i);
    const Tensor host_a = testing::Floats({n}, a), host_b = testing::Floats({7}, b);
    auto device_a = OnBackend(host_a, **backend);
    auto device_b = OnBackend(host_b, **backend);
    ASSERT_TRUE(device_a.ok() && device_b.ok());
    std::vector<float> got_a(n), got_b(7), got_host(7);
    const Tensor* tensors[] = {&*device_a, &host_b, &*device_b};
    void* hosts[] = {got_a.data(), got_host.data(), got_b.data()};
    ASSERT_TRUE((*backend)->CopyAllToHost(tensors, hosts).ok());
    EXPECT_EQ(got_a, a);
    EXPECT_EQ(got_host, b);
    EXPECT_EQ(got_b, b);
  }
}

// Large uploads go through the pinned staging ring: more of them than it has buffers, each from
// a host buffer rewritten right after the call returns, and each lands intact.
TEST(CudaBackendTest, StagedUploadsLetTheHostReuseItsBuffer) {
  AMPC_SKIP_WITHOUT_GPU();
  auto backend = CudaBackend::Create(0);
  ASSERT_TRUE(backend.ok()) << backend.status();
  constexpr int64_t kFloats = 1 << 18;  // 1 MiB: staged
  std::vector<float> host(kFloats);
  std::vector<Tensor> uploaded;
  for (int copy = 0; copy < 9; ++copy) {
    for (int64_t i = 0; i < kFloats; ++i) host[i] = static_cast<float>(copy * kFloats + i);
    auto t = (*backend)->NewTensor(DType::kFloat, {kFloats});
    ASSERT_TRUE(t.ok());
    ASSERT_TRUE((*backend)->CopyFromHost(host.data(), *t).ok());
    std::fill(host.begin(), host.end(), -1.0f);  // the copy must not read this
    uploaded.push_back(*std::move(t));
  }
  for (int copy = 0; copy < 9; ++copy) {
    auto back = ToHost(uploaded[copy]);
    ASSERT_TRUE(back.ok());
    const std::vector<float> values = testing::Values<float>(*back);
    EXPECT_EQ(values.front(), static_cast<float>(copy * kFloats)) << copy;
    EXPECT_EQ(values.back(), static_cast<float>(copy * kFloats + kFloats - 1)) << copy;
  }
}

TEST(CudaBackendTest, NoSuchDeviceIsAClearError) {
  auto backend = CudaBackend::Create(1000);
  ASSERT_FALSE(backend.ok());
  EXPECT_NE(backend.status().message().find("no CUDA device 1000"), std::string::npos)
      << backend.status();
}

TEST(CudaBackendTest, ViewsAndShapeQueriesRunOnTheDevice) {
  AMPC_SKIP_WITHOUT_GPU();
  testing::ExpectCudaMatchesCpu({R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3, 4] x) => (float[6, 4] a, float[1, 24] b, int64[3] s, int64 n, float[2, 1, 3, 4] c) {
  shape = Constant <value = int64[2] {6, -1}> ()
  a = Reshape(x, shape)
  b = Flatten <axis = 0> (x)
  s = Shape(x)
  n = Size(x)
  axes = Constant <value = int64[1] {1}> ()
  c = Unsqueeze(x, axes)
}
)"});
}
#else
TEST(CudaBackendTest, NotBuilt) { GTEST_SKIP() << "the CUDA backend is not built"; }
#endif

}  // namespace
}  // namespace ampc
