#include "runtime/device.h"

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "runtime/core/cpu_backend.h"

#ifdef AMPC_HAVE_CUDA
#include "runtime/core/cuda_backend.h"
#include "runtime/core/cuda_device.h"
#endif

namespace ampc {
namespace {

std::string CpuName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (!absl::StartsWith(line, "model name")) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      return std::string(absl::StripAsciiWhitespace(absl::string_view(line).substr(colon + 1)));
    }
  }
  return "host CPU";
}

#ifdef AMPC_HAVE_CUDA
// CMake's CUDA_ARCHITECTURES entries as nvcc names them: "90" and "90-real" -> sm_90,
// "90a" -> sm_90a, "90-virtual" -> compute_90; "native" or "all" stay as they are.
std::string ArchName(absl::string_view arch) {
  if (arch.empty() || arch[0] < '0' || arch[0] > '9') return std::string(arch);
  if (absl::ConsumeSuffix(&arch, "-virtual")) return absl::StrCat("compute_", arch);
  absl::ConsumeSuffix(&arch, "-real");
  return absl::StrCat("sm_", arch);
}

std::string ArchList() {
  std::vector<std::string> names;
  for (absl::string_view arch : absl::StrSplit(AMPC_CUDA_ARCHS, ' ', absl::SkipEmpty())) {
    names.push_back(ArchName(arch));
  }
  return absl::StrJoin(names, ", ");
}

std::string GpuSummary() {
  std::vector<std::string> names;
  const int count = CudaDeviceCount();
  for (int i = 0; i < count; ++i) names.push_back(CudaDeviceName(i));
  if (names.empty()) return "no GPU found";
  return absl::StrCat(names.size(),
                      names.size() == 1 ? " GPU: " : " GPUs: ", absl::StrJoin(names, ", "));
}
#endif

}  // namespace

std::vector<DeviceInfo> ListDevices() {
  std::vector<DeviceInfo> devices = {{"cpu", 0, CpuName()}};
#ifdef AMPC_HAVE_CUDA
  const int count = CudaDeviceCount();
  for (int i = 0; i < count; ++i) devices.push_back({"cuda", i, CudaDeviceName(i)});
#endif
  return devices;
}

std::string DescribeBuild() {
#ifdef AMPC_HAVE_CUDA
  return absl::StrCat("CUDA backend: built for ", ArchList(), " (", GpuSummary(), ")");
#else
  return "CUDA backend: not built";
#endif
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const std::string& device, int threads,
                                                       bool allow_tf32) {
  if (device != "cpu" && device != "cuda" && device != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("--device=", device, ": expected cpu, cuda or auto"));
  }
#ifdef AMPC_HAVE_CUDA
  if (device == "cuda" || (device == "auto" && CudaDeviceCount() > 0)) {
    absl::StatusOr<std::unique_ptr<CudaBackend>> cuda = CudaBackend::Create(0);
    if (cuda.ok()) {
      (*cuda)->set_allow_tf32(allow_tf32);
      return std::unique_ptr<Backend>(*std::move(cuda));
    }
    if (device == "cuda") {
      return absl::FailedPreconditionError(
          absl::StrCat("--device=cuda: ", cuda.status().message()));
    }
  }
#else
  (void)allow_tf32;
  if (device == "cuda") {
    return absl::FailedPreconditionError(
        "--device=cuda: this ampc was built without the CUDA backend (no nvcc at build time)");
  }
#endif
  return std::unique_ptr<Backend>(new CpuBackend(threads));
}

bool ShouldFallBackToCpu(const std::string& device, const Backend& backend,
                         const absl::Status& failure) {
  return device == "auto" && backend.name() != "cpu" &&
         failure.code() == absl::StatusCode::kUnimplemented;
}

}  // namespace ampc
