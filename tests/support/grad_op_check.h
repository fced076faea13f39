// Checks of the ai.ampc gradient kernels: models in ONNX text run on the CPU runtime, inputs as
// plain values of any element type, and central finite differences of a forward model.
// Header-only; "$T" in a model's text stands for the element type.
#pragma once

#include <gtest/gtest.h>
#include <onnx/defs/function.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "kernels/cpu/cpu_kernels.h"
#include "passes/opset/gradient_ops.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/core/dtype.h"
#include "runtime/session.h"
#include "tests/support/model_text.h"

namespace ampc::testing {

// A tensor's values as doubles (float types widened exactly, int64 converted).
struct Value {
  DType dtype;
  Shape shape;
  std::vector<double> values;
};

inline Tensor ToTensor(const Value& v) {
  Tensor t = Tensor::Host(v.dtype, v.shape);
  EXPECT_EQ(static_cast<int64_t>(v.values.size()), t.size()) << "values do not fill the shape";
  if (v.dtype == DType::kInt64) {
    for (int64_t i = 0; i < t.size(); ++i) t.data<int64_t>()[i] = static_cast<int64_t>(v.values[i]);
    return t;
  }
  Dispatch<AMPC_FLOAT_TYPES>(v.dtype, [&]<typename T>() {
    using C = typename Compute<T>::type;
    for (int64_t i = 0; i < t.size(); ++i) {
      t.data<T>()[i] = Compute<T>::Store(static_cast<C>(v.values[i]));
    }
  });
  return t;
}

inline std::vector<double> ToDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.size()));
  if (t.dtype() == DType::kInt64) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(t.data<int64_t>()[i]);
  }
  Dispatch<AMPC_FLOAT_TYPES>(t.dtype(), [&]<typename T>() {
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<double>(Compute<T>::Load(t.data<T>()[i]));
  });
  return v;
}

// The value as another float type: each element rounded once to it.
inline Value As(const Value& v, DType dtype) {
  if (v.dtype == DType::kInt64) return v;
  return {dtype, v.shape, ToDoubles(ToTensor({dtype, v.shape, v.values}))};
}

// Deterministic pseudo-random values in [lo, hi) (a fixed LCG: tests need no seed plumbing).
inline Value Pseudo(DType dtype, Shape shape, double lo, double hi, uint32_t seed) {
  std::vector<double> v(static_cast<size_t>(ElementCount(shape)));
  for (double& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = lo + (hi - lo) * static_cast<double>(seed >> 8) / static_cast<double>(1u << 24);
  }
  return As({DType::kDouble, std::move(shape), v}, dtype);
}

inline std::string TypeName(DType dtype) {
  return dtype == DType::kFloat      ? "float"
         : dtype == DType::kFloat16  ? "float16"
         : dtype == DType::kBFloat16 ? "bfloat16"
                                     : "double";
}

// The model of `body` (a graph in ONNX text, with $T) for element type `dtype`.
inline onnx::ModelProto ModelOf(const std::string& body, DType dtype) {
  // A scalar is declared `T x`: libonnx 1.12 parses `T[] x` as a type without a shape.
  return ParseModelText(absl::StrReplaceAll(
      absl::StrCat(R"(<ir_version: 8, opset_import: ["" : 17, "ai.ampc" : 1]>)", "\n", body),
      {{"$T", TypeName(dtype)}, {"[] ", " "}}));
}

// A session over a model on the CPU runtime.
class Model {
 public:
  Model(const std::string& body, DType dtype) : Model(ModelOf(body, dtype)) {}
  explicit Model(const onnx::ModelProto& model) {
    static CpuBackend* backend = new CpuBackend(2);
    RegisterGradientOpSchemas();  // the runtime infers the ai.ampc nodes' output types
    auto session = Session::Create(model, DefaultRegistry(), *backend);
    EXPECT_TRUE(session.ok()) << session.status() << "\n" << model.DebugString();
    if (session.ok()) session_ = *std::move(session);
  }

  std::vector<Tensor> Run(const std::vector<Value>& inputs) const {
    if (session_ == nullptr) return {};
    std::vector<Tensor> tensors;
    for (const Value& v : inputs) tensors.push_back(ToTensor(v));
    auto outputs = session_->Run(tensors);
    EXPECT_TRUE(outputs.ok()) << outputs.status();
    return outputs.ok() ? *std::move(outputs) : std::vector<Tensor>();
  }

  // Output i as doubles (empty when the run failed).
  std::vector<double> Output(const std::vector<Value>& inputs, size_t i) const {
    std::vector<Tensor> outputs = Run(inputs);
    return i < outputs.size() ? ToDoubles(outputs[i]) : std::vector<double>();
  }

 private:
  std::unique_ptr<Session> session_;
};

// d/d(inputs[wrt]) of sum(forward's output `output` * r), by central differences with step h.
inline std::vector<double> NumericGradient(const Model& forward, std::vector<Value> inputs,
                                           size_t wrt, size_t output, const std::vector<double>& r,
                                           double h) {
  const auto objective = [&] {
    const std::vector<double> y = forward.Output(inputs, output);
    EXPECT_EQ(y.size(), r.size()) << "r does not match the forward output";
    double sum = 0;
    for (size_t i = 0; i < y.size() && i < r.size(); ++i) sum += y[i] * r[i];
    return sum;
  };
  std::vector<double> gradient(inputs[wrt].values.size());
  for (size_t i = 0; i < gradient.size(); ++i) {
    const double x = inputs[wrt].values[i];
    inputs[wrt].values[i] = x + h;
    const double plus = objective();
    inputs[wrt].values[i] = x - h;
    const double minus = objective();
    inputs[wrt].values[i] = x;
    gradient[i] = (plus - minus) / (2 * h);
  }
  return gradient;
}

