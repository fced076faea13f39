// cuBLASLt and cuDNN are loaded when first needed (dlopen), not when ampc starts: linked, they
// cost every start 0.1 s and 200 MB (`ampc --version` included), keep ampc from starting on a
// machine without them, and make the loader fail under a tight `ulimit -v`. The functions ampc
// calls are defined in cuda_libraries.cc and forward to the loaded library.
#ifndef AMPC_KERNELS_CUDA_CUDA_LIBRARIES_H_
#define AMPC_KERNELS_CUDA_CUDA_LIBRARIES_H_

#include <string>

namespace ampc::cuda {

// Loads the library once; on failure `error` says which file could not be loaded and why.
// Calls into a library that failed to load return its "not initialized" status.
bool LoadCublasLt(std::string* error);
bool LoadCudnn(std::string* error);

}  // namespace ampc::cuda

#endif  // AMPC_KERNELS_CUDA_CUDA_LIBRARIES_H_
