// CUDA device discovery. Plain C++: callers need no CUDA headers.
#ifndef AMPC_RUNTIME_CORE_CUDA_DEVICE_H_
#define AMPC_RUNTIME_CORE_CUDA_DEVICE_H_

#include <string>

namespace ampc {

// The number of usable CUDA devices; 0, never an error, when there is no driver or no GPU.
int CudaDeviceCount();

// The device's marketing name ("NVIDIA H200"); empty when `index` is not a usable device.
std::string CudaDeviceName(int index);

}  // namespace ampc

#endif  // AMPC_RUNTIME_CORE_CUDA_DEVICE_H_