// |actual - expected| <= atol + rtol * |expected| elementwise.
inline void ExpectClose(const std::vector<double>& actual, const std::vector<double>& expected,
                        double atol, double rtol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < actual.size() && reported < 5; ++i) {
    if (!(std::abs(actual[i] - expected[i]) <= atol + rtol * std::abs(expected[i]))) {
      ADD_FAILURE() << what << " [" << i << "]: " << actual[i] << " vs expected " << expected[i];
      ++reported;
    }
  }
}

inline std::vector<Value> AsAll(std::vector<Value> values, DType dtype) {
  for (Value& v : values) v = As(v, dtype);
  return values;
}

// The grad op's FunctionProto body, expanded in place of the op's node, computes (in FP64) what
// the kernel computed: `expected`. Every grad op has a body.
inline void CheckFunctionBody(const std::string& grad, const std::vector<Value>& inputs,
                              const std::vector<Tensor>& expected) {
  RegisterGradientOpSchemas();  // FunctionExpandHelper reads the op's schema
  onnx::ModelProto model = ModelOf(grad, DType::kDouble);
  ASSERT_EQ(model.graph().node_size(), 1);
  const onnx::NodeProto node = model.graph().node(0);
  absl::StatusOr<onnx::FunctionProto> body = GradientFunctionBody(node);
  ASSERT_TRUE(body.ok()) << body.status();
  model.mutable_graph()->clear_node();
  onnx::FunctionExpandHelper(node, *body, *model.mutable_graph(), "body_");
  const std::vector<Tensor> outputs = Model(model).Run(inputs);
  ASSERT_EQ(outputs.size(), expected.size()) << "the expanded body did not run";
  for (size_t k = 0; k < outputs.size(); ++k) {
    ExpectClose(ToDoubles(outputs[k]), ToDoubles(expected[k]), 1e-9, 1e-7,
                absl::StrCat(node.op_type(), "'s function body, output ", k));
  }
}

// One gradient op checked against its forward op: `forward` and `grad` are graphs in ONNX text
// ($T); the grad model's outputs are the gradients of the forward inputs listed in `wrt`, in
// that order, of sum(forward output `output` * r).
struct GradCase {
  std::string forward, grad;
  std::vector<Value> inputs;  // of the forward model, FP64
  std::vector<size_t> wrt;
  size_t output = 0;
  // The grad model's inputs from the forward inputs, the forward outputs and r (dy).
  std::function<std::vector<Value>(const std::vector<Value>& inputs,
                                   const std::vector<Value>& outputs, const Value& r)>
      grad_inputs;
  std::vector<size_t> statistics;  // grad inputs of type float (statistics), whatever $T is
};

inline Value OutputValue(const Tensor& t) { return {DType::kDouble, t.shape(), ToDoubles(t)}; }

// The case's grad op in FP64 against central differences of its forward op in FP64; then the
// grad op in `low` (FP16 or BF16) against its FP32 result on the same (rounded) inputs, rounded.
inline void CheckGradCase(const GradCase& c, DType low = DType::kFloat16, double low_rtol = 2e-3) {
  const Model forward(c.forward, DType::kDouble), grad(c.grad, DType::kDouble);
  std::vector<Value> outputs;
  for (const Tensor& t : forward.Run(c.inputs)) outputs.push_back(OutputValue(t));
  ASSERT_GT(outputs.size(), c.output) << "forward run failed";
  const Value r = Pseudo(DType::kDouble, outputs[c.output].shape, -1, 1, 77);
  std::vector<Value> grad_inputs = c.grad_inputs(c.inputs, outputs, r);
  for (size_t i : c.statistics) grad_inputs[i] = As(grad_inputs[i], DType::kFloat);
  const std::vector<Tensor> analytic = grad.Run(grad_inputs);
  ASSERT_EQ(analytic.size(), c.wrt.size()) << "grad run failed";
  CheckFunctionBody(c.grad, grad_inputs, analytic);
  for (size_t k = 0; k < c.wrt.size(); ++k) {
    const std::vector<double> numeric =
        NumericGradient(forward, c.inputs, c.wrt[k], c.output, r.values, 1e-6);
    ExpectClose(ToDoubles(analytic[k]), numeric, 1e-6, 1e-5,
                absl::StrCat("gradient of forward input ", c.wrt[k], " (grad output ", k, ")"));
  }
  // Low precision: same inputs rounded to `low`, statistics kept in FP32.
  std::vector<Value> rounded = AsAll(grad_inputs, low), as_float = rounded;
  for (size_t i : c.statistics) rounded[i] = as_float[i] = grad_inputs[i];
  for (Value& v : as_float) {
    if (v.dtype == low) v.dtype = DType::kFloat;  // exact: every FP16/BF16 value is an FP32 one
  }
  const std::vector<Tensor> low_out = Model(c.grad, low).Run(rounded);
  const std::vector<Tensor> float_out = Model(c.grad, DType::kFloat).Run(as_float);
  ASSERT_EQ(low_out.size(), c.wrt.size());
  ASSERT_EQ(float_out.size(), c.wrt.size());
  for (size_t k = 0; k < c.wrt.size(); ++k) {
    EXPECT_EQ(low_out[k].dtype(), low);
    const Value expected = As(OutputValue(float_out[k]), low);
    ExpectClose(ToDoubles(low_out[k]), expected.values, 1e-4, low_rtol,
                absl::StrCat(TypeName(low), " grad output ", k, " against FP32 rounded"));
  }
}

// "3,5" for a shape [3, 5].
inline std::string Dims(const Shape& shape) { return absl::StrJoin(shape, ","); }

}  // namespace ampc::testing
