// A hook around each node a GraphExecutor runs (ampc-bench-train --profile): Begin before its
// kernel, End after it (the kernel may still be running on a device; a profiler that times it
// records events on the device's stream).
#pragma once

#include "runtime/core/kernel.h"

namespace ampc {

class NodeProfiler {
 public:
  virtual ~NodeProfiler() = default;
  virtual void Begin(const KernelInfo& node) = 0;
  virtual void End(const KernelInfo& node) = 0;
};

}  // namespace ampc
