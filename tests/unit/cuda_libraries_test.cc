// cuBLASLt and cuDNN load on first use (kernels/cuda/cuda_libraries.h). Their host-only functions
// run without a GPU, so the forwarding is checked on every machine that has the libraries (the
// development and CI image does: the CUDA toolkit with cuDNN 9).
#include <gtest/gtest.h>

#include <string>

#ifdef AMPC_HAVE_CUDA
#include <cublasLt.h>
#include <cudnn.h>
#include <dlfcn.h>

#include "kernels/cuda/cuda_libraries.h"
#endif

namespace ampc {
namespace {

#ifdef AMPC_HAVE_CUDA
TEST(CudaLibrariesTest, NotLoadedUntilFirstUseThenForwarded) {
  // Nothing has called into them yet in this process: neither is mapped.
  EXPECT_EQ(dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_NOLOAD), nullptr);
  EXPECT_EQ(dlopen("libcudnn.so.9", RTLD_NOW | RTLD_NOLOAD), nullptr);
  std::string why;
  ASSERT_TRUE(cuda::LoadCublasLt(&why)) << why;
  ASSERT_TRUE(cuda::LoadCudnn(&why)) << why;
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
  EXPECT_STREQ(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "CUDNN_STATUS_BAD_PARAM");
}
#else
TEST(CudaLibrariesTest, NotBuilt) { GTEST_SKIP() << "the CUDA backend is not built"; }
#endif

}  // namespace
}  // namespace ampc
