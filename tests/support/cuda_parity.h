// CUDA-vs-CPU parity: one model (usually a single node) run on the CPU backend, the reference,
// and on the CUDA backend on the same fresh random inputs; outputs compared. Every CUDA kernel's
// test cases go through here, so each is checked against the CPU kernel of the same op.
#pragma once

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "runtime/core/tensor.h"

namespace ampc::testing {

// This binary has the CUDA backend and a GPU is present.
bool CudaUsable();

// Skips the calling test, counted as skipped, where the CUDA backend cannot run.
#define AMPC_SKIP_WITHOUT_GPU()                                                   \
  if (!::ampc::testing::CudaUsable()) {                                           \
    GTEST_SKIP() << "no usable CUDA GPU here (or the CUDA backend is not built)"; \
  }

// Values drawn uniformly from [low, high) (integers: low, low + 1, ..., high - 1; bool: both).
struct ValueRange {
  double low = -2;
  double high = 2;
};

struct ParityCase {
  // ONNX text of a whole model ("<ir_version: 8, opset_import: [...]> g (...) => (...) {...}");
  // every graph input has a fixed shape.
  std::string model = "";
  std::map<std::string, ValueRange> ranges = {};  // by input name; others use ValueRange{}
  // Floating outputs: relative L2 error ||cuda - cpu|| / ||cpu|| at most this (an absolute one
  // when the CPU output is all zeros), non-finite values in the same places.
  double tolerance = 1e-6;
  uint32_t seed = 1;
  // The CUDA session's inputs are copied to the GPU first (kernels that read an input where it
  // is take their device path); the CPU's stay on the host.
  bool inputs_on_gpu = false;
};

// Fresh random inputs for every graph input of `model`, in declaration order.
std::vector<Tensor> RandomInputs(const onnx::ModelProto& model,
                                 const std::map<std::string, ValueRange>& ranges, uint32_t seed);

// The comparison ExpectCudaMatchesCpu makes, for host tensors (testable without a GPU): empty
// when `actual` matches `expected`, else what differs.
std::string CompareOutputs(const Tensor& expected, const Tensor& actual, double tolerance);

// What can be checked without a GPU: the model parses, runs on the CPU backend, and every node's
// op has a kernel registered for "cuda" (element types are checked only where a GPU runs it).
void ExpectRunsOnCpuWithCudaKernels(const ParityCase& parity);

// Runs the case on both backends (the ai.ampc schemas registered) and EXPECTs the outputs to
// match; the failure message names the output, the error and the worst element.
void ExpectCudaMatchesCpu(const ParityCase& parity);

}  // namespace ampc::testing
