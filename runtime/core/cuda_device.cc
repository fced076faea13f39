#include "runtime/core/cuda_device.h"

#include <cuda_runtime.h>

namespace ampc {

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: clear the error so later calls do not see it
    return 0;
  }
  return count;
}

std::string CudaDeviceName(int index) {
  cudaDeviceProp properties;
  if (cudaGetDeviceProperties(&properties, index) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return properties.name;
}

}  // namespace ampc
