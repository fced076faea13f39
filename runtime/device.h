// The devices this build can run on, and a one-line description of the build for --version.
#ifndef AMPC_RUNTIME_DEVICE_H_
#define AMPC_RUNTIME_DEVICE_H_

#include <onnx/onnx_pb.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/graph/status_macros.h"
#include "runtime/core/backend.h"
#include "runtime/core/kernel_registry.h"

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

// The backend `device` names: "cpu" (with `threads` threads, 0 for one per core), "cuda" (GPU 0;
// FailedPrecondition where none is usable or the CUDA backend is not built) or "auto" (CUDA
// when a GPU is usable, else the CPU). InvalidArgument for any other name. `allow_tf32`
// (--tf32): a CUDA backend's FP32 matrix products and convolutions may use TF32 tensor cores;
// nothing changes on the CPU.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const std::string& device, int threads,
                                                       bool allow_tf32 = false);

// With --device=auto a model the CUDA backend cannot run falls back to the CPU: true when a
// failure to create a session on `backend` is such a case.
bool ShouldFallBackToCpu(const std::string& device, const Backend& backend,
                         const absl::Status& failure);

// SessionT::Create (Session or TrainingSession) of `model` on `backend`, which CreateBackend made
// for `device`. With "auto", a model the CUDA backend cannot run (a node without a CUDA kernel)
// is created on a new CPU backend of `threads` threads instead, which replaces `backend`, after
// `note(why)`, with the same limits. The model is copied only where that fallback can happen.
template <typename SessionT, typename Note>
absl::StatusOr<std::unique_ptr<SessionT>> CreateSession(onnx::ModelProto model,
                                                        const KernelRegistry& registry,
                                                        const std::string& device, int threads,
                                                        std::unique_ptr<Backend>& backend,
                                                        Note&& note) {
  if (device != "auto" || backend->name() == "cpu") {
    return SessionT::Create(std::move(model), registry, *backend);
  }
  absl::StatusOr<std::unique_ptr<SessionT>> session = SessionT::Create(model, registry, *backend);
  if (session.ok() || !ShouldFallBackToCpu(device, *backend, session.status())) return session;
  note(session.status().message());
  const RunLimits limits = backend->limits();
  AMPC_ASSIGN_OR_RETURN(backend, CreateBackend("cpu", threads));
  backend->set_limits(limits);
  return SessionT::Create(std::move(model), registry, *backend);
}

}  // namespace ampc

#endif  // AMPC_RUNTIME_DEVICE_H_
