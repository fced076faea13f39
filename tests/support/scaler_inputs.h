// Inputs and sessions for the tests of the ai.ampc loss-scaling ops: models in ONNX text with
// the ai.ampc import, and gradients of each float type with elements to overwrite.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "passes/opset/training_ops.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/session.h"
#include "tests/support/model_text.h"
#include "tests/support/tensors.h"

namespace ampc::testing {

inline constexpr float kInf = std::numeric_limits<float>::infinity();
inline constexpr char kAmpcHeader[] = R"(<ir_version: 8, opset_import: ["" : 17, "ai.ampc" : 1]>)";

inline Tensor Bool(bool value) { return Make(DType::kBool, {}, std::vector<bool>{value}); }

// A session of the graph `text` (ONNX text after the model header), with the ai.ampc schemas.
inline std::unique_ptr<Session> LoadAmpcModel(const std::string& text) {
  static CpuBackend* backend = new CpuBackend(2);
  RegisterAmpcSchemas();
  auto session = Session::Create(ParseModelText(kAmpcHeader + text), DefaultRegistry(), *backend);
  EXPECT_TRUE(session.ok()) << session.status();
  return session.ok() ? *std::move(session) : nullptr;
}

inline std::vector<Tensor> Step(const Session& session, const std::vector<Tensor>& inputs) {
  auto outputs = session.Run(inputs);
  EXPECT_TRUE(outputs.ok()) << outputs.status();
  return outputs.ok() ? *outputs : std::vector<Tensor>(session.outputs().size());
}

inline void SetElement(Tensor& t, int64_t i, float value) {
  if (t.dtype() == DType::kFloat16) t.data<Half>()[i] = Half{FloatToHalf(value)};
  if (t.dtype() == DType::kBFloat16) t.data<BFloat16>()[i] = BFloat16{FloatToBFloat16(value)};
  if (t.dtype() == DType::kFloat) t.data<float>()[i] = value;
}

// n pseudo-random values in [-2, 2) of `dtype` (a fixed LCG).
inline Tensor Gradient(DType dtype, int64_t n, uint32_t seed) {
  Tensor t = Tensor::Host(dtype, {n});
  for (int64_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    SetElement(t, i, -2.0f + 4.0f * static_cast<float>(seed >> 8) / static_cast<float>(1u << 24));
  }
  return t;
}

}  // namespace ampc::testing
