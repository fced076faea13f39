// cuBLASLt and cuDNN load on first use (kernels/cuda/cuda_libraries.h). Their host-only functions
// run without a GPU, so the forwarding is checked on every machine that has the libraries (the
// development and CI image does: the CUDA toolkit with cuDNN 9).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
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
bool Mapped(const char* library) { return dlopen(library, RTLD_NOW | RTLD_NOLOAD) != nullptr; }

// A claim about a fresh process: the "threadsafe" style runs the statement in a new execution of
// this binary (other tests in this one may have loaded the libraries already).
TEST(CudaLibrariesTest, AFreshProcessMapsThemOnlyAtFirstUse) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const bool before = Mapped("libcublasLt.so.13") || Mapped("libcudnn.so.9");
        std::string why;
        const bool loaded = cuda::LoadCublasLt(&why) && cuda::LoadCudnn(&why);
        const bool after = Mapped("libcublasLt.so.13") && Mapped("libcudnn.so.9");
        std::fprintf(stderr, "mapped before: %d, loaded: %d (%s), mapped after: %d\n", before,
                     loaded, why.c_str(), after);
        std::exit(!before && loaded && after ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

TEST(CudaLibrariesTest, CallsAreForwarded) {
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
