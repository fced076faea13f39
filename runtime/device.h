// The devices this build can run on, and a one-line description of the build for --version.
#ifndef AMPC_RUNTIME_DEVICE_H_
#define AMPC_RUNTIME_DEVICE_H_

#include <string>
#include <vector>

namespace ampc {

struct DeviceInfo {
  std::string kind;  // "cpu" or "cuda"
  int index;
  std::string name;
};

// The CPU first (always present), then every CUDA device when the CUDA backend is built and a
// GPU is present.
std::vector<DeviceInfo> ListDevices();

// "CUDA backend: built for sm_90 (1 GPU: NVIDIA H200)", "... (no GPU found)", or
// "CUDA backend: not built".
std::string DescribeBuild();

}  // namespace ampc

#endif  // AMPC_RUNTIME_DEVICE_H_
