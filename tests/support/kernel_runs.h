// Running kernels in tests: one node straight through the registry (RunOp), or a whole model
// text through a Session (KernelTest::Run), on the CPU backend.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_kernels.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/core/kernel_registry.h"
#include "runtime/session.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"

namespace ampc::testing {

struct OpResult {
  absl::Status status;
  std::vector<Tensor> outputs;
  const Tensor& out(int i = 0) const { return outputs[i]; }
  std::vector<float> floats() const { return Values<float>(outputs[0]); }
};

inline CpuBackend& TestBackend() {
  static CpuBackend* backend = new CpuBackend(2);
  return *backend;
}

// Runs the single node written in ONNX text (e.g. "y = Gather <axis = 1> (x, i)") at `opset`,
// without a Session: the kernel's own errors come back unwrapped. An empty Tensor is an omitted
// optional input.
inline OpResult RunOp(const std::string& node_text, std::vector<Tensor> inputs, int opset = 17) {
  auto model = std::make_shared<onnx::ModelProto>(
      ParseModelText(absl::StrCat("<ir_version: 10, opset_import: [\"\" : ", opset,
                                  "]>\ng () => () {\n  ", node_text, "\n}\n")));
  const onnx::NodeProto& node = model->graph().node(0);
  std::vector<DType> input_types;
  std::vector<Tensor*> input_ptrs;
  for (Tensor& t : inputs) {
    input_types.push_back(t.empty() ? DType::kUndefined : t.dtype());
    input_ptrs.push_back(t.empty() ? nullptr : &t);
  }
  KernelInfo info{
      node,          opset, input_types, std::vector<DType>(node.output_size(), DType::kUndefined),
      TestBackend(), {},    nullptr};
  OpResult result;
  auto kernel = DefaultRegistry().Create(info);
  if (!kernel.ok()) {
    result.status = kernel.status();
    return result;
  }
  result.outputs.resize(node.output_size());
  KernelContext context(info, input_ptrs, {}, result.outputs);
  result.status = (*kernel)->Compute(context);
  return result;
}

// Builds a Session for a model text, runs it once on `inputs` and returns the outputs.
inline absl::StatusOr<std::vector<Tensor>> RunModel(const std::string& text,
                                                    std::vector<Tensor> inputs) {
  auto session = Session::Create(ParseModelText(text), DefaultRegistry(), TestBackend());
  if (!session.ok()) return session.status();
  return (*session)->Run(inputs);
}

// A fixture whose Run builds a Session for a model text and runs it once; the session lives
// until the next Run.
class KernelTest : public ::testing::Test {
 protected:
  absl::StatusOr<std::vector<Tensor>> Run(const std::string& text, std::vector<Tensor> inputs) {
    auto session = Session::Create(ParseModelText(text), DefaultRegistry(), backend_);
    if (!session.ok()) return session.status();
    session_ = *std::move(session);
    return session_->Run(inputs);
  }
  CpuBackend backend_{2};
  std::unique_ptr<Session> session_;
};

}  // namespace ampc::testing
